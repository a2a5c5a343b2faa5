"""What kube-nudge writes to a workload, shared by every strategy: the rollout patch (the
hash on the pod template), the adoption baseline, and a patch built from a fresh read, each
added to the pass's ``WorkloadChanges`` (``changes.py``), with the Event that says so as an
effect; the reconciler's writer sends them (``controller/writer.py``). Strategy ``rollout``
is these writes and nothing else; the others call them where they roll or adopt as it does.
They name no strategy: what a rollout owes the others (removing their records of a change
delivered in place, taking their stand-ins off the template) comes through
``StrategyContext.rollouts`` from the strategies' hooks.

Writes are JSON merge patches that touch kube-nudge's annotations only; the writer gives
them the workload's uid as a precondition (a deleted-and-recreated workload answers 409
instead of being patched) and kube-nudge as field manager. They cannot clobber a concurrent
edit of anything else, and unlike server-side apply a patch never creates an object that
was deleted meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kube_nudge.kube.client import JSON
from kube_nudge.kube.events import NORMAL
from kube_nudge.kube.patches import FIELD_MANAGER
from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    BASELINE_HASH,
    CONFIG_HASH,
    ROLLED_AT,
    Adopt,
    Apply,
    Assessment,
    TemplatePath,
    annotation_patch,
    changes_field,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.analysis import pending_record
from kube_nudge.model.annotations import ANALYSIS_RUN, CHANGE_CAUSE, FAILED, KEY_ID
from kube_nudge.model.records import format_rolled_at
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = [
    "CHANGE_CAUSE",
    "FIELD_MANAGER",
    "AdoptsBaseline",
    "adopt_patch",
    "analysed",
    "record_baseline",
    "roll",
    "rollout_annotations",
    "rollout_patch",
    "workload_preconditions",
]

log = logging.getLogger(__name__)


def rollout_patch(
    template_path: TemplatePath,
    uid: str,
    config_hash: str,
    *,
    rolled_at: Sequence[float],
    cause: str,
    key_id: str,
    superseded: Iterable[str] = (),
    analysed: bool = False,
) -> dict[str, Any]:
    """The merge patch that rolls the workload to ``config_hash``, records the recent
    rollouts (``rolled_at``, this one included) for the flap cap, and says why;
    ``superseded``: what it removes for the other strategies (``context.rollouts``);
    ``analysed``: the workload asks for analysis (its pending record goes in the same
    write)."""
    annotations = _recorded(rolled_at, key_id, cause, superseded)
    if analysed:
        annotations[ANALYSIS_RUN] = pending_record(config_hash)
    patch = annotation_patch(template_path, CONFIG_HASH, config_hash)
    patch.setdefault("metadata", {}).update({"uid": uid, "annotations": annotations})
    return patch


def rollout_annotations(
    plan: Apply,
    key_id: str,
    cause: str,
    superseded: Iterable[str] = (),
    *,
    analysed: bool = False,
) -> dict[str, Any]:
    """What every rollout records on the workload's metadata (a merge patch fragment):
    recent rollout times for the flap cap, why, the key, and the removal of the baseline
    and of ``superseded`` (``context.rollouts``); with ``analysed``, the analysis of the
    new config, pending (``model.analysis.pending_record``)."""
    annotations = _recorded(plan.rolled_at, key_id, cause, superseded)
    if analysed:
        annotations[ANALYSIS_RUN] = pending_record(plan.config_hash)
    return annotations


def _recorded(
    rolled_at: Sequence[float], key_id: str, cause: str, superseded: Iterable[str]
) -> dict[str, Any]:
    annotations: dict[str, Any] = {
        ROLLED_AT: format_rolled_at(list(rolled_at)),
        CHANGE_CAUSE: f"kube-nudge: {cause}"[:1024],
        KEY_ID: key_id,
    }
    # The template now carries the hash: the adoption baseline goes, always. (Only when the
    # view showed one, it stayed whenever a change came before the adoption's own echo, and
    # then outranked the template's hash: a restart rolled the workload again.)
    annotations[BASELINE_HASH] = None
    annotations[FAILED] = None  # a new rollout: an earlier failure no longer stops a line
    # A strategy's record of a change it delivers without a rollout: this one supersedes it.
    annotations.update(dict.fromkeys(superseded))
    return annotations


def analysed(target: Target) -> bool:
    """Whether a rollout of ``target`` is judged by an analysis (``kube-nudge.io/analysis``)."""
    return target.view.settings.analysis is not None


def workload_preconditions(workload: Mapping[str, Any]) -> dict[str, Any]:
    """uid and resourceVersion of a workload read in full, for a patch that replaces lists:
    it then fails (409) rather than overwrite an edit made since the read."""
    metadata = workload.get("metadata") or {}
    return {"uid": metadata.get("uid"), "resourceVersion": metadata.get("resourceVersion")}


def adopt_patch(uid: str, config_hash: str, key_id: str) -> dict[str, Any]:
    """The merge patch that records the running config's hash without rolling."""
    annotations = {BASELINE_HASH: config_hash, KEY_ID: key_id}
    return {"metadata": {"uid": uid, "annotations": annotations}}


def record_baseline(
    context: StrategyContext,
    target: Target,
    plan: Adopt,
    assessment: Assessment,
    changes: WorkloadChanges,
    also: Mapping[str, str | None] | None = None,
) -> None:
    """Record the baseline on the workload's metadata (not the template): restarts nothing.
    ``also``: more annotations of the strategy's, in the same patch."""
    changes.add(adopt_patch(target.view.uid, plan.config_hash, assessment.key_id))
    changes.annotate(also or {})
    changes.then(lambda: _adopted(context, target, plan))


def _adopted(context: StrategyContext, target: Target, plan: Adopt) -> None:
    """Say the baseline was recorded: a log line and a Normal Event."""
    log.info(
        "adopted %s at %s%s",
        target,
        plan.config_hash,
        " (hashes were made under another key)" if plan.new_key else "",
        extra=target.log_fields("adopted", config_hash=plan.config_hash, new_key=plan.new_key),
    )
    if plan.new_key:
        message = (
            "re-baselined without restarting: its config hash was made under another "
            "installation key (was the kube-nudge-hmac-key Secret replaced?)"
        )
    elif plan.mounted:
        message = (
            "recorded the hash of the config the pods run: they mounted Secrets Store CSI "
            "classes whose versions were not known before; the next change rolls them"
        )
    else:
        message = "recorded the hash of the config the pods run; the next change rolls them"
    context.events.post(target.ref, NORMAL, "Adopted", message)


class AdoptsBaseline:
    """For a strategy class: adoption as strategy rollout does it (``record_baseline``), and
    the context kept as ``_context``."""

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Record the baseline on the workload's metadata (not the template): nothing
        restarts; the first change rolls."""
        record_baseline(self._context, target, plan, assessment, changes)


def roll(
    context: StrategyContext,
    target: Target,
    plan: Apply,
    assessment: Assessment,
    changes: WorkloadChanges,
) -> None:
    """Write the new hash on the pod template: the workload rolls. A template that names
    another strategy's stand-ins names the sources again (built from a full read)."""
    what = describe_apply(plan, assessment.states, target.namespace)
    superseded = context.rollouts.superseded
    if target.view.stand_ins:
        recorded = rollout_annotations(plan, assessment.key_id, what, superseded,
                                       analysed=analysed(target))  # fmt: skip

        async def build(workload: JSON) -> dict[str, Any]:
            return _leave_stand_ins(context, target, workload, plan, recorded)

        changes.build_fresh(build)
    else:
        changes.add(rollout_patch(
            target.kind.template_path,
            target.view.uid,
            plan.config_hash,
            rolled_at=plan.rolled_at,
            cause=what,
            key_id=assessment.key_id,
            superseded=superseded,
            analysed=analysed(target),
        ))  # fmt: skip
    changes.then(lambda: _rolled(context, target, plan, assessment, what))


def _rolled(
    context: StrategyContext, target: Target, plan: Apply, assessment: Assessment, what: str
) -> None:
    """Say the workload rolls: the nudges metric, a log line and a Normal Event."""
    context.metrics.nudges.labels(kind=target.kind.resource.kind).inc()
    log.info(
        "rolled %s to %s: %s",
        target,
        plan.config_hash,
        what,
        extra=target.log_fields(
            "rolled", config_hash=plan.config_hash, changes=changes_field(plan)
        ),
    )
    versions = describe_versions(plan, assessment, target.namespace)
    suffix = f" (versions: {versions})" if versions else ""
    context.events.post(target.ref, NORMAL, "Rolling", f"rolling: {what}{suffix}")


def _leave_stand_ins(
    context: StrategyContext, target: Target, workload: JSON, plan: Apply, recorded: dict[str, Any]
) -> dict[str, Any]:
    """The rollout patch of ``workload`` (read in full) by the strategy whose stand-ins its
    template names (``NamesStandIns``); with none of them on it any more, the plain one,
    preconditioned on the read all the same."""
    for strategy in context.rollouts.stand_ins:
        patch = strategy.leave_stand_ins(target, workload, plan, recorded)
        if patch is not None:
            return patch
    patch = annotation_patch(target.kind.template_path, CONFIG_HASH, plan.config_hash)
    patch["metadata"] = {**workload_preconditions(workload), "annotations": recorded}
    return patch
