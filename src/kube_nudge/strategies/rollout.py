"""The ``rollout`` strategy (the default): write the config hash on the pod template, so
the workload's own controller performs its normal rolling update (new ReplicaSet,
controller revision, or the next Job of a CronJob).

Writes are JSON merge patches that touch kube-nudge's annotations only, carry the
workload's uid as a precondition (a deleted-and-recreated workload answers 409 instead of
being patched) and name kube-nudge as field manager. They cannot clobber a concurrent
edit of anything else, and unlike server-side apply a patch never creates an object that
was deleted meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from kube_nudge.kube.client import MERGE_PATCH
from kube_nudge.kube.events import NORMAL
from kube_nudge.model import (
    BASELINE_HASH,
    CONFIG_HASH,
    ROLLED_AT,
    Adopt,
    Apply,
    Assessment,
    TemplatePath,
    annotation_patch,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.annotations import KEY_ID, format_rolled_at
from kube_nudge.strategies.base import StrategyContext, Target, changes_field

__all__ = ["CHANGE_CAUSE", "FIELD_MANAGER", "RolloutStrategy", "adopt_patch", "rollout_patch"]

log = logging.getLogger(__name__)

FIELD_MANAGER = "kube-nudge"
#: Copied by the Deployment controller onto the new ReplicaSet, where
#: `kubectl rollout history` shows it in its CHANGE-CAUSE column.
CHANGE_CAUSE = "kubernetes.io/change-cause"


def rollout_patch(
    template_path: TemplatePath,
    uid: str,
    config_hash: str,
    *,
    had_baseline: bool,
    rolled_at: Sequence[float],
    cause: str,
    key_id: str,
) -> dict[str, Any]:
    """The merge patch that rolls the workload to ``config_hash``, records the recent
    rollouts (``rolled_at``, this one included) for the flap cap, and says why."""
    annotations: dict[str, Any] = {
        ROLLED_AT: format_rolled_at(list(rolled_at)),
        CHANGE_CAUSE: f"kube-nudge: {cause}"[:1024],
        KEY_ID: key_id,
    }
    if had_baseline:
        annotations[BASELINE_HASH] = None  # the template now carries the hash
    patch = annotation_patch(template_path, CONFIG_HASH, config_hash)
    patch.setdefault("metadata", {}).update({"uid": uid, "annotations": annotations})
    return patch


def adopt_patch(uid: str, config_hash: str, key_id: str) -> dict[str, Any]:
    """The merge patch that records the running config's hash without rolling."""
    annotations = {BASELINE_HASH: config_hash, KEY_ID: key_id}
    return {"metadata": {"uid": uid, "annotations": annotations}}


class RolloutStrategy:
    """Roll the workload through its own controller."""

    name = "rollout"
    capped = True

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def adopt(self, target: Target, plan: Adopt, assessment: Assessment) -> None:
        """Record the baseline on the workload's metadata (not the template)."""
        patch = adopt_patch(target.view.uid, plan.config_hash, assessment.key_id)
        await self._patch(target, patch)
        log.info(
            "adopted %s at %s%s", target, plan.config_hash,
            " (hashes were made under another key)" if plan.new_key else "",
            extra=target.log_fields("adopted", config_hash=plan.config_hash,
                                    new_key=plan.new_key),
        )  # fmt: skip
        if plan.new_key:
            message = (
                "re-baselined without restarting: its config hash was made under another "
                "installation key (was the kube-nudge-hmac-key Secret replaced?)"
            )
        else:
            message = "recorded the hash of the config the pods run; the next change rolls them"
        self._context.events.post(target.ref, NORMAL, "Adopted", message)

    async def apply(self, target: Target, plan: Apply, assessment: Assessment) -> None:
        """Write the new hash on the pod template: the workload rolls."""
        what = describe_apply(plan, assessment.states, target.namespace)
        patch = rollout_patch(
            target.kind.template_path, target.view.uid, plan.config_hash,
            had_baseline=plan.had_baseline, rolled_at=plan.rolled_at, cause=what,
            key_id=assessment.key_id,
        )  # fmt: skip
        await self._patch(target, patch)
        self._context.metrics.nudges.labels(kind=target.kind.resource.kind).inc()
        log.info(
            "rolled %s to %s: %s", target, plan.config_hash, what,
            extra=target.log_fields("rolled", config_hash=plan.config_hash,
                                    changes=changes_field(plan)),
        )  # fmt: skip
        versions = describe_versions(plan, assessment, target.namespace)
        suffix = f" (versions: {versions})" if versions else ""
        self._context.events.post(target.ref, NORMAL, "Rolling", f"rolling: {what}{suffix}")

    async def _patch(self, target: Target, patch: dict[str, Any]) -> None:
        await self._context.client.request(
            "PATCH",
            target.kind.resource.path(target.namespace, target.name),
            params={"fieldManager": FIELD_MANAGER},
            body=patch,
            content_type=MERGE_PATCH,
        )
        self._context.metrics.writes.labels(kind=target.kind.resource.kind).inc()
