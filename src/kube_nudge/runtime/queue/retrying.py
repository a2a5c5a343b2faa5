"""The work queue's top layer: retries with a per-key backoff (client-go's rate-limiting
queue, with ``runtime.backoff.Backoff`` as its per-item exponential limiter).

Requeue policy belongs to the queue's owner, as in controller-runtime: a failed key is
re-added with a per-key exponential backoff (``add_after_failure``), reset by ``succeeded``
or when the key is forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TypeVar

from kube_nudge.runtime.backoff import Backoff
from kube_nudge.runtime.queue.delaying import DelayingQueue

__all__ = ["WorkQueue"]

K = TypeVar("K", bound=Hashable)


class WorkQueue(DelayingQueue[K]):
    """A delaying, de-duplicating queue of keys whose failures come back after a growing
    delay."""

    def __init__(
        self,
        *,
        backoff: Backoff[K] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(monotonic=monotonic)
        self.backoff: Backoff[K] = backoff if backoff is not None else Backoff()

    def add_after_failure(self, key: K) -> float:
        """Queue ``key`` again after its backoff delay (which grows with each consecutive
        failure); returns the delay."""
        delay = self.backoff.failed(key)
        self.add_after(key, delay)
        return delay

    def succeeded(self, key: K) -> None:
        """``key`` was processed without failure: reset its backoff."""
        self.backoff.succeeded(key)

    def settle(
        self, key: K, *, failed: bool, again: float | None = None, watch: float | None = None
    ) -> None:
        """After ``done``: retry a failed ``key`` with backoff; else reset its backoff and,
        with ``again``, queue it after that many seconds, and with ``watch``, look at it
        then unless something brings it sooner (``watch_after``)."""
        if failed:
            self.add_after_failure(key)
            return
        self.succeeded(key)
        if again is not None:
            self.add_after(key, again)
        if watch is not None:
            self.watch_after(key, watch)

    def forget(self, key: K) -> None:
        """Drop a queued key and its backoff, e.g. when its object was deleted."""
        super().forget(key)
        self.backoff.succeeded(key)
