"""Strategy ``snapshot``'s upkeep of its copies (``maintain``, on every pass): who owns
each, a copy the current template needs made again when it was deleted, and a copy that
nothing needs any more deleted.

Copies are owned by the workload until the revisions that use them exist (ReplicaSets,
ControllerRevisions, Jobs), then by exactly those revisions: Kubernetes' garbage
collector deletes a copy when the last revision using it is pruned by the workload's
history limit, and all of them with the workload.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.events import WARNING
from kube_nudge.kube.patches import Patch, send
from kube_nudge.kube.resources import source_resource
from kube_nudge.kube.workloads import Revisions, Target
from kube_nudge.model import CONFIG_HASH, Assessment, SourceKind, SourceRef
from kube_nudge.model.podtemplate import template_annotation
from kube_nudge.model.standins import parse_stand_ins
from kube_nudge.strategies.base import NotYet, Refused, StrategyContext
from kube_nudge.strategies.snapshot.copies import (
    SNAPSHOT_FOR,
    copy_name,
    copyable,
    owner_reference,
)
from kube_nudge.strategies.snapshot.model import SNAPSHOTS, baseline_of
from kube_nudge.strategies.snapshot.rolling import CopyMaker

__all__ = ["REVISION_WAIT", "Upkeep", "owned_revisions"]

#: The strategy's logger (``strategy.py``'s name), whichever of its modules logs.
log = logging.getLogger(f"{__package__}.strategy")

#: Seconds between looks while a new template's revision doesn't exist yet.
REVISION_WAIT = 2.0


class Upkeep:
    """Keeps a workload's copies in order; ``maker`` makes a deleted one again."""

    def __init__(self, context: StrategyContext, maker: CopyMaker) -> None:
        self._context = context
        self._maker = maker

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
        for revision in await owned_revisions(client, target, revisions, uid):
            mine.add(str((revision.get("metadata") or {}).get("uid")))
            if template_annotation(revision, revisions.template_path, CONFIG_HASH) == current_hash:
                current_revision = True
            text = template_annotation(revision, revisions.template_path, SNAPSHOTS)
            for copy in parse_stand_ins(text):
                users.setdefault(copy, []).append(owner_reference(revisions.resource, revision))
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
        me = owner_reference(target.kind.resource, workload)
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
                await self._maker.ensure_copy(target, ref, name, state.digests, owner)
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
        for kind, resource in copyable().items():
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


async def owned_revisions(
    client: KubeClient, target: Target, revisions: Revisions, uid: object
) -> list[JSON]:
    """The revisions (ReplicaSets, ControllerRevisions, Jobs) the workload ``uid`` owns."""
    params: dict[str, str] = {}
    if revisions.by_pod_selector and target.view.pod_selector:
        params["labelSelector"] = target.view.pod_selector
    listed = await client.get(revisions.resource.path(target.namespace), **params)
    return [
        revision
        for revision in listed.get("items") or ()
        if any(
            o.get("uid") == uid
            for o in (revision.get("metadata") or {}).get("ownerReferences") or ()
        )
    ]


def _baseline_copies(workload: Mapping[str, Any]) -> set[tuple[SourceKind, str]]:
    """The copies of the adopted config (``kube-nudge.io/baseline-snapshots``): what a
    failed first change rolls back onto, kept while the annotation names them."""
    baseline = baseline_of(workload)
    return set(baseline.copies) if baseline is not None else set()


def _generation_observed(workload: Mapping[str, Any]) -> bool:
    """Whether the workload's controller has seen its latest spec."""
    generation = (workload.get("metadata") or {}).get("generation", 0)
    observed = (workload.get("status") or {}).get("observedGeneration", -1)
    return isinstance(observed, int) and isinstance(generation, int) and observed >= generation
