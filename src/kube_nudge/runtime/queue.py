"""A deduplicating, delaying asyncio work queue of keys (client-go's workqueue semantics).

- A key is queued at most once; adding it again keeps the earliest ready time, so changes
  arriving inside a workload's debounce window coalesce into one reconcile. One exception:
  a longer delay asked while a key waits out a debounce window (the workload's debounce was
  raised) makes that window longer, counted from when it opened. Otherwise an event queued
  under the old, shorter debounce (the workload's own status update) would carry a config
  change arriving meanwhile long before the new window ends. Immediate entries and retries
  (``settle``, ``add_after_failure``) are never held back this way.
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
_Entry = tuple[float, tuple[float, float] | None]
"""When a key is ready, and the debounce window it waits out ((opened at, length)), if any."""


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
        self._windows: dict[K, tuple[float, float]] = {}
        """(opened at, length) of each queued key waiting out a debounce window."""
        self._heap: list[tuple[float, int, K]] = []
        self._processing: set[K] = set()
        self._dirty: dict[K, _Entry] = {}  # re-added while processing
        self._counter = itertools.count()
        self._changed = asyncio.Event()
        self._idle = asyncio.Event()

    def __len__(self) -> int:
        return len(self._ready_at) + len(self._dirty)

    def add(self, key: K, delay: float = 0.0) -> None:
        """Queue ``key`` to be ready after ``delay`` seconds, a debounce window (earliest
        request wins, unless a longer window is asked while this one is open)."""
        self._add(key, delay, window=True)

    def _add(self, key: K, delay: float, *, window: bool) -> None:
        now = self._monotonic()
        delay = max(delay, 0.0)
        entry = (now + delay, (now, delay) if window and delay > 0 else None)
        if key in self._processing:
            self._dirty[key] = _merge(self._dirty.get(key), entry)
            return
        current = self._ready_at.get(key)
        if current is not None:
            entry = _merge((current, self._windows.get(key)), entry)
            if entry[0] == current:
                return
        self._put(key, entry)

    def _put(self, key: K, entry: _Entry) -> None:
        ready_at, window = entry
        self._ready_at[key] = ready_at
        if window is None:
            self._windows.pop(key, None)
        else:
            self._windows[key] = window
        heapq.heappush(self._heap, (ready_at, next(self._counter), key))
        self._changed.set()

    def add_after_failure(self, key: K) -> float:
        """Queue ``key`` again after its backoff delay (which grows with each consecutive
        failure); returns the delay."""
        delay = self.backoff.failed(key)
        self._add(key, delay, window=False)
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
            self._add(key, again, window=False)

    def ready_at(self, key: K) -> float | None:
        """When a queued ``key`` becomes ready (monotonic seconds), else None."""
        if key in self._ready_at:
            return self._ready_at[key]
        dirty = self._dirty.get(key)
        return dirty[0] if dirty is not None else None

    async def get(self) -> K:
        """Wait for the next ready key and mark it as being processed."""
        while True:
            self._changed.clear()
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
                self._windows.pop(key, None)
                self._processing.add(key)
                return key
            timeout = self._heap[0][0] - now if self._heap else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def done(self, key: K) -> None:
        """Mark ``key`` processed; if it was re-added meanwhile, queue it again."""
        self._processing.discard(key)
        entry = self._dirty.pop(key, None)
        if entry is not None:
            self._put(key, entry)  # the same window, not one opened now
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
        self._windows.pop(key, None)
        self._dirty.pop(key, None)
        self.backoff.succeeded(key)


def _merge(current: _Entry | None, new: _Entry) -> _Entry:
    """One entry for a key asked for twice: a longer debounce window asked while one is
    open lengthens it from its start; else the earliest ready time wins."""
    if current is None:
        return new
    ready_at, window = current
    if window is not None and new[1] is not None and new[1][1] > window[1]:
        opened = window[0]
        return opened + new[1][1], (opened, new[1][1])
    return new if new[0] < ready_at else current
