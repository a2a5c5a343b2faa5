"""The work queue's bottom layer: keys ready to be worked on, each at most once (client-go's
workqueue ``Type``).

- A key is queued at most once: reconciles are level-triggered, so one pass serves every
  time it was added. Keys are handed out oldest-ready first (``since``, the time a key
  became ready, as the layer above says).
- A key being processed is never handed to a second worker; re-adding it marks it dirty
  and it is queued again when the worker calls ``done``.
- A key that becomes ready wakes one waiting worker, not all of them: with 64 idle workers
  on one ``asyncio.Event``, each change woke every worker, and each made a ``wait_for``
  task and timer again before one of them took the key. ``on_wait`` tells the layer above
  that a worker is about to wait, so that it keeps one timer for the next key it delays
  only while someone waits.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["DedupQueue"]

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
