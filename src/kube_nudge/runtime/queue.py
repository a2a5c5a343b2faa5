"""A deduplicating, delaying asyncio work queue of keys (client-go's workqueue semantics).

- A key is queued at most once; adding it again keeps the earliest ready time, so changes
  arriving inside a workload's debounce window coalesce into one reconcile.
- A key being processed is never handed to a second worker; re-adding it marks it dirty
  and it is queued again when the worker calls ``done``.
- Requeue policy belongs to the queue's owner, as in controller-runtime: a failed key is
  re-added with a per-key exponential backoff (``add_after_failure``), reset by
  ``succeeded`` or when the key is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from kube_nudge.runtime.backoff import Backoff

K = TypeVar("K", bound=Hashable)


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
        self._ready_at: dict[K, float] = {}  # queued (waiting or ready) keys
        self._heap: list[tuple[float, int, K]] = []
        self._processing: set[K] = set()
        self._dirty: dict[K, float] = {}  # re-added while processing
        self._counter = itertools.count()
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()

    def __len__(self) -> int:
        return len(self._ready_at) + len(self._dirty)

    def add(self, key: K, delay: float = 0.0) -> None:
        """Queue ``key`` to be ready after ``delay`` seconds (earliest request wins)."""
        ready_at = self._monotonic() + max(delay, 0.0)
        if key in self._processing:
            self._dirty[key] = min(ready_at, self._dirty.get(key, ready_at))
            return
        current = self._ready_at.get(key)
        if current is not None and current <= ready_at:
            return
        self._ready_at[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._counter), key))
        self._changed.set()

    def add_after_failure(self, key: K) -> float:
        """Queue ``key`` again after its backoff delay (which grows with each consecutive
        failure); returns the delay."""
        delay = self.backoff.failed(key)
        self.add(key, delay)
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
            self.add(key, again)

    def ready_at(self, key: K) -> float | None:
        """When a queued ``key`` becomes ready (monotonic seconds), else None."""
        return self._ready_at.get(key, self._dirty.get(key))

    async def get(self) -> K:
        """Wait for the next ready key and mark it as being processed."""
        while True:
            self._changed.clear()
            now = self._monotonic()
            while self._heap:
                ready_at, _, key = self._heap[0]
                if self._ready_at.get(key) != ready_at:
                    heapq.heappop(self._heap)  # superseded by an earlier entry, or taken
                    continue
                if ready_at > now:
                    break
                heapq.heappop(self._heap)
                del self._ready_at[key]
                self._processing.add(key)
                return key
            timeout = self._heap[0][0] - now if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        ready_at = self._dirty.pop(key, None)
        if ready_at is not None:
            self.add(key, ready_at - self._monotonic())
        if not self._processing and not self._ready_at:
            self._idle.set()

    @property
    def busy(self) -> bool:
        """True while any key is being processed."""
        return bool(self._processing)

    async def wait_idle(self) -> None:
        """Wait until the queue is next seen empty with nothing in progress."""
        if not self._processing and not self._ready_at and not self._dirty:
            return
        self._idle.clear()
        await self._idle.wait()

    def forget(self, key: K) -> None:
        """Drop a queued (not processing) key and its backoff, e.g. when its object was
        deleted."""
        self._ready_at.pop(key, None)
        self._dirty.pop(key, None)
        self.backoff.succeeded(key)
