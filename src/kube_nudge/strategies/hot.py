"""The ``hot`` strategy: deliver a change to running pods without a rollout when every
changed key reaches them through a refreshed volume, else roll (see ``model.hot``).

A hot change is recorded on the workload's metadata (the adoption baseline becomes the
new hash, and ``kube-nudge.io/hot-reload`` says which change waits for confirmation), so a
restart or a new leader carries on where this replica stopped. Then every pod gets the same
``kube-nudge.io/hot-reload`` annotation: an update of the pod makes its kubelet sync it at
once, which rewrites its ConfigMap and Secret volumes now instead of after the kubelet's
sync period and cache TTL (a minute or two). The ``kube-nudge agent`` sidecar sees the new
files, reloads the app and writes ``kube-nudge.io/loaded-at`` (or
``kube-nudge.io/reload-failed-at``) on its pod. While the change waits, the pods are read
every few seconds; when one reports a failed reload, or some stay silent past
``kube-nudge.io/hot-deadline``, ``kube-nudge.io/hot-fallback`` decides: roll the workload
(the default) or only warn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kube_nudge.kube.client import JSON, MERGE_PATCH, ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.pods import matching_pods, pod_started
from kube_nudge.kube.resources import PODS
from kube_nudge.model import (
    BASELINE_HASH,
    ROLLED_AT,
    Adopt,
    Apply,
    Assessment,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.annotations import (
    FAILED,
    HOT_FALLBACK,
    HOT_RELOAD,
    KEY_ID,
    LOADED_AT,
    RELOAD_FAILED_AT,
    format_hash_at,
    format_rolled_at,
)
from kube_nudge.model.decide import MAX_RECORDED_ROLLOUTS
from kube_nudge.model.hot import (
    PodReport,
    Verdict,
    VerdictKind,
    judge,
    reported_at,
    restart_reasons,
)
from kube_nudge.strategies.base import StrategyContext, Target, changes_field
from kube_nudge.strategies.rollout import (
    FIELD_MANAGER,
    RolloutStrategy,
    annotate_workload,
    patch_workload,
    rollout_patch,
)

__all__ = ["HotStrategy", "pod_report"]

log = logging.getLogger(__name__)

AFTER_FALLBACK = 1.0
"""Seconds after a fallback rollout before the workload is looked at again."""


class HotStrategy:
    """Reload in place where the pods can see the change, roll where they can't."""

    name = "hot"
    capped = True  # hot reloads count against kube-nudge.io/max-rollouts too

    def __init__(self, context: StrategyContext) -> None:
        self._context = context
        self._rollout = RolloutStrategy(context)

    async def adopt(self, target: Target, plan: Adopt, assessment: Assessment) -> None:
        """As strategy rollout: record the baseline, restart nothing."""
        await self._rollout.adopt(target, plan, assessment)

    async def apply(self, target: Target, plan: Apply, assessment: Assessment) -> None:
        """Deliver ``plan`` in place when every changed key can be, else roll."""
        view = target.view
        reasons = restart_reasons(plan, assessment.visible, assessment.states, target.namespace)
        if not view.pod_selector:
            reasons.append("its pods can't be found (no spec.selector)")
        if view.snapshot_copies:
            reasons.append("its template still names snapshot copies")
        if reasons:
            self._context.metrics.hot_reloads.labels(outcome="rolled").inc()
            message = f"cannot reload in place: {'; '.join(reasons)}; rolling instead"
            log.info("%s: %s", target, message, extra=target.log_fields("not-hot"))
            self._context.events.post(target.ref, NORMAL, "HotReloadImpossible", message)
            await self._rollout.apply(target, plan, assessment)
            return
        now = plan.rolled_at[-1]
        record = format_hash_at(plan.config_hash, now)
        await annotate_workload(self._context, target, {
            BASELINE_HASH: plan.config_hash, HOT_RELOAD: record, KEY_ID: assessment.key_id,
            ROLLED_AT: format_rolled_at(list(plan.rolled_at)), FAILED: None,
        })  # fmt: skip
        nudged = await self._nudge(target, record, await self._pods(target))
        what = describe_apply(plan, assessment.states, target.namespace)
        versions = describe_versions(plan, assessment, target.namespace)
        suffix = f" (versions: {versions})" if versions else ""
        log.info(
            "%s: reloading %s in place (%d pods nudged): %s", target, plan.config_hash,
            nudged, what, extra=target.log_fields("hot-reload", config_hash=plan.config_hash,
                                                  changes=changes_field(plan)),
        )  # fmt: skip
        deadline = view.settings.hot_deadline
        self._context.events.post(
            target.ref, NORMAL, "HotReload",
            f"delivering without a rollout: {what}{suffix}; asked the kubelet of {nudged} "
            f"pods to refresh their volumes; waiting up to {deadline:g} s for their reload "
            "agents to report",
        )  # fmt: skip

    async def maintain(self, target: Target, assessment: Assessment) -> float | None:
        """Follow a hot change until every pod confirmed it, or fall back."""
        view = target.view
        if view.hot_reload is None or view.hot_reload[0] != view.applied_hash:
            return None
        config_hash, delivered_at = view.hot_reload
        changed_at = assessment.changed_at
        since = delivered_at if changed_at is None else min(delivered_at, changed_at)
        pods = await self._pods(target)
        verdict = judge(
            (pod_report(pod) for pod in pods), since=since, delivered_at=delivered_at,
            deadline=view.settings.hot_deadline, now=self._context.clock.now(),
        )  # fmt: skip
        if verdict.kind is VerdictKind.WAITING:
            await self._nudge(target, format_hash_at(config_hash, delivered_at), pods)
            return verdict.retry_after
        self._context.metrics.hot_reloads.labels(outcome=verdict.kind.value).inc()
        if verdict.kind is VerdictKind.RELOADED:
            await annotate_workload(self._context, target, {HOT_RELOAD: None})
            message = f"every pod ({len(pods)}) reloaded config {config_hash} in place"
            log.info("%s: %s", target, message, extra=target.log_fields("hot-reloaded"))
            self._context.events.post(target.ref, NORMAL, "HotReloaded", message)
            return None
        return await self._fall_back(target, assessment, config_hash, verdict)

    async def _fall_back(
        self, target: Target, assessment: Assessment, config_hash: str, verdict: Verdict
    ) -> float | None:
        view = target.view
        names = ", ".join(verdict.pods[:5]) + (", ..." if len(verdict.pods) > 5 else "")
        if verdict.kind is VerdictKind.FAILED:
            why = f"pods reported a failed reload of config {config_hash}: {names}"
        else:
            why = (
                f"pods did not report reloading config {config_hash} within "
                f"{view.settings.hot_deadline:g} s: {names} (is the kube-nudge agent running "
                "beside the app and watching every mounted config volume?)"
            )
        if view.settings.hot_fallback_rollout:
            now = round(self._context.clock.now(), 3)
            recent = view.rolled_at[-(MAX_RECORDED_ROLLOUTS - 1) :]
            patch = rollout_patch(
                target.kind.template_path, view.uid, config_hash, rolled_at=(*recent, now),
                cause=f"hot reload failed: {why}", key_id=assessment.key_id,
            )  # fmt: skip
            await patch_workload(self._context, target, patch)
            self._context.metrics.nudges.labels(kind=target.kind.resource.kind).inc()
            message = f"{why}; rolling instead ({HOT_FALLBACK}: rollout)"
        else:
            await annotate_workload(self._context, target, {HOT_RELOAD: None})
            message = (
                f"{why}; not rolling ({HOT_FALLBACK}: warn): those pods may run the previous "
                "config until they restart"
            )
        log.warning("%s: %s", target, message, extra=target.log_fields("hot-reload-failed"))
        self._context.events.post(target.ref, WARNING, "HotReloadFailed", message)
        return AFTER_FALLBACK if view.settings.hot_fallback_rollout else None

    async def _pods(self, target: Target) -> list[JSON]:
        """The workload's pods (one paginated list by its selector)."""
        selector = target.view.pod_selector
        if not selector:
            return []
        return await matching_pods(self._context.client, target.namespace, selector)

    async def _nudge(self, target: Target, record: str, pods: list[JSON]) -> int:
        """Annotate every live pod not yet carrying ``record``: the update makes its kubelet
        sync the pod, refreshing its volumes now. Pods gone meanwhile are skipped."""
        nudged = 0
        for pod in pods:
            metadata = pod.get("metadata") or {}
            annotations = metadata.get("annotations") or {}
            if metadata.get("deletionTimestamp") or annotations.get(HOT_RELOAD) == record:
                continue
            patch = {"metadata": {"uid": metadata.get("uid"), "annotations": {HOT_RELOAD: record}}}
            try:
                await self._context.client.request(
                    "PATCH", PODS.path(target.namespace, str(metadata.get("name"))),
                    params={"fieldManager": FIELD_MANAGER}, body=patch,
                    content_type=MERGE_PATCH,
                )  # fmt: skip
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    continue  # gone, or replaced by a pod of the same name: started fresh
                raise
            self._context.metrics.writes.labels(kind=PODS.kind).inc()
            nudged += 1
        return nudged


def pod_report(pod: Mapping[str, Any]) -> PodReport:
    """What a pod says about its config: start, its agent's last reload, whether it goes."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    phase = (pod.get("status") or {}).get("phase")
    return PodReport(
        name=str(metadata.get("name") or ""),
        started=pod_started(pod),
        loaded_at=reported_at(annotations.get(LOADED_AT)),
        failed_at=reported_at(annotations.get(RELOAD_FAILED_AT)),
        terminating=bool(metadata.get("deletionTimestamp")) or phase in ("Succeeded", "Failed"),
    )
