"""What the controller remembers of one workload between reconciles.

One record per workload, kept in memory by the reconciler. Whatever must survive a restart
or a leader change is also recorded on the workload itself (baseline hash, config hash,
rollout times), so losing this record costs at most a less specific Event wording.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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


@dataclass(slots=True)
class WorkloadMemory:
    """The reconciler's memory of one workload."""

    rollouts: set[float] = field(default_factory=set)
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

    def observe(self, view: WorkloadView) -> bool:
        """Update from a new view of the workload; True when the view is the watch echo
        of our own last write."""
        if self.strategy is not None and view.settings.strategy != self.strategy:
            self.applied = None  # a new strategy starts from what the workload records
            self.strategy = None
        if self.applied is not None and self.applied == view.applied_hash:
            self.applied = None
            return True
        return False

    def remember_applied(self, strategy: str, config_hash: str) -> None:
        """Record that `strategy` just applied (or adopted) `config_hash`."""
        self.applied = config_hash
        self.strategy = strategy

    def remember_rollout(self, now: float, view: WorkloadView) -> None:
        """Record a rollout at `now` (after `remember_applied`): the flap cap counts it, and
        keeps only the rollouts still within the workload's window."""
        window = view.settings.rollout_window
        self.rollouts = {*recent_rollouts(self.rollouts, view.rolled_at, now, window), now}
