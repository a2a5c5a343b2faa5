"""Reverse index: which workloads consume each ConfigMap/Secret."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from kube_nudge.model import SourceRef

W = TypeVar("W", bound=Hashable)


class ReverseIndex(Generic[W]):
    """source → set of workload keys, kept in step with each workload's references."""

    def __init__(self) -> None:
        self._consumers: dict[SourceRef, set[W]] = {}

    def update(self, workload: W, old: Iterable[SourceRef], new: Iterable[SourceRef]) -> None:
        """Replace ``workload``'s references ``old`` by ``new``."""
        old_set, new_set = set(old), set(new)
        for ref in old_set - new_set:
            consumers = self._consumers.get(ref)
            if consumers is not None:
                consumers.discard(workload)
                if not consumers:
                    del self._consumers[ref]
        for ref in new_set - old_set:
            self._consumers.setdefault(ref, set()).add(workload)

    def consumers(self, ref: SourceRef) -> frozenset[W]:
        """The workloads that consume ``ref`` (empty if none)."""
        return frozenset(self._consumers.get(ref, ()))

    def __len__(self) -> int:
        return len(self._consumers)
