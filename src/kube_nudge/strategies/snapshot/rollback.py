"""Strategy ``snapshot`` rolling back a workload whose rollout failed: back onto the
template (and so the copies) of its latest revision that doesn't run the failed config,
as ``kubectl rollout undo`` does; a revision naming the sources themselves (the one
adopted) goes back onto the copies made at adoption (``kube-nudge.io/baseline-snapshots``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_nudge.kube.client import ApiError
from kube_nudge.kube.resources import source_resource
from kube_nudge.kube.workloads import Target
from kube_nudge.model import CONFIG_HASH
from kube_nudge.model.podtemplate import get_template, template_annotation
from kube_nudge.model.references import rename_references
from kube_nudge.model.standins import format_stand_ins, parse_stand_ins
from kube_nudge.strategies.base import CannotRollBack, StrategyContext
from kube_nudge.strategies.changes import Operations, WorkloadChanges
from kube_nudge.strategies.snapshot.copies import copy_names
from kube_nudge.strategies.snapshot.model import SNAPSHOTS, Baseline, baseline_of
from kube_nudge.strategies.snapshot.upkeep import owned_revisions

__all__ = ["REVISION", "Rollback"]

#: The Deployment controller's revision number on each ReplicaSet.
REVISION = "deployment.kubernetes.io/revision"


class Rollback:
    """Puts a workload whose rollout failed back on an earlier revision's copies."""

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    async def rollback(self, target: Target, failed_hash: str, changes: WorkloadChanges) -> str:
        """Put ``target`` back on the template (and so the copies) of its latest revision
        that doesn't run ``failed_hash``, as ``kubectl rollout undo`` does; a description
        of it. A revision that names the sources themselves (the one adopted) goes back
        onto the copies made at adoption; without them (adopted before they were kept),
        or with no earlier revision, ``CannotRollBack``: the sources now hold the failed
        config, and going back would say so while changing nothing. The patch tests the
        resourceVersion read, so an edit made meanwhile is never overwritten; it is the pass's
        write (``changes``), with the pass's annotations (the failure's record) in it."""
        revisions = target.kind.revisions
        if revisions is None:
            raise CannotRollBack(f"kube-nudge reads no revisions of a {target.kind.resource.kind}")
        client = self._context.client
        workload = await client.get(target.kind.resource.path(target.namespace, target.name))
        metadata = workload.get("metadata") or {}
        candidates = []
        for revision in await owned_revisions(client, target, revisions, metadata.get("uid")):
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
            baseline = baseline_of(workload)
            if baseline is None:
                raise CannotRollBack(
                    f"{which} names the sources themselves, which now hold the failed config, "
                    "and no copy of its config was kept (adopted before kube-nudge kept one): "
                    "revert the source to roll back"
                )
            await self._check_copies_exist(target, baseline, which)
            template, copies = _onto_baseline(template, baseline), dict(baseline.copies)
            which += " with the copies of its config made at adoption"
        undo: tuple[dict[str, Any], ...] = (
            {"op": "test", "path": "/metadata/resourceVersion",
             "value": metadata.get("resourceVersion")},
            {"op": "replace", "path": "/spec/template", "value": template},
        )  # fmt: skip
        changes.replace_by(Operations(undo, metadata.get("annotations") or {}))
        return f"rolled back to {which}: config snapshots {', '.join(copy_names(copies))}"

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


def _revision_number(revision: Mapping[str, Any]) -> int:
    """A ControllerRevision's ``revision``, or a ReplicaSet's revision annotation."""
    number = revision.get("revision")
    if isinstance(number, int):
        return number
    text = ((revision.get("metadata") or {}).get("annotations") or {}).get(REVISION, "")
    return int(text) if isinstance(text, str) and text.isdigit() else 0


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
