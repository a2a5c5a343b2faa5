"""What the snapshot admission webhook does to a workload being created or updated.

A GitOps sync or `kubectl apply` of the original manifest names the sources again
(`configMap: {name: app}`), while the stored template names their copies: without a
webhook the template changes, the workload rolls, and kube-nudge rolls it back onto the
copies. The webhook renames such references back to the copies the template's mapping
names, where the copy holds the source's current data (its name, an HMAC of that data, is
recomputed) or the stored template names it already, so the stored template does not
change and nothing rolls; for a source whose data changed, the controller then rolls once
onto a new copy. Only a copy the stored template doesn't name, of other data than the
source's (on a create, say), is never brought in: such a source keeps its own name.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from kube_nudge.model.annotations import CONFIG_HASH, WorkloadDefaults
from kube_nudge.model.hashing import SourceState
from kube_nudge.model.podtemplate import TemplatePath, get_template, template_annotation
from kube_nudge.model.projection import project_workload
from kube_nudge.model.references import SourceKind, SourceRef, discover, rename_references
from kube_nudge.model.standins import parse_stand_ins
from kube_nudge.strategies.snapshot.copies import copy_name
from kube_nudge.strategies.snapshot.model import NAME, SNAPSHOTS

__all__ = ["restore_snapshot_template"]

_KEPT = (CONFIG_HASH, SNAPSHOTS)  # template annotations a manifest never carries


def restore_snapshot_template(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    path: TemplatePath,
    defaults: WorkloadDefaults,
    state_of: Callable[[SourceRef], SourceState | None],
    key: bytes,
) -> dict[str, Any] | None:
    """The pod template `new` should carry instead of its own, or None to leave it.

    `new` is the object being admitted (its namespace set), `old` the stored one (None on
    create), `state_of` the cached state of a source (None: unknown)."""
    view = project_workload(new, path, defaults)
    if view is None or view.settings.strategy != NAME:
        return None
    template = get_template(new, path)
    old_template = get_template(old, path) if old is not None else None
    mapping = parse_stand_ins(template_annotation(new, path, SNAPSHOTS))
    if not mapping and old is not None:
        mapping = parse_stand_ins(template_annotation(old, path, SNAPSHOTS))
    spec = template.get("spec") if template is not None else None
    if template is None or not mapping or not isinstance(spec, Mapping):
        return None
    copy_of = {(kind, source): name for (kind, name), source in mapping.items()}
    uid = str(((old or new).get("metadata") or {}).get("uid") or "")
    # What the stored template names: its pods run those copies. A GitOps sync applies a
    # changed ConfigMap, then the unchanged Deployment; letting the changed source's name
    # through there rolled the workload onto the source, then kube-nudge onto a new copy.
    stored = {(r.kind, r.name) for r in discover((old_template or {}).get("spec") or {}, "")}

    def current_copy(kind: SourceKind, name: str) -> str | None:
        copy_name_now = copy_of.get((kind, name))
        ref = SourceRef(kind, view.namespace, name)
        state = state_of(ref)
        if copy_name_now is None or state is None or not state.present:
            return None
        if (kind, copy_name_now) in stored or copy_name(key, ref, state, uid) == copy_name_now:
            return copy_name_now
        return None

    renamed = rename_references(spec, current_copy)
    if renamed == spec:
        return None
    restored = copy.deepcopy(dict(template))
    restored["spec"] = renamed
    metadata = restored.setdefault("metadata", {})
    annotations = metadata.setdefault("annotations", {}) or {}
    metadata["annotations"] = annotations
    old_annotations = ((old_template or {}).get("metadata") or {}).get("annotations") or {}
    for name in _KEPT:
        if name not in annotations and name in old_annotations:
            annotations[name] = old_annotations[name]
    return restored
