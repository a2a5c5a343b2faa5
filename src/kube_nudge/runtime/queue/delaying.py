"""The work queue's lower layers (client-go's delaying queue over its de-duplicating
``Type``, with kube-nudge's debounce windows), in one module because the delaying queue is
the ready queue's only user and every call of one goes through the other.

``DedupQueue``, the ready keys:

- A key is queued at most once: reconciles are level-triggered, so one pass serves every
  time it was added. Keys are handed out oldest-ready first (``since``, the time a key
  became ready, as the delaying layer says).
- A key being processed is never handed to a second worker; re-adding it marks it dirty
  and it is queued again when the worker calls ``done``.
- A key that becomes ready wakes one waiting worker, not all of them: with 64 idle workers
  on one ``asyncio.Event``, each change woke every worker, and each made a ``wait_for``
  task and timer again before one of them took the key. ``on_wait`` tells the delaying
  layer that a worker is about to wait, so that it keeps one timer for the next key it
  delays only while someone waits.

``DelayingQueue``, the keys due later: each queued key has its reasons (the pure
``model.debounce.Pending``): they say when it is due, and the key goes down to the ready
queue then, ready since that time. Until a worker takes it its reasons can still change: a
change arriving for a key that is due but not yet taken (every worker busy) can hold it
back again, and the key leaves the ready queue until its window ends.

- A key taken while a change's window is open (a retry, a requeue, a follow-up taken
  early) leaves the window open: ``window_open`` says so, for the pass not to act on that
  change, and the key comes back at the window's end.
- One timer, the queue's own, stands for the earliest key still to come, and only while a
  worker waits: a key due while every worker is busy is found by the next ``get``.
- A watch (``watch_after``: look again at a rollout's deadline unless something brings the
  key sooner) is a reason like the others, but until it is due it is no work: the queue's
  length and ``wait_idle`` leave it out, so waiting for the queue to empty does not wait
  for a deadline minutes away.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kube_nudge.model.debounce import Pending
from kube_nudge.model.pacing import Pacing

__all__ = ["DedupQueue", "DelayingQueue"]

K = TypeVar("K", bound=Hashable)


def _nothing() -> None:
    """The default ``on_wait``."""


class DedupQueue(Generic[K]):
    """Ready keys, each queued once and processed by one worker at a time."""

    def __init__(self, *, on_wait: Callable[[], None] = _nothing) -> None:
        self._queued: dict[K, float] = {}  # ready, not processing: since when
        # (since, order, key); an entry whose since isn't the key's in ``_queued`` is stale
        # (the key was taken, discarded or moved), skipped when it reaches the top.
        self._heap: list[tuple[float, int, K]] = []
        self._order = itertools.count()
        self._processing: set[K] = set()
        self._dirty: dict[K, float] = {}  # re-added while processing: since when
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._on_wait = on_wait

    def __len__(self) -> int:
        """Keys queued or waiting for their worker's ``done``."""
        return len(self._queued) + len(self._dirty)

    def __contains__(self, key: object) -> bool:
        return key in self._queued or key in self._dirty

    @property
    def busy(self) -> bool:
        """True while any key is being processed."""
        return bool(self._processing)

    @property
    def waiting(self) -> bool:
        """True while a worker waits in ``get``."""
        return bool(self._waiters)

    def add(self, key: K, since: float) -> None:
        """Queue ``key``, ready since ``since``; a key already queued takes that time (its
        place among the others moves with it). While it is processed: once it is done."""
        if key in self._processing:
            self._dirty[key] = since
            return
        if self._queued.get(key) == since:
            return
        self._queued[key] = since
        heapq.heappush(self._heap, (since, next(self._order), key))
        self._wake_one()

    def discard(self, key: K) -> None:
        """Unqueue ``key`` (it is not ready after all, or forgotten); if it is processed,
        ``done`` will not queue it again."""
        self._queued.pop(key, None)
        self._dirty.pop(key, None)

    async def get(self) -> K:
        """Wait for the oldest ready key and mark it as being processed."""
        while True:
            key = self._take()
            if key is not None:
                return key
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self._on_wait()
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: the wake goes to another
                raise
            finally:
                if not waiter.done():
                    self._waiters.remove(waiter)

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        since = self._dirty.pop(key, None)
        if since is not None:
            self.add(key, since)

    def _take(self) -> K | None:
        """The oldest ready key, now marked as being processed; None if there is none."""
        heap = self._heap
        while heap:
            since, _, key = heapq.heappop(heap)
            if self._queued.get(key) != since:
                continue  # stale
            del self._queued[key]
            self._processing.add(key)
            if heap:
                self._wake_one()  # more may be ready: another waiter takes the next
            return key
        return None

    def _wake_one(self) -> None:
        """Let one waiting ``get`` look again."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class DelayingQueue(Generic[K]):
    """Keys become available to ``get`` when due, once each."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._ready: DedupQueue[K] = DedupQueue(on_wait=self._on_wait)
        # Each queued key's reasons; also a processed key's: re-added, or its window open.
        self._pending: dict[K, Pending] = {}
        self._due_at: dict[K, float] = {}  # each key still to come: when (heap check)
        self._heap: list[tuple[float, int, K]] = []
        self._watching: set[K] = set()  # queued keys whose only reason is a watch not yet due
        self._counter = itertools.count()
        self._timer: asyncio.TimerHandle | None = None  # wakes a waiter at the heap's top
        self._timer_at = math.inf  # what ``_timer`` is set for (monotonic seconds)
        self._idle = asyncio.Event()

    def __len__(self) -> int:
        """Keys queued, processed ones with a reason to come back included; a watch not yet
        due is no work (``watch_after``) and not counted."""
        return len(self._pending) - len(self._watching)

    def add(self, key: K, hold: Pacing | float = 0.0) -> None:
        """Queue ``key`` for a change: due at the end of the window it opens or joins
        (``debounce``); a float holds it that many seconds (a fixed window); with nothing
        to hold it, now."""
        now = self._monotonic()
        if not isinstance(hold, Pacing):
            hold = Pacing(debounce=max(hold, 0.0))
        pending = self._pending_for(key)
        if hold.immediate:
            pending.at_most(now)
        else:
            pending.change(now, hold)
        self._schedule(key, pending)

    def add_own(self, key: K, delay: float, hold: Pacing | float | None = None) -> None:
        """Queue ``key`` for one of its own events: due after ``delay`` seconds, opening no
        window a later change could ride in, and never extending, shortening or restarting
        one; ``hold`` is what a change of the key would be held by now (its debounce may
        have changed: that takes effect on an open window), by default a fixed window of
        ``delay``."""
        now, delay = self._monotonic(), max(delay, 0.0)
        if not isinstance(hold, Pacing):
            hold = Pacing(debounce=delay if hold is None else max(hold, 0.0))
        pending = self._pending_for(key)
        pending.own_event(now, delay, hold)
        self._schedule(key, pending)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` ``delay`` seconds from now, never held back by a window (a retry, a
        requeue)."""
        pending = self._pending_for(key)
        pending.at_most(self._monotonic() + max(delay, 0.0))
        self._schedule(key, pending)

    def watch_after(self, key: K, delay: float) -> None:
        """Look at ``key`` ``delay`` seconds from now unless something brings it sooner (the
        deadline of a rollout in progress, whose status changes mostly come first): a reason
        like ``add_after``'s, but no queued work until it is due. Taking the key serves it,
        as any other reason."""
        pending = self._pending_for(key)
        pending.watch_until(self._monotonic() + max(delay, 0.0))
        self._schedule(key, pending)

    def ready_at(self, key: K) -> float | None:
        """When a queued ``key`` is due (monotonic seconds), else None."""
        pending = self._pending.get(key)
        return pending.ready_at if pending is not None else None

    def window_open(self, key: K) -> bool:
        """True while a change's window is open for ``key`` (being processed or not): a pass
        taken early must not act on the change it holds back."""
        pending = self._pending.get(key)
        window = pending.window if pending is not None else None
        return window is not None and window.end > self._monotonic()

    @property
    def busy(self) -> bool:
        """True while any key is being processed."""
        return self._ready.busy

    async def get(self) -> K:
        """Wait for the next due key and mark it as being processed."""
        self._promote(self._monotonic())  # what came due meanwhile: taken without waiting
        key = await self._ready.get()
        self._taken(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, it is queued again (when
        due: with the same window, not one opened now)."""
        self._ready.done(key)
        if not self._ready.busy and not len(self):
            self._idle.set()

    async def wait_idle(self) -> None:
        """Wait until the queue is next seen empty with nothing in progress (watches not
        yet due left out)."""
        if not self._ready.busy and not len(self):
            return
        self._idle.clear()
        await self._idle.wait()

    def forget(self, key: K) -> None:
        """Drop ``key``'s reasons to be looked at, e.g. when its object was deleted (a pass
        in progress finishes, and it is not queued again)."""
        self._pending.pop(key, None)
        self._due_at.pop(key, None)
        self._watching.discard(key)
        self._ready.discard(key)

    def _pending_for(self, key: K) -> Pending:
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = Pending()
        return pending

    def _schedule(self, key: K, pending: Pending) -> None:
        """Hand ``key`` down to the ready queue if it is due, else keep it until it is."""
        ready_at, now = pending.ready_at, self._monotonic()
        if pending.work or ready_at <= now:
            self._watching.discard(key)
        else:
            self._watching.add(key)
        if self._due_at.get(key) == ready_at:  # unchanged: it keeps its place
            if ready_at <= now:
                self._promote(now)
            return
        if ready_at <= now:
            self._due_at.pop(key, None)  # its entry in the heap, if any, is stale now
            self._promote(now)  # keys due before it are ready before it
            self._ready.add(key, ready_at)
            return
        self._ready.discard(key)  # due later after all: a change holds it back again
        self._due_at[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._counter), key))
        self._arm(ready_at)

    def _promote(self, now: float) -> None:
        """Hand every key due by ``now`` down to the ready queue, earliest first."""
        heap = self._heap
        while heap:
            due, _, key = heap[0]
            if self._due_at.get(key) != due:
                heapq.heappop(heap)  # superseded by another entry, handed down, or forgotten
                continue
            if due > now:
                break
            heapq.heappop(heap)
            del self._due_at[key]
            self._watching.discard(key)  # a watch due is work now
            self._ready.add(key, due)

    def _taken(self, key: K) -> None:
        """A worker took ``key``: its reasons are served, except an open window."""
        pending = self._pending.pop(key, None)
        self._watching.discard(key)
        window = pending.window if pending is not None else None
        if window is not None and window.end > self._monotonic():
            # Taken early (a retry, a requeue, a follow-up) while a change's window is
            # open: the window stays, and brings the key back at its end.
            kept = self._pending[key] = Pending(window=window)
            self._schedule(key, kept)

    def _on_wait(self) -> None:
        """A worker is about to wait: hand down what is due, and time the next key."""
        self._promote(self._monotonic())
        if self._heap:
            self._arm(self._heap[0][0])

    def _arm(self, due: float) -> None:
        """Make sure a waiter is woken by ``due`` (one timer, for the earliest)."""
        if not self._ready.waiting or due >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        delay = max(due - self._monotonic(), 0.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._timer_due)

    def _timer_due(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._on_wait()  # wakes a waiter per key handed down; times the next for the rest
