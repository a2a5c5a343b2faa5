"""The ``rollout`` strategy (the default): write the config hash on the pod template, so
the workload's own controller performs its normal rolling update (new ReplicaSet,
controller revision, or the next Job of a CronJob). The writes are ``strategies.writes``,
which the other strategies share where they roll or adopt as this one does.
"""

from __future__ import annotations

from kube_nudge.kube.workloads import Target
from kube_nudge.model import Apply, Assessment
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.writes import AdoptsBaseline, roll

__all__ = ["RolloutStrategy"]


class RolloutStrategy(AdoptsBaseline):
    """Roll the workload through its own controller; adopt by recording a baseline."""

    name = "rollout"
    capped = True
    delivers = True

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Write the new hash on the pod template: the workload rolls."""
        roll(self._context, target, plan, assessment, changes)
