"""A deduplicating, delaying asyncio work queue of keys (client-go's workqueue semantics).

- A key is queued at most once. One pass over it serves every reason it was queued for
  (reconciles are level-triggered), and it is ready at the earliest of them:
  - ``add(key, hold)``, a change: opens a window, or joins the one already open, so changes
    arriving inside it coalesce into one reconcile. The window ends (``Pacing.end``) when the
    fixed part (``hold.debounce`` from when it opened) is over and, with a quiet window
    (``hold.quiet``, ``debounce: auto``), once no change has arrived for that long, but
    never later than ``hold.cap`` after it opened. A longer debounce asked while the window
    is open (the workload's debounce was raised) makes it longer, counted from when it
    opened; a shorter one (lowered) can end it sooner, ``debounce`` from now. A float is a
    fixed window of that many seconds.
  - ``add_own(key, delay)``, an event of the key's own (a workload's status update, an edit
    of its other fields): looked at after ``delay``, but it opens no window. A change that
    comes while only such events wait gets its own whole window, from its own time; the
    events wait with it (at most one window longer). While a window is open they join it
    without extending, shortening or restarting it.
  - ``add(key)`` (no hold), retries (``add_after_failure``) and requeues (``settle``):
    at their own time, never held back by a window. A pass they bring while a change's
    window is open leaves the window open (``window_open`` says so, for the pass not to act
    on that change): the key comes back at the window's end.
- A key being processed is never handed to a second worker; re-adding it marks it dirty
  and it is queued again, with the same window, when the worker calls ``done``.
- A key that becomes ready wakes one waiting worker, not all of them: with 64 idle workers
  on one ``asyncio.Event``, each change woke every worker, and each made a ``wait_for``
  task and timer again before one of them took the key. One timer, the queue's own, stands
  for the earliest key still to come.
- Requeue policy belongs to the queue's owner, as in controller-runtime: a failed key is
  re-added with a per-key exponential backoff (``add_after_failure``), reset by
  ``succeeded`` or when the key is forgotten.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kube_nudge.model.pacing import Pacing
from kube_nudge.runtime.backoff import Backoff

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Window:
    """A window a change opened: its fixed part, its latest change and its hold."""

    opened: float
    fixed: tuple[float, float]
    """(start, length) of the fixed part (the debounce)."""
    last: float
    hold: Pacing

    @property
    def end(self) -> float:
        return self.hold.end(self.opened, self.fixed[0] + self.fixed[1], self.last)

    def join(self, now: float, hold: Pacing, *, change: bool) -> None:
        """Another change (``change``) or an own event of the key arrived at ``now``."""
        self.fixed = _join(self.fixed, (now, hold.debounce))
        if change:
            self.last = now
        # No quiet window once the debounce is a duration; else the slowest writer seen in
        # the window sets it (an own event brings no writer of its own).
        quiet = 0.0
        if hold.quiet > 0:
            quiet = max(hold.quiet, self.hold.quiet) if change else self.hold.quiet
        self.hold = Pacing(hold.debounce, quiet, hold.cap)


@dataclass(slots=True)
class _Pending:
    """Why a key is queued: it is ready at the earliest of ``at`` and either the end of its
    window or, with no window open, ``own``."""

    at: float = math.inf
    """Immediate looks and retries: never held back."""
    window: _Window | None = None
    """The window a change opened."""
    own: float = math.inf
    """The key's own events, while no window is open."""

    @property
    def ready_at(self) -> float:
        if self.window is not None:
            return min(self.at, self.window.end)
        return min(self.at, self.own)

    def change(self, now: float, hold: Pacing) -> None:
        """A change: open a window, or join (and maybe resize) the open one; the key's own
        events waiting without a window now wait for it."""
        if self.window is None:
            self.window = _Window(now, (now, hold.debounce), now, hold)
        else:
            self.window.join(now, hold, change=True)
        self.own = math.inf

    def own_event(self, now: float, delay: float, hold: Pacing) -> None:
        if self.window is None:
            self.own = min(self.own, now + delay)
        else:
            self.window.join(now, hold, change=False)


def _join(window: tuple[float, float], new: tuple[float, float]) -> tuple[float, float]:
    """The fixed part after ``new`` (asked at its time, with its length) while ``window`` is
    open: a longer length lengthens it from its start; else the earlier end wins."""
    opened, length = window
    if new[1] > length:
        return opened, new[1]
    return new if new[0] + new[1] < opened + length else window


class WorkQueue(Generic[K]):
    """Keys become available to ``get`` at their ready time, once each."""

    def __init__(
        self,
        *,
        backoff: Backoff[K] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff: Backoff[K] = backoff if backoff is not None else Backoff()
        self._monotonic = monotonic
        self._queued: dict[K, _Pending] = {}  # waiting or ready keys
        self._ready_at: dict[K, float] = {}  # each queued key's ready time (heap check)
        self._heap: list[tuple[float, int, K]] = []
        self._processing: set[K] = set()
        self._dirty: dict[K, _Pending] = {}  # re-added while processing
        self._counter = itertools.count()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None  # wakes a waiter at the heap's top
        self._timer_at = math.inf  # what ``_timer`` is set for (monotonic seconds)
        self._idle = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queued) + len(self._dirty)

    def add(self, key: K, hold: Pacing | float = 0.0) -> None:
        """Queue ``key`` for a change: ready at the end of the window it opens or joins (see
        the module's text); a float holds it that many seconds (a fixed window); with
        nothing to hold it, now."""
        now = self._monotonic()
        if not isinstance(hold, Pacing):
            hold = Pacing(debounce=max(hold, 0.0))
        if hold.immediate:
            self._at(key, now)
        else:
            self._update(key, lambda pending: pending.change(now, hold))

    def add_own(self, key: K, delay: float, hold: Pacing | float | None = None) -> None:
        """Queue ``key`` for one of its own events: ready after ``delay`` seconds, opening no
        window a later change could ride in, and never extending, shortening or restarting
        one; ``hold`` is what a change of the key would be held by now (its debounce may
        have changed: that takes effect on an open window), by default a fixed window of
        ``delay``."""
        now, delay = self._monotonic(), max(delay, 0.0)
        if not isinstance(hold, Pacing):
            hold = Pacing(debounce=delay if hold is None else max(hold, 0.0))
        self._update(key, lambda pending: pending.own_event(now, delay, hold))

    def _at(self, key: K, ready_at: float) -> None:
        def earlier(pending: _Pending) -> None:
            pending.at = min(pending.at, ready_at)

        self._update(key, earlier)

    def _update(self, key: K, update: Callable[[_Pending], None]) -> None:
        if key in self._processing:
            update(self._dirty.setdefault(key, _Pending()))
            return
        pending = self._queued.setdefault(key, _Pending())
        update(pending)
        self._push(key, pending)

    def _push(self, key: K, pending: _Pending) -> None:
        ready_at = pending.ready_at
        if self._ready_at.get(key) == ready_at:
            return
        self._ready_at[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._counter), key))
        if ready_at <= self._monotonic():
            self._wake_one()
        else:
            self._arm(ready_at)

    def _wake_one(self) -> None:
        """Let one waiting ``get`` look at the heap again."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm(self, ready_at: float) -> None:
        """Make sure a waiter is woken by ``ready_at`` (one timer, for the earliest)."""
        if not self._waiters or ready_at >= self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = ready_at
        delay = max(ready_at - self._monotonic(), 0.0)
        self._timer = asyncio.get_running_loop().call_later(delay, self._timer_due)

    def _timer_due(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self._wake_one()

    def add_after_failure(self, key: K) -> float:
        """Queue ``key`` again after its backoff delay (which grows with each consecutive
        failure); returns the delay."""
        delay = self.backoff.failed(key)
        self._at(key, self._monotonic() + delay)
        return delay

    def succeeded(self, key: K) -> None:
        """``key`` was processed without failure: reset its backoff."""
        self.backoff.succeeded(key)

    def settle(self, key: K, *, failed: bool, again: float | None = None) -> None:
        """After ``done``: retry a failed ``key`` with backoff; else reset its backoff and,
        with ``again``, queue it after that many seconds."""
        if failed:
            self.add_after_failure(key)
            return
        self.succeeded(key)
        if again is not None:
            self._at(key, self._monotonic() + max(again, 0.0))

    def ready_at(self, key: K) -> float | None:
        """When a queued ``key`` becomes ready (monotonic seconds), else None."""
        pending = self._queued.get(key, self._dirty.get(key))
        return pending.ready_at if pending is not None else None

    async def get(self) -> K:
        """Wait for the next ready key and mark it as being processed."""
        while True:
            key = self._take()
            if key is not None:
                return key
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            if self._heap:
                self._arm(self._heap[0][0])
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: the wake goes to another
                raise
            finally:
                if not waiter.done():
                    self._waiters.remove(waiter)

    def _take(self) -> K | None:
        """The next ready key, now marked as being processed; None if none is ready (the
        next waiter is then woken when one is)."""
        now = self._monotonic()
        while self._heap:
            ready_at, _, key = self._heap[0]
            if self._ready_at.get(key) != ready_at:
                heapq.heappop(self._heap)  # superseded by another entry, or taken
                continue
            if ready_at > now:
                break
            heapq.heappop(self._heap)
            del self._ready_at[key]
            pending = self._queued.pop(key)
            self._processing.add(key)
            if pending.window is not None and pending.window.end > now:
                # Taken early (a retry, a requeue, a follow-up) while a change's window
                # is open: the window stays, and brings the key back at its end.
                self._dirty[key] = _Pending(window=pending.window)
            if self._heap and self._heap[0][0] <= now:
                self._wake_one()  # more are ready: another waiter takes the next
            elif self._heap:
                self._arm(self._heap[0][0])
            return key
        return None

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        pending = self._dirty.pop(key, None)
        if pending is not None:
            self._queued[key] = pending  # the same window, not one opened now
            self._push(key, pending)
        if not self._processing and not self._queued:
            self._idle.set()

    def window_open(self, key: K) -> bool:
        """True while a change's window is open for ``key`` (being processed or not): a pass
        taken early must not act on the change it holds back."""
        pending = self._dirty.get(key) if key in self._processing else self._queued.get(key)
        window = pending.window if pending is not None else None
        return window is not None and window.end > self._monotonic()

    @property
    def busy(self) -> bool:
        """True while any key is being processed."""
        return bool(self._processing)

    async def wait_idle(self) -> None:
        """Wait until the queue is next seen empty with nothing in progress."""
        if not self._processing and not self._queued and not self._dirty:
            return
        self._idle.clear()
        await self._idle.wait()

    def forget(self, key: K) -> None:
        """Drop a queued (not processing) key and its backoff, e.g. when its object was
        deleted."""
        self._queued.pop(key, None)
        self._ready_at.pop(key, None)
        self._dirty.pop(key, None)
        self.backoff.succeeded(key)
