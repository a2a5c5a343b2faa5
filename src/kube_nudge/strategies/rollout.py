"""The ``rollout`` strategy (the default): write the config hash on the pod template, so
the workload's own controller performs its normal rolling update (new ReplicaSet,
controller revision, or the next Job of a CronJob). The writes are ``strategies.writes``,
which the other strategies share where they roll or adopt as this one does.
"""

from __future__ import annotations

from kube_nudge.model import Adopt, Apply, Assessment
from kube_nudge.strategies.base import StrategyContext, Target
from kube_nudge.strategies.writes import record_baseline, roll

__all__ = ["RolloutStrategy"]


class RolloutStrategy:
    """Roll the workload through its own controller."""

    name = "rollout"
    capped = True
    delivers = True

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def adopt(self, target: Target, plan: Adopt, assessment: Assessment) -> None:
        """Record the baseline on the workload's metadata (not the template)."""
        await record_baseline(self._context, target, plan, assessment)

    async def apply(self, target: Target, plan: Apply, assessment: Assessment) -> None:
        """Write the new hash on the pod template: the workload rolls."""
        await roll(self._context, target, plan, assessment)
