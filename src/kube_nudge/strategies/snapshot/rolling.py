"""Strategy ``snapshot`` rolling a workload onto copies of its config (a change) and
adopting one (copies of the config it runs, its template untouched).

Apply, per change: read the workload and each consumed source in full (the caches keep
digests only), create the copies that don't exist yet (``copies`` names them by
content), then one merge patch that renames the references, records the copy-to-source
mapping on the template and the hash it rolled to on the workload. The patch carries the
workload's uid and resourceVersion, so it never overwrites an edit made since the read.

``CopyMaker`` makes (or claims) the copies, for ``Roller`` here and for the upkeep, which
makes a deleted copy again; ``leave_copies`` is the patch of a rollout by another strategy,
which names the sources again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.patches import Patch, PatchType, send
from kube_nudge.kube.resources import Resource, source_resource
from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    CONFIG_HASH,
    Adopt,
    Apply,
    Assessment,
    Hold,
    SourceKind,
    SourceRef,
    changes_field,
    describe_apply,
    describe_versions,
)
from kube_nudge.model.digests import key_digests
from kube_nudge.model.podtemplate import get_pod_spec, template_annotation
from kube_nudge.model.references import rename_references
from kube_nudge.model.source_kinds import source_row
from kube_nudge.model.standins import (
    format_stand_ins,
    parse_stand_ins,
    pod_spec_patch,
    referenced_sources,
)
from kube_nudge.strategies.base import NotYet, Refused, StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.snapshot.copies import (
    copy_manifest,
    copy_name,
    copy_names,
    is_copy_of,
    owner_reference,
)
from kube_nudge.strategies.snapshot.model import (
    BASELINE_SNAPSHOTS,
    ROLLED_TO,
    SNAPSHOTS,
    Baseline,
    annotations_of,
    format_baseline,
)
from kube_nudge.strategies.writes import (
    FIELD_MANAGER,
    analysed,
    record_baseline,
    rollout_annotations,
    workload_preconditions,
)

__all__ = ["COPY_RETRY", "CopyMaker", "Roller", "leave_copies"]

#: The strategy's logger (``strategy.py``'s name), whichever of its modules logs.
log = logging.getLogger(f"{__package__}.strategy")

#: Seconds before trying again to copy a source the API refused to copy.
COPY_RETRY = 60.0
#: Answers to creating a copy that are not worth a quick retry: forbidden (quota, policy),
#: too large, invalid.
_COPY_REFUSALS = frozenset({403, 413, 422})


class CopyMaker:
    """Makes the copies of a workload's sources, or claims the ones there already."""

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def make_copies(
        self,
        target: Target,
        workload: JSON,
        assessment: Assessment,
        current: Mapping[tuple[SourceKind, str], str],
    ) -> dict[tuple[SourceKind, str], str]:
        """Ensure a copy of each source ``workload``'s template references (through its
        ``current`` stand-ins or directly) as the caches know it; each source's copy."""
        pod_spec = get_pod_spec(workload, target.kind.template_path) or {}
        owner = owner_reference(target.kind.resource, workload)
        renames: dict[tuple[SourceKind, str], str] = {}
        referenced = referenced_sources(pod_spec, current, target.namespace)
        for ref in sorted(referenced & set(assessment.visible)):
            state = assessment.states.get(ref)
            if state is None or not state.present:
                continue  # an optional source that doesn't exist: nothing to copy
            if not source_row(ref.kind).holds_data:
                continue  # a CSI class: no object holds its data, each pod fetches it
            copy = copy_name(self._context.hmac_key, ref, state, target.view.uid)
            await self.ensure_copy(target, ref, copy, state.digests, owner)
            renames[(ref.kind, ref.name)] = copy
        return renames

    async def ensure_copy(
        self,
        target: Target,
        ref: SourceRef,
        name: str,
        digests: Mapping[str, bytes],
        owner: dict[str, Any],
    ) -> None:
        """Create the copy `name` of `ref`, or check that the object already there is
        kube-nudge's copy of exactly this data (else: Refused, nothing rolls)."""
        client = self._context.client
        resource = source_resource(ref.kind)
        source = await client.get(resource.path(ref.namespace, ref.name))
        if key_digests(source) != dict(digests):
            raise NotYet(f"{ref} changed since it was cached")
        try:
            await client.request(
                "POST",
                resource.path(ref.namespace),
                params={"fieldManager": FIELD_MANAGER},
                body=copy_manifest(source, ref, name, owner),
            )
            self._context.metrics.writes.labels(kind=resource.kind).inc()
            return
        except ApiError as exc:
            if exc.status in _COPY_REFUSALS:
                # Too large once labelled (1 MiB per object), a quota on ConfigMaps/Secrets,
                # an admission policy: waiting with backoff would change nothing soon.
                raise Refused(
                    Hold(
                        "refused",
                        "SnapshotFailed",
                        f"not rolling: could not copy {ref.display(target.namespace)} to "
                        f"{ref.kind.value}/{name}: {exc}",
                        retry_after=COPY_RETRY,
                    )
                ) from None
            if not exc.conflict:
                raise
        existing = await client.get(resource.path(ref.namespace, name))
        if not is_copy_of(existing, ref, source, target.view.uid):
            raise Refused(
                Hold(
                    "refused",
                    "SnapshotNameTaken",
                    f"not rolling: {ref.kind.value}/{name} exists but is not kube-nudge's "
                    f"immutable copy of {ref.display(target.namespace)}; it is never used. "
                    "Delete or rename it, then the next change (or a restart) retries",
                )
            )
        await self._claim_copy(resource, ref.namespace, name, existing, owner)

    async def _claim_copy(
        self, resource: Resource, namespace: str, name: str, existing: JSON, owner: dict[str, Any]
    ) -> None:
        """Make ``owner`` an owner of the existing copy ``name``, unless it is one already.

        An existing copy (the source's other data didn't change) may by now belong only to
        old revisions that could be pruned before the new one takes it over: the workload
        claims it again until then."""
        metadata = existing.get("metadata") or {}
        owners = list(metadata.get("ownerReferences") or ())
        if any(o.get("uid") == owner.get("uid") for o in owners):
            return
        # An append, not a replacement: workloads sharing one copy (one ConfigMap read by
        # many Deployments) claim it at once without conflicting; the test guards against a
        # copy deleted and recreated in between.
        claim = [
            {"op": "test", "path": "/metadata/uid", "value": metadata.get("uid")},
            {"op": "add", "path": "/metadata/ownerReferences/-", "value": owner},
        ]
        await send(self._context.client, Patch(resource.path(namespace, name), claim,
                                               PatchType.JSON))  # fmt: skip
        self._context.metrics.writes.labels(kind=resource.kind).inc()


class Roller:
    """Rolls a workload onto copies of its config (a change), or adopts it with copies of
    the config its pods run; ``maker`` makes the copies."""

    def __init__(self, context: StrategyContext, maker: CopyMaker) -> None:
        self._context = context
        self._maker = maker

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Record the baseline (nothing restarts) with copies of the config the pods run,
        unless the template names copies already (its revision keeps them)."""
        # A template naming copies already (adopted again, say after a key change) keeps
        # them in its revision: an older record of adopted copies no longer stands.
        also: dict[str, str | None] = {BASELINE_SNAPSHOTS: None}
        if not target.view.stand_ins:
            workload = await self._context.client.get(
                target.kind.resource.path(target.namespace, target.name)
            )
            try:
                copies = await self._maker.make_copies(target, workload, assessment, {})
            except Refused as refusal:  # adopted all the same: opting in must not wait
                why = refusal.hold.message
                changes.then(lambda: self._adopted_without_copies(target, why))
                copies = {}
            if copies:
                mapping = {(kind, copy): source for (kind, source), copy in copies.items()}
                also[BASELINE_SNAPSHOTS] = format_baseline(Baseline(plan.config_hash, mapping))
        record_baseline(self._context, target, plan, assessment, changes, also)

    def _adopted_without_copies(self, target: Target, why: str) -> None:
        """Say (a Warning, a log line) that the adopted config has no copy: a failed first
        change can't be rolled back onto it."""
        why = why.removeprefix("not rolling: ")
        message = (
            f"adopted without a copy of the config its pods run ({why}): on-failure: rollback "
            "can't undo a failed first change"
        )
        log.warning("%s: %s", target, message, extra=target.log_fields("adopted-without-copies"))
        self._context.events.post(target.ref, WARNING, "AdoptedWithoutSnapshot", message)

    def roll(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Make the copies, point the template at them: the workload rolls. Both happen as
        the pass writes: the copies just before the patch, which is built from a full read
        of the workload (its template's lists are replaced whole)."""
        what = describe_apply(plan, assessment.states, target.namespace)
        mapping: dict[tuple[SourceKind, str], str] = {}

        async def build(workload: JSON) -> dict[str, Any]:
            nonlocal mapping
            patch, mapping = await self._snapshot_patch(target, workload, plan, assessment, what)
            return patch

        changes.build_fresh(build)
        changes.then(lambda: self._rolled(target, plan, assessment, what, mapping))

    def _rolled(
        self, target: Target, plan: Apply, assessment: Assessment, what: str,
        mapping: Mapping[tuple[SourceKind, str], str],
    ) -> None:  # fmt: skip
        """Say the workload rolls onto its copies: the metric, a log line, an Event."""
        self._context.metrics.nudges.labels(kind=target.kind.resource.kind).inc()
        log.info(
            "rolled %s onto snapshots %s: %s",
            target,
            plan.config_hash,
            what,
            extra=target.log_fields(
                "rolled",
                config_hash=plan.config_hash,
                changes=changes_field(plan),
                snapshots=copy_names(mapping),
            ),
        )
        versions = describe_versions(plan, assessment, target.namespace)
        suffix = f" (versions: {versions})" if versions else ""
        self._context.events.post(
            target.ref,
            NORMAL,
            "Rolling",
            f"rolling onto config snapshots {', '.join(copy_names(mapping))}: {what}{suffix}",
        )

    async def _snapshot_patch(
        self, target: Target, workload: JSON, plan: Apply, assessment: Assessment, cause: str
    ) -> tuple[dict[str, Any], dict[tuple[SourceKind, str], str]]:
        """Ensure the copies of every source `workload`'s template references, and the
        patch that points the template at them; with the copy-to-source mapping."""
        path = target.kind.template_path
        pod_spec = get_pod_spec(workload, path) or {}
        current = parse_stand_ins(template_annotation(workload, path, SNAPSHOTS))
        renames = await self._maker.make_copies(target, workload, assessment, current)

        def rename(kind: SourceKind, name: str) -> str | None:
            source = current.get((kind, name))
            # A copy no longer made (the source went, or no longer counts) gives way to
            # its source's own name again: a stale copy must not outlive its reason.
            return renames.get((kind, source or name), source)

        renamed = rename_references(pod_spec, rename)
        mapping = {(kind, copy): source for (kind, source), copy in renames.items()}
        annotations = {CONFIG_HASH: plan.config_hash, SNAPSHOTS: format_stand_ins(mapping)}
        patch = pod_spec_patch(path, pod_spec, renamed, annotations)
        patch["metadata"] = {
            **workload_preconditions(workload),
            "annotations": {
                **rollout_annotations(
                    plan,
                    assessment.key_id,
                    cause,
                    self._context.rollouts.superseded,
                    analysed=analysed(target),
                ),
                ROLLED_TO: plan.config_hash,
                # Copies of the adopted config serve until a revision keeps copies of its
                # own: the one this template names, which a failure now rolls back to.
                **({BASELINE_SNAPSHOTS: None} if current else {}),
            },
        }
        return patch, mapping


def leave_copies(
    target: Target, workload: JSON, plan: Apply, recorded: Mapping[str, str | None]
) -> dict[str, Any] | None:
    """The rollout patch of a workload switched away from this strategy
    (``NamesStandIns.leave_stand_ins``): its template names the sources again (copies
    would keep old data forever); the copies go with the revisions that still use them."""
    path = target.kind.template_path
    mapping_text = template_annotation(workload, path, SNAPSHOTS)
    if mapping_text is None and ROLLED_TO not in annotations_of(workload):
        return None  # nothing of this strategy's on it (any more)
    pod_spec = get_pod_spec(workload, path) or {}
    mapping = parse_stand_ins(mapping_text)
    restored = rename_references(pod_spec, lambda kind, name: mapping.get((kind, name)))
    patch = pod_spec_patch(
        path, pod_spec, restored, {CONFIG_HASH: plan.config_hash, SNAPSHOTS: None}
    )
    patch["metadata"] = {
        **workload_preconditions(workload),
        "annotations": {**recorded, ROLLED_TO: None},
    }
    return patch
