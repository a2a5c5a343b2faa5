"""What the rest of the controller reads of the caches: the ``Reader`` (client-go's listers),
what a pass reads of them at once (``Inputs``), and the key a workload is known by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kube_nudge.kube.informer import Key
from kube_nudge.kube.workloads import WorkloadKey
from kube_nudge.model import SourceKind, SourceRef, SourceView, WorkloadView

__all__ = ["Inputs", "OwnNews", "OwnWrites", "Reader", "WorkloadKey"]


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the caches hold of one workload when a pass reads it, in one call
    (``Reader.inputs``): the book's ``Page`` is the other half of a pass's read."""

    view: WorkloadView
    sources: Mapping[SourceRef, SourceView | None]
    """Every source ``view`` consumes, as cached (None: absent, or out of scope)."""


@dataclass(frozen=True, slots=True)
class OwnNews:
    """What a change of a workload's cached view means for the controller's own writes,
    as the rollout book says when the caches ask it (``OwnWrites``), before any handler
    runs, as client-go's indexers do: handed to the workload handler with the event."""

    echo: bool = False
    """The view is the echo of our own last write."""
    caught_up: bool = False
    """The view is the echo a pass read too early was held back for: look again."""
    remembered: bool = False
    """A hash applied but not yet seen is remembered (the book's memory record)."""


class OwnWrites(Protocol):
    """What the caches ask of the controller's own writes (``RolloutBook``) on every change
    of a workload's view, before the handlers: the book keeps its state, the handlers get
    the answer as event data."""

    def news(self, key: WorkloadKey, view: WorkloadView | None) -> OwnNews:
        """Take in ``key``'s new view (None: deleted): what it means for our own writes."""
        ...

    def progress_moved(self, key: WorkloadKey) -> None:
        """``key``'s rollout progress moved with no change of its own view."""
        ...


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
