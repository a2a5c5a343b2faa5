"""What the controller remembers of one workload between reconciles.

One record per workload, kept in memory by the reconciler. Whatever must survive a restart
or a leader change is also recorded on the workload itself (baseline hash, config hash,
rollout times), so losing this record costs at most a less specific Event wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kube_nudge.model.hashing import SourceState
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.references import SourceRef

__all__ = ["CLOCK_SKEW", "WorkloadMemory", "recent_rollouts"]

CLOCK_SKEW = 60.0
"""Rollout times recorded by another replica this far in the future still count."""


def recent_rollouts(
    known: Iterable[float], recorded: Iterable[float], now: float, window: float
) -> list[float]:
    """Rollouts within the window ending at `now`, oldest first: those this process made
    (`known`) and those recorded on the workload (by us before a restart, or another
    leader)."""
    horizon = now - window
    return sorted({t for t in (*known, *recorded) if horizon < t <= now + CLOCK_SKEW})


@dataclass(frozen=True, slots=True)
class WorkloadMemory:
    """The reconciler's memory of one workload: an immutable value, which only the rollout
    book (``controller/book.py``) replaces."""

    rollouts: frozenset[float] = frozenset()
    """Times (Unix seconds) this process applied a change, for the flap cap."""
    applied: str | None = None
    """The hash last applied by `strategy` that the workload doesn't show (yet): the watch
    echo of our own write is pending, or the strategy records nothing on the workload."""
    strategy: str | None = None
    """The strategy that applied `applied`."""
    state: str | None = None
    """Outcome of the last reconcile, for ``kube_nudge_workloads{state}``: current,
    applied, held-missing, held-flapping, held-invalid or failed."""
    rolled_with: Mapping[SourceRef, SourceState] | None = None
    """Source states when the pods last got (or were found with) their config; None when
    unknown, e.g. after a restart. Lets an Event name the keys that changed."""

    def observed(self, view: WorkloadView) -> tuple[WorkloadMemory, bool]:
        """The record after a new view of the workload, and whether the view is the watch
        echo of our own last write."""
        memory = self
        if memory.strategy is not None and view.settings.strategy != memory.strategy:
            # A new strategy starts from what the workload records.
            memory = replace(memory, applied=None, strategy=None)
        if memory.applied is not None and memory.applied == view.applied_hash:
            return replace(memory, applied=None), True
        return memory, False

    def applying(self, strategy: str, config_hash: str) -> WorkloadMemory:
        """The record once `strategy` applies (or adopts) `config_hash`."""
        return replace(self, applied=config_hash, strategy=strategy)

    def with_rollout(self, now: float, view: WorkloadView) -> WorkloadMemory:
        """The record with a rollout at `now` (after `applying`): the flap cap counts it,
        and keeps only the rollouts still within the workload's window."""
        window = view.settings.rollout_window
        recent = recent_rollouts(self.rollouts, view.rolled_at, now, window)
        return replace(self, rollouts=frozenset({*recent, now}))
