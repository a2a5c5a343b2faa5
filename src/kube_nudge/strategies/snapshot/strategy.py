"""The ``snapshot`` strategy: every consumed ConfigMap/Secret version becomes an immutable
copy, and the pod template points at the copies, so a config change is a true rolling
release. Old pods keep their old data even when they restart mid-rollout or a week
later, and ``kubectl rollout undo`` brings the old data back with the old template.

Apply, per change: read the workload and each consumed source in full (the caches keep
digests only), create the copies that don't exist yet (``copies`` names them by
content), then one merge patch that renames the references, records the copy-to-source
mapping on the template and the hash it rolled to on the workload. The patch carries the
workload's uid and resourceVersion, so it never overwrites an edit made since the read.

Copies are owned by the workload until the revisions that use them exist (ReplicaSets,
ControllerRevisions, Jobs), then by exactly those revisions (``maintain``): Kubernetes'
garbage collector deletes a copy when the last revision using it is pruned by the
workload's history limit, and all of them with the workload.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.patches import Patch, PatchType, send
from kube_nudge.kube.resources import Resource, source_resource
from kube_nudge.kube.workloads import Revisions, Target
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
from kube_nudge.model.podtemplate import get_pod_spec, get_template, template_annotation
from kube_nudge.model.references import rename_references
from kube_nudge.model.source_kinds import source_kind_rows, source_row
from kube_nudge.model.standins import (
    format_stand_ins,
    parse_stand_ins,
    pod_spec_patch,
    referenced_sources,
)
from kube_nudge.strategies.base import (
    CannotRollBack,
    Host,
    NotYet,
    Refused,
    StrategyContext,
    Webhook,
)
from kube_nudge.strategies.snapshot.copies import (
    SNAPSHOT_FOR,
    SNAPSHOT_LABEL,
    copy_manifest,
    copy_name,
    is_copy_of,
)
from kube_nudge.strategies.snapshot.model import (
    BASELINE_SNAPSHOTS,
    ROLLED_TO,
    SNAPSHOT_MODEL,
    SNAPSHOTS,
    Baseline,
    format_baseline,
    parse_baseline,
)
from kube_nudge.strategies.snapshot.webhook import REVIEW_RESULTS, SnapshotWebhook
from kube_nudge.strategies.writes import (
    FIELD_MANAGER,
    AdoptsBaseline,
    analysed,
    patch_fresh,
    record_baseline,
    rollout_annotations,
    workload_preconditions,
)

__all__ = ["SnapshotStrategy"]

log = logging.getLogger(__name__)

#: Seconds between looks while a new template's revision doesn't exist yet.
REVISION_WAIT = 2.0
#: Seconds before trying again to copy a source the API refused to copy.
COPY_RETRY = 60.0
#: Answers to creating a copy that are not worth a quick retry: forbidden (quota, policy),
#: too large, invalid.
_COPY_REFUSALS = frozenset({403, 413, 422})


def _copyable() -> dict[SourceKind, Resource]:
    """The resource of each kind whose sources it copies (``SourceKindRow.holds_data``)."""
    return {row.kind: source_resource(row.kind) for row in source_kind_rows() if row.holds_data}


#: The Deployment controller's revision number on each ReplicaSet.
REVISION = "deployment.kubernetes.io/revision"


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
        for resource in _copyable().values():
            metrics.writes.labels(kind=resource.kind)

    @staticmethod
    def webhooks(host: Host, hmac_key: Callable[[], bytes]) -> Sequence[Webhook]:
        """Its admission webhook: a re-applied manifest keeps its copies (``ServesWebhooks``)."""
        return (SnapshotWebhook(host, hmac_key),)

    @staticmethod
    def leave_stand_ins(
        target: Target, workload: JSON, plan: Apply, recorded: Mapping[str, str | None]
    ) -> dict[str, Any] | None:
        """The rollout patch of a workload switched away from this strategy
        (``NamesStandIns``): its template names the sources again (copies would keep old
        data forever); the copies go with the revisions that still use them."""
        path = target.kind.template_path
        mapping_text = template_annotation(workload, path, SNAPSHOTS)
        if mapping_text is None and ROLLED_TO not in _annotations(workload):
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

    async def adopt(self, target: Target, plan: Adopt, assessment: Assessment) -> None:
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
                copies = await self._make_copies(target, workload, assessment, {})
            except Refused as refusal:  # adopted all the same: opting in must not wait
                self._adopted_without_copies(target, refusal.hold.message)
                copies = {}
            if copies:
                mapping = {(kind, copy): source for (kind, source), copy in copies.items()}
                also[BASELINE_SNAPSHOTS] = format_baseline(Baseline(plan.config_hash, mapping))
        await record_baseline(self._context, target, plan, assessment, also)

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

    async def apply(self, target: Target, plan: Apply, assessment: Assessment) -> None:
        """Make the copies, point the template at them: the workload rolls."""
        what = describe_apply(plan, assessment.states, target.namespace)
        mapping: dict[tuple[SourceKind, str], str] = {}

        async def build(workload: JSON) -> dict[str, Any]:
            nonlocal mapping
            patch, mapping = await self._snapshot_patch(target, workload, plan, assessment, what)
            return patch

        await patch_fresh(self._context, target, build)
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
                snapshots=_copy_names(mapping),
            ),
        )
        versions = describe_versions(plan, assessment, target.namespace)
        suffix = f" (versions: {versions})" if versions else ""
        self._context.events.post(
            target.ref,
            NORMAL,
            "Rolling",
            f"rolling onto config snapshots {', '.join(_copy_names(mapping))}: {what}{suffix}",
        )

    async def _snapshot_patch(
        self, target: Target, workload: JSON, plan: Apply, assessment: Assessment, cause: str
    ) -> tuple[dict[str, Any], dict[tuple[SourceKind, str], str]]:
        """Ensure the copies of every source `workload`'s template references, and the
        patch that points the template at them; with the copy-to-source mapping."""
        path = target.kind.template_path
        pod_spec = get_pod_spec(workload, path) or {}
        current = parse_stand_ins(template_annotation(workload, path, SNAPSHOTS))
        renames = await self._make_copies(target, workload, assessment, current)

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

    async def _make_copies(
        self,
        target: Target,
        workload: JSON,
        assessment: Assessment,
        current: Mapping[tuple[SourceKind, str], str],
    ) -> dict[tuple[SourceKind, str], str]:
        """Ensure a copy of each source ``workload``'s template references (through its
        ``current`` stand-ins or directly) as the caches know it; each source's copy."""
        pod_spec = get_pod_spec(workload, target.kind.template_path) or {}
        owner = _reference_to(target.kind.resource, workload)
        renames: dict[tuple[SourceKind, str], str] = {}
        referenced = referenced_sources(pod_spec, current, target.namespace)
        for ref in sorted(referenced & set(assessment.visible)):
            state = assessment.states.get(ref)
            if state is None or not state.present:
                continue  # an optional source that doesn't exist: nothing to copy
            if not source_row(ref.kind).holds_data:
                continue  # a CSI class: no object holds its data, each pod fetches it
            copy = copy_name(self._context.hmac_key, ref, state, target.view.uid)
            await self._ensure_copy(target, ref, copy, state.digests, owner)
            renames[(ref.kind, ref.name)] = copy
        return renames

    async def _ensure_copy(
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

    async def maintain(self, target: Target, assessment: Assessment) -> float | None:
        """Give each of the workload's copies exactly the owners that need it: the
        revisions whose template uses it, and the workload itself for the current
        template's copies until that template's revision exists. A copy nothing needs any
        more (its revisions were pruned before they took it over) is deleted, but only
        once the workload's controller has seen its latest template: until then it may
        still make a revision of an intermediate one."""
        revisions = target.kind.revisions
        if revisions is None or (not target.view.stand_ins and target.view.rolled_to is None):
            return None  # never rolled onto copies: none to look after (adoption stays cheap)
        client = self._context.client
        workload = await client.get(target.kind.resource.path(target.namespace, target.name))
        path = target.kind.template_path
        mapping = parse_stand_ins(template_annotation(workload, path, SNAPSHOTS))
        current = set(mapping)
        current_hash = template_annotation(workload, path, CONFIG_HASH)
        # A CronJob makes its Jobs from the template of the moment: nothing to wait for.
        observed = not revisions.follows_template or _generation_observed(workload)
        uid = str((workload.get("metadata") or {}).get("uid"))
        users: dict[tuple[SourceKind, str], list[dict[str, Any]]] = {}
        mine = {uid}
        current_revision = False
        for revision in await self._revisions(target, revisions, uid):
            mine.add(str((revision.get("metadata") or {}).get("uid")))
            if template_annotation(revision, revisions.template_path, CONFIG_HASH) == current_hash:
                current_revision = True
            text = template_annotation(revision, revisions.template_path, SNAPSHOTS)
            for copy in parse_stand_ins(text):
                users.setdefault(copy, []).append(_reference_to(revisions.resource, revision))
        copies = await self._copies(target.namespace, uid)
        held = {
            copy
            for copy, metadata in copies.items()
            if any(o.get("uid") == uid for o in metadata.get("ownerReferences") or ())
        }
        owned = held | {
            copy
            for copy, metadata in copies.items()
            if any(o.get("uid") in mine for o in metadata.get("ownerReferences") or ())
        }
        me = _reference_to(target.kind.resource, workload)
        # The workload itself keeps: its template's copies until their revision exists,
        # what it held until its controller saw the template, and the adopted config's.
        kept = (set() if current_revision else current) | (set() if observed else held)
        kept |= _baseline_copies(workload)
        settled = True
        for copy in sorted(current - set(copies)):
            settled &= await self._replace_deleted(target, copy, mapping[copy], assessment, me)
        for copy in sorted(owned | set(users) | current):
            if (metadata := copies.get(copy)) is None:
                continue  # gone already
            wanted = [*users.get(copy, ()), *([me] if copy in kept else [])]
            settled &= await self._set_owners(target, copy, metadata, wanted, mine)
        waiting = (current and not current_revision) or (held and not observed) or not settled
        # A paused Deployment makes no revision until it is resumed, and resuming it is a
        # change of the workload, which brings the next look: no polling meanwhile.
        paused = bool((workload.get("spec") or {}).get("paused"))
        if waiting and revisions.follows_template and not paused:
            return REVISION_WAIT  # its controller makes the revision any moment now
        return None

    async def _revisions(self, target: Target, revisions: Revisions, uid: object) -> list[JSON]:
        """The revisions (ReplicaSets, ControllerRevisions, Jobs) the workload ``uid`` owns."""
        params: dict[str, str] = {}
        if revisions.by_pod_selector and target.view.pod_selector:
            params["labelSelector"] = target.view.pod_selector
        listed = await self._context.client.get(revisions.resource.path(target.namespace), **params)
        return [
            revision
            for revision in listed.get("items") or ()
            if any(
                o.get("uid") == uid
                for o in (revision.get("metadata") or {}).get("ownerReferences") or ()
            )
        ]

    async def rollback(self, target: Target, failed_hash: str) -> str:
        """Put ``target`` back on the template (and so the copies) of its latest revision
        that doesn't run ``failed_hash``, as ``kubectl rollout undo`` does; a description
        of it. A revision that names the sources themselves (the one adopted) goes back
        onto the copies made at adoption; without them (adopted before they were kept),
        or with no earlier revision, ``CannotRollBack``: the sources now hold the failed
        config, and going back would say so while changing nothing. The patch tests the
        resourceVersion read, so an edit made meanwhile is never overwritten."""
        revisions = target.kind.revisions
        if revisions is None:
            raise CannotRollBack(f"kube-nudge reads no revisions of a {target.kind.resource.kind}")
        client = self._context.client
        workload = await client.get(target.kind.resource.path(target.namespace, target.name))
        metadata = workload.get("metadata") or {}
        candidates = []
        for revision in await self._revisions(target, revisions, metadata.get("uid")):
            template = get_template(revision, revisions.template_path)
            if (
                template is None
                or template_annotation(revision, revisions.template_path, CONFIG_HASH)
                == failed_hash
            ):
                continue
            candidates.append((_revision_number(revision), revision, template))
        if not candidates:
            raise CannotRollBack("no earlier revision to roll back to")
        number, revision, template = max(candidates, key=lambda found: found[0])
        name = (revision.get("metadata") or {}).get("name")
        which = f"revision {number} ({revisions.resource.kind} {name})"
        copies = parse_stand_ins(template_annotation(revision, revisions.template_path, SNAPSHOTS))
        template = _as_template(template)
        if not copies:
            baseline = parse_baseline(_annotations(workload).get(BASELINE_SNAPSHOTS))
            if baseline is None:
                raise CannotRollBack(
                    f"{which} names the sources themselves, which now hold the failed config, "
                    "and no copy of its config was kept (adopted before kube-nudge kept one): "
                    "revert the source to roll back"
                )
            await self._check_copies_exist(target, baseline, which)
            template, copies = _onto_baseline(template, baseline), dict(baseline.copies)
            which += " with the copies of its config made at adoption"
        undo = [
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": metadata.get("resourceVersion")},
            {"op": "replace", "path": "/spec/template", "value": template},
        ]  # fmt: skip
        path = target.kind.resource.path(target.namespace, target.name)
        written = await send(client, Patch(path, undo, PatchType.JSON))
        self._context.expectations.wrote(target.key, written)
        self._context.metrics.writes.labels(kind=target.kind.resource.kind).inc()
        return f"rolled back to {which}: config snapshots {', '.join(_copy_names(copies))}"

    async def _check_copies_exist(self, target: Target, baseline: Baseline, which: str) -> None:
        """``CannotRollBack`` when a copy of the adopted config is gone (deleted by hand):
        pods of a template naming it could not start."""
        for kind, copy in sorted(baseline.copies):
            try:
                await self._context.client.get(source_resource(kind).path(target.namespace, copy))
            except ApiError as exc:
                if not exc.not_found:
                    raise
                raise CannotRollBack(
                    f"{which} names the sources themselves, which now hold the failed config, "
                    f"and {kind.value}/{copy}, the copy of its config, was deleted: revert the "
                    "source to roll back"
                ) from None

    async def _replace_deleted(
        self,
        target: Target,
        copy: tuple[SourceKind, str],
        source: str,
        assessment: Assessment,
        owner: dict[str, Any],
    ) -> bool:
        """A copy the current template needs was deleted (by hand?): make it again if the
        source still holds that data (the name says so), else say that its data is gone.
        False when it should be looked at again."""
        kind, name = copy
        ref = SourceRef(kind, target.namespace, source)
        state = assessment.states.get(ref)
        key = self._context.hmac_key
        if (
            state is not None
            and state.present
            and copy_name(key, ref, state, target.view.uid) == name
        ):
            try:
                await self._ensure_copy(target, ref, name, state.digests, owner)
            except NotYet:
                return False
            except Refused as refusal:
                self._context.events.post(
                    target.ref, WARNING, refusal.hold.event_reason, refusal.hold.message
                )
                return True
            self._deleted(
                target, ref, name, "; made it again", "; made it again from the unchanged source"
            )
            return True
        self._deleted(
            target,
            ref,
            name,
            " and its data is gone",
            " and the source has changed since: new pods of this template cannot start; the "
            "next change of the source rolls onto a new copy",
        )
        return True

    def _deleted(self, target: Target, ref: SourceRef, name: str, logged: str, said: str) -> None:
        """Log and post (SnapshotDeleted) that the copy ``name`` of ``ref`` that the current
        template uses was deleted, and what follows."""
        kind = ref.kind.value
        log.warning("%s: snapshot %s/%s was deleted%s", target, kind, name, logged)
        self._context.events.post(
            target.ref,
            WARNING,
            "SnapshotDeleted",
            f"{kind}/{name} (the copy of {ref.display(target.namespace)} this template uses) "
            f"was deleted{said}",
        )

    async def _copies(
        self, namespace: str, workload_uid: str
    ) -> dict[tuple[SourceKind, str], dict[str, Any]]:
        """Metadata of the workload's snapshot copies (never a Secret's data)."""
        found = {}
        for kind, resource in _copyable().items():
            pages = self._context.client.list_pages(
                resource.path(namespace),
                {"labelSelector": f"{SNAPSHOT_FOR}={workload_uid}"},
                metadata_only=True,
            )
            async for items, _ in pages:
                for item in items:
                    metadata = item.get("metadata") or {}
                    found[(kind, str(metadata.get("name")))] = metadata
        return found

    async def _set_owners(
        self,
        target: Target,
        copy: tuple[SourceKind, str],
        metadata: Mapping[str, Any],
        wanted: list[dict[str, Any]],
        mine: set[str],
    ) -> bool:
        """Owners of `copy`: `wanted`, plus any owner that isn't this workload or one of
        its revisions (another workload sharing the same copy keeps its claim). With no
        owner left, nothing can need it: delete it. False when the copy changed since it
        was listed (e.g. the garbage collector dropped a pruned owner): look again."""
        kind, name = copy
        resource = source_resource(kind)
        current = list(metadata.get("ownerReferences") or ())
        owners = [o for o in current if o.get("uid") not in mine] + wanted
        if {o.get("uid") for o in current} == {o.get("uid") for o in owners}:
            return True
        client = self._context.client
        path = resource.path(target.namespace, name)
        preconditions = {
            "uid": metadata.get("uid"),
            "resourceVersion": metadata.get("resourceVersion"),
        }
        try:
            if owners:
                owned = {"metadata": {"ownerReferences": owners, **preconditions}}
                await send(client, Patch(path, owned))
            else:
                await client.request("DELETE", path, body={"preconditions": preconditions})
                log.info(
                    "%s: deleted snapshot %s/%s, which no revision uses", target, kind.value, name
                )
        except ApiError as exc:
            if exc.not_found:
                return True
            if exc.conflict:
                return False  # changed meanwhile: the next look works from the new state
            raise
        self._context.metrics.writes.labels(kind=resource.kind).inc()
        return True


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _revision_number(revision: Mapping[str, Any]) -> int:
    """A ControllerRevision's ``revision``, or a ReplicaSet's revision annotation."""
    number = revision.get("revision")
    if isinstance(number, int):
        return number
    text = ((revision.get("metadata") or {}).get("annotations") or {}).get(REVISION, "")
    return int(text) if isinstance(text, str) and text.isdigit() else 0


def _baseline_copies(workload: Mapping[str, Any]) -> set[tuple[SourceKind, str]]:
    """The copies of the adopted config (``kube-nudge.io/baseline-snapshots``): what a
    failed first change rolls back onto, kept while the annotation names them."""
    baseline = parse_baseline(_annotations(workload).get(BASELINE_SNAPSHOTS))
    return set(baseline.copies) if baseline is not None else set()


def _as_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A revision's pod template as a workload's: without a ControllerRevision's
    strategic-merge marker or the ReplicaSet's own ``pod-template-hash`` label."""
    found = dict(template)
    found.pop("$patch", None)
    labels = dict((found.get("metadata") or {}).get("labels") or {})
    labels.pop("pod-template-hash", None)
    found["metadata"] = {**(found.get("metadata") or {}), "labels": labels}
    return found


def _onto_baseline(template: Mapping[str, Any], baseline: Baseline) -> dict[str, Any]:
    """``template`` (naming the sources themselves) pointed at the adopted config's copies,
    recording them and that config's hash, as a template rolled onto copies does."""
    by_source = {(kind, source): copy for (kind, copy), source in baseline.copies.items()}
    spec = rename_references(
        template.get("spec") or {}, lambda kind, name: by_source.get((kind, name))
    )
    metadata = dict(template.get("metadata") or {})
    annotations = dict(metadata.get("annotations") or {})
    annotations.update({CONFIG_HASH: baseline.config_hash,
                        SNAPSHOTS: format_stand_ins(baseline.copies)})  # fmt: skip
    return {**template, "metadata": {**metadata, "annotations": annotations}, "spec": spec}


def _copy_names(mapping: Mapping[tuple[SourceKind, str], str]) -> list[str]:
    return sorted(f"{kind.value}/{copy}" for kind, copy in mapping)


def _reference_to(resource: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }


def _generation_observed(workload: Mapping[str, Any]) -> bool:
    """Whether the workload's controller has seen its latest spec."""
    generation = (workload.get("metadata") or {}).get("generation", 0)
    observed = (workload.get("status") or {}).get("observedGeneration", -1)
    return isinstance(observed, int) and isinstance(generation, int) and observed >= generation
