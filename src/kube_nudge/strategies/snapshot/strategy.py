"""The ``snapshot`` strategy: every consumed ConfigMap/Secret version becomes an immutable
copy, and the pod template points at the copies, so a config change is a true rolling
release. Old pods keep their old data even when they restart mid-rollout or a week
later, and ``kubectl rollout undo`` brings the old data back with the old template.

The class carries out the strategy's hooks through one collaborator per subject, each in
its own module: ``rolling`` makes the copies for a change (or at adoption) and points the
template at them, ``upkeep`` keeps the copies' owners in order (``maintain``), and
``rollback`` puts a failed rollout back onto an earlier revision's copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube_nudge.kube.client import JSON
from kube_nudge.kube.workloads import Target
from kube_nudge.model import Adopt, Apply, Assessment
from kube_nudge.strategies.base import Host, StrategyContext, Webhook
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.snapshot.copies import SNAPSHOT_LABEL, copyable
from kube_nudge.strategies.snapshot.model import SNAPSHOT_MODEL
from kube_nudge.strategies.snapshot.rollback import Rollback
from kube_nudge.strategies.snapshot.rolling import CopyMaker, Roller, leave_copies
from kube_nudge.strategies.snapshot.upkeep import Upkeep
from kube_nudge.strategies.snapshot.webhook import REVIEW_RESULTS, SnapshotWebhook
from kube_nudge.strategies.writes import AdoptsBaseline

__all__ = ["SnapshotStrategy"]


class SnapshotStrategy(AdoptsBaseline):
    """Roll the workload onto immutable copies of its config. Adoption records a baseline
    as the rollout strategy does (no restart), and copies the config the pods run without
    touching the template (``kube-nudge.io/baseline-snapshots``): a failed first change
    rolls back onto those copies, where the revision before it names the sources
    themselves, which by then hold the failed config."""

    name = "snapshot"
    capped = True
    delivers = True
    #: What a rollback goes back to (``RollingBack``).
    rolls_back_to = "the previous config snapshots"
    #: Its copies are its own objects, never sources (``OwnsSources``).
    owned_source_labels = frozenset({SNAPSHOT_LABEL})
    model = SNAPSHOT_MODEL

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        # Its own metric labels start at 0 (runtime/metrics.py says why): the webhook's
        # reviews, served or not, and its writes of copies.
        metrics = context.metrics
        for result in REVIEW_RESULTS:
            metrics.admission.labels(result=result)
        for resource in copyable().values():
            metrics.writes.labels(kind=resource.kind)
        maker = CopyMaker(context)
        self._roller = Roller(context, maker)
        self._upkeep = Upkeep(context, maker)
        self._rollback = Rollback(context)

    @staticmethod
    def webhooks(host: Host, hmac_key: Callable[[], bytes]) -> Sequence[Webhook]:
        """Its admission webhook: a re-applied manifest keeps its copies (``ServesWebhooks``)."""
        return (SnapshotWebhook(host, hmac_key),)

    @staticmethod
    def leave_stand_ins(
        target: Target, workload: JSON, plan: Apply, recorded: Mapping[str, str | None]
    ) -> dict[str, Any] | None:
        """The rollout patch of a workload switched away from this strategy
        (``NamesStandIns``): its template names the sources again (``rolling.leave_copies``)."""
        return leave_copies(target, workload, plan, recorded)

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Record the baseline (nothing restarts) with copies of the config the pods run,
        unless the template names copies already (``Roller.adopt``)."""
        await self._roller.adopt(target, plan, assessment, changes)

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Make the copies, point the template at them: the workload rolls (``Roller.roll``)."""
        self._roller.roll(target, plan, assessment, changes)

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        """Give each of the workload's copies exactly the owners that need it; seconds until
        it wants another look (``Upkeep.maintain``; nothing of the workload's own)."""
        return await self._upkeep.maintain(target, assessment)

    async def rollback(self, target: Target, failed_hash: str, changes: WorkloadChanges) -> str:
        """Put ``target`` back on the copies of its latest revision that doesn't run
        ``failed_hash``; a description of it (``Rollback.rollback``)."""
        return await self._rollback.rollback(target, failed_hash, changes)
