"""Our own writes the caches have not shown yet (controller-runtime's and the ReplicaSet
controller's "expectations").

A reconcile reads the caches, acts, and writes. Until the write's watch echo reaches the
cache, another pass would read what was there before the write and could act on it a
second time: confirm a hot reload twice, post its Event and count its metric twice, roll
twice. So every write of a workload records the ``resourceVersion`` its response carries
(``wrote``); a pass whose cached view is older than that does nothing but wait
(``lagging``), and the echo that brings the cache up to it wakes the pass it held back
(``observed``).

resourceVersions are compared as integers: every API server backed by etcd issues them
so (the CSI statuses are ordered the same way, ``model/mounts.py``). One that isn't an integer
sets no expectation. An expectation is forgotten after ``ttl`` seconds, so a watch that
never delivers the echo (or an object deleted meanwhile) holds a workload back no longer.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kube_nudge.model.projection import resource_version
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock

__all__ = ["EXPECTATION_TTL", "WriteExpectations"]

K = TypeVar("K", bound=Hashable)

EXPECTATION_TTL = 10.0
"""Seconds a write's echo is waited for before the caches are trusted again."""


@dataclass(slots=True)
class _Expected:
    version: int
    until: float
    deferred: bool = False


class WriteExpectations(Generic[K]):
    """Per key, the resourceVersion of our last write not yet seen in the caches."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, ttl: float = EXPECTATION_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._expected: dict[K, _Expected] = {}

    def wrote(self, key: K, response: Mapping[str, Any] | None) -> None:
        """A write of ``key`` answered ``response`` (the object as written)."""
        version = resource_version((response or {}).get("metadata") or {})
        if not version:
            return
        current = self._expected.get(key)
        deferred = current is not None and current.deferred
        if current is None or version > current.version:
            until = self._clock.monotonic() + self._ttl
            self._expected[key] = _Expected(version, until, deferred)

    def lagging(self, key: K, seen: int) -> float | None:
        """Seconds to wait at most when the cache, showing ``key`` at resourceVersion
        ``seen``, has not caught up with our last write of it (the pass that asks is then
        woken by ``observed``); None when it has, or the wait ran out."""
        expected = self._expected.get(key)
        if expected is None:
            return None
        left = expected.until - self._clock.monotonic()
        if seen >= expected.version or left <= 0:
            del self._expected[key]
            return None
        expected.deferred = True
        return left

    def observed(self, key: K, seen: int) -> bool:
        """The cache now shows ``key`` at ``seen``: True when that is the echo of our write
        a pass was held back for (look at ``key`` again now)."""
        expected = self._expected.get(key)
        if expected is None or seen < expected.version:
            return False
        del self._expected[key]
        return expected.deferred

    def forget(self, key: K) -> None:
        """``key`` was deleted: nothing of it will be seen again."""
        self._expected.pop(key, None)

    def __len__(self) -> int:
        return len(self._expected)
