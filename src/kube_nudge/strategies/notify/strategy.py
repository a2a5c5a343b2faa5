"""The ``notify`` strategy: announce a config change, never touch the workload.

A Normal Event ``ConfigChanged`` on the workload names the sources and keys that changed
(never values), ``kube_nudge_notifications_total`` counts it, and the configured receivers
get it (kind ``changed``). Nothing is written to
the workload, so kube-nudge's memory of the last announced hash lives in this process
only: after a restart, a change made while it was down is announced once more as
"changed while kube-nudge was not watching".
"""

from __future__ import annotations

import logging

from kube_nudge.kube.events import NORMAL
from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    WorkloadView,
    changes_field,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.extensions import Delivery, StrategyModel
from kube_nudge.notifications.model import NotificationKind
from kube_nudge.strategies.base import StrategyContext, notification
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = ["NotifyStrategy"]

log = logging.getLogger(__name__)


def announced(view: WorkloadView, plan: Apply, assessment: Assessment) -> Delivery:
    """Its ``StrategyModel.delivery``: a change is only announced."""
    return Delivery("notify", "announced (Event ConfigChanged, receivers), never restarted")


class NotifyStrategy:
    """Tell, don't restart."""

    name = "notify"
    capped = False  # an Event per change; the recorder folds repeats into one count
    delivers = False  # `kube-nudge status` shows its workloads as notify-only
    model = StrategyModel(name, doc="notify only posts an Event ConfigChanged", delivery=announced)

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Nothing to record on the workload: the reconciler remembers the hash."""
        log.debug("watching %s at %s (notify)", target, plan.config_hash)

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Post ``ConfigChanged`` and count it, at the end of the pass (nothing to write)."""
        changes.then(lambda: self._changed(target, plan, assessment))

    def _changed(self, target: Target, plan: Apply, assessment: Assessment) -> None:
        what = describe_apply(plan, assessment.states, target.namespace)
        versions = describe_versions(plan, assessment, target.namespace)
        self._context.metrics.notifications.labels(kind=target.kind.resource.kind).inc()
        log.info(
            "config of %s changed (not restarting, strategy notify): %s",
            target,
            what,
            extra=target.log_fields(
                "notified", config_hash=plan.config_hash, changes=changes_field(plan)
            ),
        )
        message = (
            f"config changed: {what}"
            + (f" (versions: {versions})" if versions else "")
            + "; pods not restarted (kube-nudge.io/strategy: notify)"
        )
        self._context.events.post(target.ref, NORMAL, "ConfigChanged", message)
        self._context.notify(
            notification(
                target,
                NotificationKind.CHANGED,
                "ConfigChanged",
                message,
                plan.config_hash,
                plan.rolled_at[-1],
                change=versions,
            )
        )
