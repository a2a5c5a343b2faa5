"""Snapshots: immutable copies of the ConfigMaps and Secrets a workload consumes, one per
content version, which the ``snapshot`` strategy points the pod template at.

A copy is named ``<source>-<12 hex>``, the hex an HMAC (under the installation key) of the
source's kind and per-key digests and of the workload it is made for, so a name always
means the same bytes (the kubelet caches an immutable object for the life of a pod) and
reveals nothing that would help to guess a Secret's value. Each workload has its own
copies: shared ones made a thousand workloads reading one ConfigMap contend for one object
with a thousand owners (a 1,000-workload fan-out took about 40 times longer). The pod
template records which copy stands for which source (``kube-nudge.io/snapshots``); that
mapping travels with every ReplicaSet and ControllerRevision, so ``kubectl rollout undo``
brings back the copies of its time, and discovery maps copy names back to their sources.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from kube_nudge.model.annotations import SNAPSHOT_FOR, SNAPSHOT_LABEL, SNAPSHOT_OF, SNAPSHOTS
from kube_nudge.model.digests import key_digests
from kube_nudge.model.hashing import SourceState
from kube_nudge.model.podtemplate import TemplatePath
from kube_nudge.model.references import Consumption, SourceKind, SourceRef, discover, merge

__all__ = [
    "MAX_NAME",
    "SNAPSHOTS",
    "SNAPSHOT_LABEL",
    "SNAPSHOT_OF",
    "SnapshotMap",
    "copy_manifest",
    "copy_name",
    "format_snapshots",
    "is_copy_of",
    "parse_snapshots",
    "pod_spec_patch",
    "referenced_sources",
    "restore_sources",
]

MAX_NAME = 253  # a ConfigMap or Secret name is a DNS subdomain
_POD_SPEC_LISTS = ("volumes", "containers", "initContainers", "ephemeralContainers")
_SUFFIX_HEX = 12
_MAGIC = b"kube-nudge/snapshot/v1"

SnapshotMap = Mapping[tuple[SourceKind, str], str]
"""(kind, copy name) -> source name."""


def copy_name(key: bytes, ref: SourceRef, state: SourceState, workload_uid: str) -> str:
    """The name of the copy of `ref` holding exactly the data `state` digests, for the
    workload with uid `workload_uid`."""
    mac = hmac.new(key, _MAGIC, hashlib.sha256)
    digests = (f"{k}\x00{d.hex()}" for k, d in state.digests.items())
    parts = (workload_uid, ref.kind.value, *digests)
    for part in parts:
        encoded = part.encode("utf-8", "surrogatepass")
        mac.update(len(encoded).to_bytes(4, "big") + encoded)
    suffix = mac.hexdigest()[:_SUFFIX_HEX]
    # Cut a long source name so the result stays a valid DNS subdomain: no label may end
    # in "-" or ".", which a cut could leave.
    stem = ref.name[: MAX_NAME - _SUFFIX_HEX - 1].rstrip("-.")
    return f"{stem}-{suffix}"


def parse_snapshots(text: object) -> dict[tuple[SourceKind, str], str]:
    """The template's copy-to-source mapping; anything unreadable is left out."""
    if not isinstance(text, str):
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    found: dict[tuple[SourceKind, str], str] = {}
    if isinstance(raw, dict):
        for copy, source in raw.items():
            kind_text, _, name = str(copy).partition("/")
            if kind_text in SourceKind.__members__.values() and name and isinstance(source, str):
                found[(SourceKind(kind_text), name)] = source
    return found


def format_snapshots(mapping: SnapshotMap) -> str:
    """The annotation value for `mapping` (sorted, compact)."""
    return json.dumps(
        {f"{kind.value}/{copy}": source for (kind, copy), source in sorted(mapping.items())},
        separators=(",", ":"),
    )


def restore_sources(
    consumed: Mapping[SourceRef, Consumption], mapping: SnapshotMap
) -> dict[SourceRef, Consumption]:
    """`consumed` with every copy replaced by the source it stands for."""
    restored: dict[SourceRef, Consumption] = {}
    for ref, use in consumed.items():
        source = mapping.get((ref.kind, ref.name))
        original = ref if source is None else SourceRef(ref.kind, ref.namespace, source)
        restored = merge(restored, {original: use})
    return restored


def referenced_sources(
    pod_spec: Mapping[str, Any], mapping: SnapshotMap, namespace: str
) -> set[SourceRef]:
    """The sources a pod spec references, through copies or directly."""
    return set(restore_sources(discover(pod_spec, namespace), mapping))


def pod_spec_patch(
    path: TemplatePath,
    old_spec: Mapping[str, Any],
    new_spec: Mapping[str, Any],
    template_annotations: Mapping[str, str | None],
) -> dict[str, Any]:
    """A merge patch setting the template's annotations and every reference list of the
    pod spec that differs (a merge patch replaces a list whole: send it with the
    workload's resourceVersion, so it never overwrites an edit made since it was read)."""
    template: dict[str, Any] = {"metadata": {"annotations": dict(template_annotations)}}
    changed = {f: new_spec.get(f) for f in _POD_SPEC_LISTS if new_spec.get(f) != old_spec.get(f)}
    if changed:
        template["spec"] = changed
    patch: dict[str, Any] = template
    for segment in reversed(path):
        patch = {segment: patch}
    return patch


def copy_manifest(
    source: Mapping[str, Any], ref: SourceRef, name: str, owner: Mapping[str, Any]
) -> dict[str, Any]:
    """The immutable copy of `source` (a full ConfigMap/Secret) named `name`, made for and
    owned by the workload `owner` (an ownerReference) until revisions take it over."""
    copy: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap" if ref.kind is SourceKind.CONFIGMAP else "Secret",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {
                SNAPSHOT_LABEL: "true",
                SNAPSHOT_FOR: str(owner.get("uid")),
                "app.kubernetes.io/managed-by": "kube-nudge",
            },
            "annotations": {SNAPSHOT_OF: f"{ref.kind.value}/{ref.name}"},
            "ownerReferences": [dict(owner)],
        },
        "immutable": True,
    }
    for field in ("type", "data", "binaryData"):
        if field in source:
            copy[field] = source[field]
    return copy


def is_copy_of(
    obj: Mapping[str, Any], ref: SourceRef, source: Mapping[str, Any], workload_uid: str
) -> bool:
    """Whether `obj` (found under a copy's name) is kube-nudge's immutable copy of exactly
    `source`'s data for that workload. Anything else under that name is never used: it
    could be anyone's."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return (
        obj.get("immutable") is True
        and labels.get(SNAPSHOT_LABEL) == "true"
        and labels.get(SNAPSHOT_FOR) == workload_uid
        and (metadata.get("annotations") or {}).get(SNAPSHOT_OF) == f"{ref.kind.value}/{ref.name}"
        and obj.get("type") == source.get("type")
        and key_digests(obj) == key_digests(source)
    )
