"""The ``hot`` strategy: deliver a change to running pods without a rollout when every
changed key reaches them through a refreshed volume, else roll (the pure rules:
``verdicts`` and ``claims``).

A hot change is recorded on the workload's metadata (the adoption baseline becomes the
new hash, and ``kube-nudge.io/hot-reload`` says which change waits for confirmation), so a
restart or a new leader carries on where this replica stopped. Then every pod gets the same
``kube-nudge.io/hot-reload`` annotation: an update of the pod makes its kubelet sync it at
once, which rewrites its ConfigMap and Secret volumes now instead of after the kubelet's
sync period and cache TTL (a minute or two). The ``kube-nudge agent`` sidecar sees the new
files, reloads the app and writes what it loaded (``kube-nudge.io/loaded-hash``, keyed) and
when (``kube-nudge.io/loaded-at``), or ``kube-nudge.io/reload-failed-at``, on its pod.
While the change waits, the pods are read every few seconds; a pod's claim is checked
against the data delivered: the namespace's agent key (Secret ``kube-nudge-agent-key``) and
the sources its watched volumes project are read once per look, laid out as the kubelet
does, hashed and forgotten (nothing but the verdict is kept). When one reports a failed
reload, or some have not shown the delivered data past ``kube-nudge.io/hot-deadline``,
``kube-nudge.io/hot-fallback`` decides: roll the workload (the default) or only warn. A pod
template with no container running the agent can't confirm anything, so nothing waits for
it: a change rolls at once with a Warning (``HotReloadImpossible``), or with the fallback
``warn`` is delivered in place and warned about at once (``HotReloadUnconfirmed``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kube_nudge.agentwire import (
    AGENT_KEY_SECRET,
    LOADED_AT,
    LOADED_HASH,
    RELOAD_FAILED_AT,
    parse_claim,
    parse_time,
)
from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.patches import Patch, send
from kube_nudge.kube.pods import matching_pods, pod_started
from kube_nudge.kube.resources import (
    PODS,
    SECRETS,
    Resource,
    mount_resource,
    source_resource,
)
from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    BASELINE_HASH,
    ROLLED_AT,
    Apply,
    Assessment,
    changes_field,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.annotations import FAILED, KEY_ID
from kube_nudge.model.decide import MAX_RECORDED_ROLLOUTS
from kube_nudge.model.hashing import ABSENT, source_state
from kube_nudge.model.mounts import class_view, project_pod_status
from kube_nudge.model.records import format_hash_at, format_rolled_at, parse_hash_at
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.source_kinds import source_row
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.hot.claims import (
    MountWrites,
    NotReproducible,
    agent_key,
    check_claim,
    claim_sources,
)
from kube_nudge.strategies.hot.settings import (
    HOT_FALLBACK,
    HOT_MODEL,
    HOT_RELOAD,
    hot_agent,
    hot_reload,
    hot_settings,
)
from kube_nudge.strategies.hot.verdicts import (
    NO_AGENT,
    PodReport,
    Verdict,
    VerdictKind,
    in_place_blockers,
    judge,
    started_after,
)
from kube_nudge.strategies.writes import (
    AdoptsBaseline,
    analysed,
    roll,
    rollout_patch,
)

__all__ = ["HotStrategy", "pod_report"]

log = logging.getLogger(__name__)

AFTER_FALLBACK = 1.0
"""Seconds after a fallback rollout before the workload is looked at again."""


#: ``kube_nudge_hot_reloads_total{outcome}``: a change judged (every verdict but waiting),
#: rolled because it can't be reloaded in place (a changed key reaches the pods only at a
#: restart, no reload agent), or delivered in place with no agent to confirm it.
HOT_OUTCOMES = (
    *(kind.value for kind in VerdictKind if kind is not VerdictKind.WAITING),
    "rolled",
    "unconfirmed",
)


class HotStrategy(AdoptsBaseline):
    """Reload in place where the pods can see the change, roll where they can't. Adoption
    is strategy rollout's: record the baseline, restart nothing."""

    name = "hot"
    capped = True  # hot reloads count against kube-nudge.io/max-rollouts too
    delivers = True
    model = HOT_MODEL
    #: A rollout, by any strategy, supersedes the change being delivered in place
    #: (``SupersededByRollouts``).
    superseded_by_rollouts = (HOT_RELOAD,)

    def __init__(self, context: StrategyContext) -> None:
        super().__init__(context)
        # Its own metric labels start at 0 (runtime/metrics.py says why): every outcome of a
        # change it delivers, and its writes to pods.
        for outcome in HOT_OUTCOMES:
            context.metrics.hot_reloads.labels(outcome=outcome)
        context.metrics.writes.labels(kind=PODS.kind)

    @staticmethod
    def pod_config(annotations: Mapping[str, Any]) -> str | None:
        """A change delivered in place (``kube-nudge.io/hot-reload`` on the pod) once the
        pod's agent reloaded at or after it (``kube-nudge.io/loaded-at``), for status."""
        delivered = parse_hash_at(annotations.get(HOT_RELOAD))
        loaded_at = parse_time(annotations.get(LOADED_AT))
        if delivered is not None and loaded_at is not None and loaded_at >= delivered[1]:
            return delivered[0]
        return None

    @staticmethod
    def pod_reloaded_at(annotations: Mapping[str, Any]) -> float | None:
        """When the pod's agent last reloaded its config (``kube-nudge.io/loaded-at``), for
        status (``PodReloads``)."""
        return parse_time(annotations.get(LOADED_AT))

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Deliver ``plan`` in place when every changed key can be, else roll; without a
        reload agent in the pod template, roll at once (or, with ``hot-fallback: warn``,
        deliver in place unconfirmed and warn at once): no deadline to wait out. The pods
        are nudged once the workload records the delivery (an effect of the pass's write)."""
        view = target.view
        agent = hot_agent(view)
        fallback = hot_settings(view.settings).fallback_rollout
        reasons = in_place_blockers(view, plan, assessment, agent=agent, fallback_rollout=fallback)
        if reasons:
            self._roll_instead(target, plan, assessment, reasons, changes)
            return
        now = plan.rolled_at[-1]
        record = format_hash_at(plan.config_hash, now)
        changes.annotate({
            BASELINE_HASH: plan.config_hash,
            HOT_RELOAD: record if agent else None,  # nothing to wait for without an agent
            KEY_ID: assessment.key_id,
            ROLLED_AT: format_rolled_at(list(plan.rolled_at)),
            FAILED: None,
        })  # fmt: skip
        changes.then(lambda: self._delivered(target, plan, assessment, record, agent=agent))

    async def _delivered(
        self, target: Target, plan: Apply, assessment: Assessment, record: str, *, agent: bool
    ) -> None:
        """Once the delivery is recorded: nudge the pods, and say so."""
        nudged = await self._nudge(target, record, await self._pods(target))
        what = describe_apply(plan, assessment.states, target.namespace)
        versions = describe_versions(plan, assessment, target.namespace)
        what += f" (versions: {versions})" if versions else ""
        if not agent:
            self._unconfirmed(target, plan, nudged, what)
            return
        log.info(
            "%s: reloading %s in place (%d pods nudged): %s",
            target,
            plan.config_hash,
            nudged,
            what,
            extra=target.log_fields(
                "hot-reload", config_hash=plan.config_hash, changes=changes_field(plan)
            ),
        )
        deadline = hot_settings(target.view.settings).deadline
        self._context.events.post(
            target.ref,
            NORMAL,
            "HotReload",
            f"delivering without a rollout: {what}; asked the kubelet of {nudged} "
            f"pods to refresh their volumes; waiting up to {deadline:g} s for their reload "
            "agents to report",
        )

    def _roll_instead(
        self, target: Target, plan: Apply, assessment: Assessment, reasons: list[str],
        changes: WorkloadChanges,
    ) -> None:  # fmt: skip
        """Roll what can't be reloaded in place, saying why: a Warning when the pod
        template lacks the agent (a setup to fix), else a Normal Event (keys read at start
        are how the app is built)."""
        message = f"cannot reload in place: {'; '.join(reasons)}; rolling instead"
        warning = NO_AGENT in reasons

        def said() -> None:
            self._context.metrics.hot_reloads.labels(outcome="rolled").inc()
            fields = target.log_fields("not-hot")
            log.log(logging.WARNING if warning else logging.INFO, "%s: %s", target, message,
                    extra=fields)  # fmt: skip
            self._context.events.post(target.ref, WARNING if warning else NORMAL,
                                      "HotReloadImpossible", message)  # fmt: skip

        changes.then(said)
        roll(self._context, target, plan, assessment, changes)

    def _unconfirmed(self, target: Target, plan: Apply, nudged: int, what: str) -> None:
        """A change delivered in place to a pod template without the agent, as
        ``hot-fallback: warn`` asks: a Warning now, not at the deadline."""
        self._context.metrics.hot_reloads.labels(outcome="unconfirmed").inc()
        message = (
            f"delivered without a rollout, unconfirmed: {what}; asked the kubelet of {nudged} "
            f"pods to refresh their volumes, but {NO_AGENT}: those pods may run the previous "
            f"config until they restart (not rolling, {HOT_FALLBACK}: warn)"
        )
        log.warning(
            "%s: %s", target, message,
            extra=target.log_fields("hot-unconfirmed", config_hash=plan.config_hash),
        )  # fmt: skip
        self._context.events.post(target.ref, WARNING, "HotReloadUnconfirmed", message)

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        """Follow a hot change until every pod confirmed it, or fall back (what that writes
        to the workload goes in ``changes``)."""
        view = target.view
        delivered = hot_reload(view)
        if delivered is None or delivered[0] != view.applied_hash:
            return None
        config_hash, delivered_at = delivered
        changed_at = assessment.changed_at
        since = delivered_at if changed_at is None else min(delivered_at, changed_at)
        pods = await self._pods(target)
        checked = await self._check_claims(target, assessment, config_hash, since, pods)
        reports = [pod_report(pod, checked) for pod in pods]
        verdict = judge(
            reports,
            since=since,
            delivered_at=delivered_at,
            deadline=hot_settings(view.settings).deadline,
            now=self._context.clock.now(),
        )
        if verdict.kind is VerdictKind.WAITING:
            await self._nudge(target, format_hash_at(config_hash, delivered_at), pods)
            return verdict.retry_after
        if verdict.kind is VerdictKind.RELOADED:
            changes.annotate({HOT_RELOAD: None})
            message = f"every pod ({len(pods)}) reloaded config {config_hash} in place"
            how = _how_confirmed(reports, since)

            def reloaded() -> None:
                self._context.metrics.hot_reloads.labels(outcome=verdict.kind.value).inc()
                log.info("%s: %s (%s)", target, message, how,
                         extra=target.log_fields("hot-reloaded"))  # fmt: skip
                self._context.events.post(target.ref, NORMAL, "HotReloaded", message)

            changes.then(reloaded)
            return None
        return self._fall_back(target, assessment, config_hash, verdict, changes)

    def _fall_back(
        self, target: Target, assessment: Assessment, config_hash: str, verdict: Verdict,
        changes: WorkloadChanges,
    ) -> float | None:  # fmt: skip
        view = target.view
        names = ", ".join(verdict.pods[:5]) + (", ..." if len(verdict.pods) > 5 else "")
        if verdict.kind is VerdictKind.FAILED:
            why = f"pods reported a failed reload of config {config_hash}: {names}"
        else:
            why = (
                f"pods did not confirm reloading config {config_hash} within "
                f"{hot_settings(view.settings).deadline:g} s: {names} (is the kube-nudge agent "
                "running beside the app, watching every mounted config volume, with the "
                f"namespace's agent key?){_reasons(verdict)}"
            )
        rolled = hot_settings(view.settings).fallback_rollout
        if rolled:
            now = round(self._context.clock.now(), 3)
            recent = view.rolled_at[-(MAX_RECORDED_ROLLOUTS - 1) :]
            changes.add(rollout_patch(
                target.kind.template_path,
                view.uid,
                config_hash,
                rolled_at=(*recent, now),
                cause=f"hot reload failed: {why}",
                key_id=assessment.key_id,
                superseded=self._context.rollouts.superseded,
                analysed=analysed(target),
            ))  # fmt: skip
            message = f"{why}; rolling instead ({HOT_FALLBACK}: rollout)"
        else:
            changes.annotate({HOT_RELOAD: None})
            message = (
                f"{why}; not rolling ({HOT_FALLBACK}: warn): those pods may run the previous "
                "config until they restart"
            )

        def failed() -> None:
            metrics = self._context.metrics
            metrics.hot_reloads.labels(outcome=verdict.kind.value).inc()
            if rolled:
                metrics.nudges.labels(kind=target.kind.resource.kind).inc()
            log.warning("%s: %s", target, message, extra=target.log_fields("hot-reload-failed"))
            self._context.events.post(target.ref, WARNING, "HotReloadFailed", message)

        changes.then(failed)
        return AFTER_FALLBACK if rolled else None

    async def _check_claims(
        self,
        target: Target,
        assessment: Assessment,
        config_hash: str,
        since: float,
        pods: list[JSON],
    ) -> dict[str, str | None]:
        """For each live pod whose agent claims a load and that didn't start since the
        change: None when the claim is the data delivered, else why not. Reads the agent
        key and the sources the claims name once; keeps none of their values."""
        namespace = target.namespace
        claimed = {
            str(pod["metadata"].get("name") or ""): pod
            for pod in pods
            if LOADED_HASH in (pod["metadata"].get("annotations") or {})
            and not _terminating(pod)
            and not started_after(pod_started(pod), since)
        }
        if not claimed:
            return {}
        if assessment.desired != config_hash:
            return dict.fromkeys(claimed, "the sources changed again since this delivery")
        try:
            key = agent_key(await self._read(SECRETS, namespace, AGENT_KEY_SECRET))
        except NotReproducible as exc:
            return dict.fromkeys(claimed, str(exc))
        claims = {
            name: parse_claim(pod["metadata"]["annotations"][LOADED_HASH])
            for name, pod in claimed.items()
        }
        refs = set[SourceRef]()
        for name, claim in claims.items():
            if claim is not None:
                refs |= claim_sources(claim, claimed[name].get("spec") or {}, namespace)
        sources: dict[SourceRef, JSON | None] = {}
        try:
            for ref in sorted(refs):
                resource = source_resource(ref.kind)
                sources[ref] = obj = await self._read(resource, namespace, ref.name)
                if ref in assessment.visible and source_state(obj) != assessment.states.get(
                    ref, ABSENT
                ):
                    why = f"{ref.display(namespace)} changed since this delivery"
                    return dict.fromkeys(claimed, why)
            mounted = [r for r in assessment.visible if source_row(r.kind).known_once_mounted]
            written = await self._mount_writes(namespace, mounted, assessment) if mounted else {}
        except NotReproducible as exc:
            return dict.fromkeys(claimed, str(exc))
        unwritten = dict.fromkeys(mounted)
        return {
            name: check_claim(
                claim, claimed[name].get("spec") or {}, namespace, key, sources,
                mounted=written.get(name, unwritten),
                loaded_at=parse_time(claimed[name]["metadata"]["annotations"].get(LOADED_AT)),
            )
            for name, claim in claims.items()
        }  # fmt: skip

    async def _mount_writes(
        self, namespace: str, refs: list[SourceRef], assessment: Assessment
    ) -> dict[str, MountWrites]:
        """Per pod, for each source known once mounted that counts (a Secrets Store CSI
        class): when the delivered versions were written into it (its mount status, a
        SecretProviderClassPodStatus), None if they have not."""
        written: dict[str, dict[SourceRef, float | None]] = {}
        for kind in sorted({ref.kind for ref in refs}):
            await self._mount_writes_of(namespace, kind, refs, assessment, written)
        return dict(written)

    async def _mount_writes_of(
        self,
        namespace: str,
        kind: SourceKind,
        refs: list[SourceRef],
        assessment: Assessment,
        written: dict[str, dict[SourceRef, float | None]],
    ) -> None:
        """``_mount_writes`` for the sources of one ``kind``, into ``written``."""
        resource = mount_resource(kind)
        if resource is None:
            return
        try:
            found = await self._context.client.get(resource.path(namespace))
        except ApiError as exc:
            if exc.not_found:
                return
            if exc.status == 403:
                raise NotReproducible(
                    f"kube-nudge may not list {resource.kind}s in {namespace} (403)"
                ) from None
            raise
        for obj in found.get("items") or []:
            status = project_pod_status(obj, kind)
            if status is None or status.ref not in refs:
                continue
            delivered = class_view(status).state == assessment.states.get(status.ref, ABSENT)
            at = (status.written_at or 0.0) if delivered else None
            written.setdefault(status.pod, {})[status.ref] = at

    async def _read(self, resource: Resource, namespace: str, name: str) -> JSON | None:
        """One object by name, None if it doesn't exist; NotReproducible if refused."""
        try:
            return await self._context.client.get(resource.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            if exc.status == 403:
                raise NotReproducible(
                    f"kube-nudge may not read {resource.kind} {namespace}/{name} (403)"
                ) from None
            raise

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
                path = PODS.path(target.namespace, str(metadata.get("name")))
                await send(self._context.client, Patch(path, patch))
            except ApiError as exc:
                if exc.not_found or exc.conflict:
                    continue  # gone, or replaced by a pod of the same name: started fresh
                raise
            self._context.metrics.writes.labels(kind=PODS.kind).inc()
            nudged += 1
        return nudged


def _how_confirmed(reports: list[PodReport], since: float) -> str:
    """Per live pod, what confirmed it (for the log: which rule said "reloaded")."""
    return "; ".join(
        f"{r.name}: loaded the data delivered"
        if r.loaded_delivered
        else f"{r.name}: started at {r.started} >= change at {since:.3f}"
        for r in reports
        if not r.terminating
    )


def pod_report(pod: Mapping[str, Any], checked: Mapping[str, str | None]) -> PodReport:
    """What a pod says about its config: start, its agent's last reload and whether that
    was the data delivered (``checked``: per pod name, None when it was, else why not; a pod
    not in it made no claim worth checking), whether it goes."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    name = str(metadata.get("name") or "")
    why_not = checked.get(name, "")
    return PodReport(
        name=name,
        started=pod_started(pod),
        loaded_at=parse_time(annotations.get(LOADED_AT)),
        failed_at=parse_time(annotations.get(RELOAD_FAILED_AT)),
        terminating=_terminating(pod),
        loaded_delivered=name in checked and why_not is None,
        why_not=why_not or "",
    )


def _terminating(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or phase in (
        "Succeeded",
        "Failed",
    )


def _reasons(verdict: Verdict) -> str:
    """Why the agents' claims of some silent pods were not the data delivered (at most 3)."""
    shown = [f"{pod}: {why}" for pod, why in sorted(verdict.why.items())[:3]]
    more = "; ..." if len(verdict.why) > 3 else ""
    return (
        f"; their agents' loaded hash is not the data delivered: {'; '.join(shown)}{more}"
        if shown
        else ""
    )
