"""What the rest of the controller reads of the caches: the ``Reader`` (client-go's listers),
what a pass reads of them at once (``Inputs``), and the key a workload is known by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kube_nudge.kube.informer import Key
from kube_nudge.kube.workloads import WorkloadKey
from kube_nudge.model import SourceKind, SourceRef, SourceView, WorkloadView

__all__ = ["Inputs", "Reader", "WorkloadKey"]


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the caches hold of one workload when a pass reads it, in one call
    (``Reader.inputs``): the book's ``Page`` is the other half of a pass's read."""

    view: WorkloadView
    sources: Mapping[SourceRef, SourceView | None]
    """Every source ``view`` consumes, as cached (None: absent, or out of scope)."""


class Reader(Protocol):
    """The cached views, and which workloads consume a source (the caches' index). Reading
    never calls the API server."""

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of a ConfigMap or Secret, if it exists (and is in scope)."""
        ...

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        """The cached view of an opted-in workload."""
        ...

    def inputs(self, key: WorkloadKey) -> Inputs | None:
        """The cached view of an opted-in workload and of every source it consumes."""
        ...

    def consumers(self, ref: SourceRef) -> Iterable[tuple[WorkloadKey, WorkloadView]]:
        """The cached workloads whose templates consume ``ref``, with their views (as
        client-go's ``Indexer.ByIndex`` returns the objects, not only their keys)."""
        ...

    def source_keys(self, kind: SourceKind) -> list[Key]:
        """(namespace, name) of every cached ConfigMap or Secret of ``kind``."""
        ...

    def workload_keys(self) -> list[WorkloadKey]:
        """Every opted-in workload cached."""
        ...

    def failed(self, key: WorkloadKey) -> bool:
        """Whether ``key``'s cached view records that its current rollout failed."""
        ...

    def any_failed(self) -> bool:
        """Whether any cached workload records that its current rollout failed."""
        ...
