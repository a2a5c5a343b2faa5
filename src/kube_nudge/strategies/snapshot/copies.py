"""Snapshots: immutable copies of the ConfigMaps and Secrets a workload consumes, one per
content version, which the ``snapshot`` strategy points the pod template at.

A copy is named ``<source>-<12 hex>``, the hex an HMAC (under the installation key) of the
source's kind and per-key digests and of the workload it is made for, so a name always
means the same bytes (the kubelet caches an immutable object for the life of a pod) and
reveals nothing that would help to guess a Secret's value. Each workload has its own
copies: shared ones made a thousand workloads reading one ConfigMap contend for one object
with a thousand owners (a 1,000-workload fan-out took about 40 times longer). The pod
template records which copy stands for which source (``kube-nudge.io/snapshots``, read
with ``model.standins``); that
mapping travels with every ReplicaSet and ControllerRevision, so ``kubectl rollout undo``
brings back the copies of its time, and discovery maps copy names back to their sources.
Here too is what the strategy's modules share about copies: which kinds are copied, a
mapping's copies as ``kind/name``, and the ownerReference to a copy's owner.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any, Final

from kube_nudge.kube.resources import Resource, source_resource
from kube_nudge.model.annotations import PREFIX
from kube_nudge.model.digests import key_digests
from kube_nudge.model.hashing import SourceState
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.shapes import Annotation, By, On
from kube_nudge.model.source_kinds import source_kind_rows, source_row

__all__ = [
    "COPY_ANNOTATIONS",
    "MAX_NAME",
    "SNAPSHOT_FOR",
    "SNAPSHOT_LABEL",
    "SNAPSHOT_OF",
    "copy_manifest",
    "copy_name",
    "copy_names",
    "copyable",
    "is_copy_of",
    "owner_reference",
]

MAX_NAME = 253  # a ConfigMap or Secret name is a DNS subdomain
_SUFFIX_HEX = 12
_MAGIC = b"kube-nudge/snapshot/v1"

# A table: one declaration a paragraph, as dense as the table row it makes.
# fmt: off
# On the copies the `snapshot` strategy makes.
_LABEL = Annotation(
    PREFIX + "snapshot", On.COPY, By.CONTROLLER,
    "marks a copy: informers leave copies out; kubectl get cm -l kube-nudge.io/snapshot",
    values="true", label=True,
)
_OF = Annotation(
    PREFIX + "snapshot-of", On.COPY, By.CONTROLLER, "the source a copy copies",
    values="e.g. configmap/app",
)
_FOR = Annotation(
    PREFIX + "snapshot-for", On.COPY, By.CONTROLLER,
    "the workload a copy was made for (each has its own copies, so a thousand workloads "
    "reading one ConfigMap never contend for one object)",
    values="the workload's uid", label=True,
)
# fmt: on
SNAPSHOT_LABEL: Final = _LABEL.name
SNAPSHOT_OF: Final = _OF.name
SNAPSHOT_FOR: Final = _FOR.name
#: On the copies, in the order of the annotation table.
COPY_ANNOTATIONS: Final = (_LABEL, _OF, _FOR)


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


def copy_manifest(
    source: Mapping[str, Any], ref: SourceRef, name: str, owner: Mapping[str, Any]
) -> dict[str, Any]:
    """The immutable copy of `source` (a full ConfigMap/Secret) named `name`, made for and
    owned by the workload `owner` (an ownerReference) until revisions take it over."""
    row = source_row(ref.kind)
    copy: dict[str, Any] = {
        "apiVersion": source_resource(ref.kind).api_version,
        "kind": row.api_kind,
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
    for field in ("type", *(data.name for data in row.data)):
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


def copyable() -> dict[SourceKind, Resource]:
    """The resource of each kind whose sources are copied (``SourceKindRow.holds_data``)."""
    return {row.kind: source_resource(row.kind) for row in source_kind_rows() if row.holds_data}


def copy_names(mapping: Mapping[tuple[SourceKind, str], str]) -> list[str]:
    """The copies of ``mapping`` (copy to source) as ``kind/name``, sorted."""
    return sorted(f"{kind.value}/{copy}" for kind, copy in mapping)


def owner_reference(resource: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ownerReference to ``obj``, an object of ``resource`` (a copy's owner)."""
    metadata = obj.get("metadata") or {}
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": metadata.get("name"),
        "uid": metadata.get("uid"),
    }
