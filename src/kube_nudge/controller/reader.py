"""What the rest of the controller reads of the caches: the ``Reader`` (client-go's listers),
and the key a workload is known by."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kube_nudge.kube.informer import Key
from kube_nudge.kube.workloads import WorkloadKey
from kube_nudge.model import SourceKind, SourceRef, SourceView, WorkloadView

__all__ = ["Reader", "WorkloadKey"]


class Reader(Protocol):
    """The cached views, and which workloads consume a source (the caches' index). Reading
    never calls the API server."""

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of a ConfigMap or Secret, if it exists (and is in scope)."""
        ...

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        """The cached view of an opted-in workload."""
        ...

    def consumers(self, ref: SourceRef) -> Iterable[WorkloadKey]:
        """The cached workloads whose templates consume ``ref``."""
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
