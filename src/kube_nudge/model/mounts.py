"""Sources known only once mounted (``SourceKindRow.mounts``): their versions, from the
statuses written per pod that mounted one. The Secrets Store CSI driver's is the built-in
kind (docs/csi-secrets.md): a pod mounting a ``csi`` volume of driver
``secrets-store.csi.k8s.io`` consumes the SecretProviderClass its
``volumeAttributes.secretProviderClass`` names (``references``). The driver writes one
``SecretProviderClassPodStatus`` per pod and class, recording the id and version of every
object it fetched from the provider (Vault, AWS, Azure, GCP), and rewrites it when
rotation finds new versions. The values themselves never reach the API. Which fields of a
status say what is the row's (``MountStatuses``); this one projection reads any kind's.

The state of a source (a class, per namespace) is the versions of its *newest* status: the
one whose objects were written last (the highest resourceVersion among the mounted ones). So:

- a rotation is seen as soon as the driver re-mounts the first pod; the other pods' later
  rotations, and the new pods a rollout starts, record the same versions: no new change;
- a status going away (its pod deleted, the workload scaled to zero) changes nothing:
  the caches keep the class's newest state until a status writes newer objects;
- no status at all (no pod mounted it yet) is *unknown*, not absent: an unknown class is
  left out of the hash (``decide.assess``), and once a pod mounts it, a workload whose
  recorded hash is the one without it adopts the versions its pods just mounted.

Only the object ids and a digest of each version are kept (``SourceState``); the versions
themselves are named nowhere (they are not secret values, but say when a secret rotated).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kube_nudge.model.digests import value_digest
from kube_nudge.model.projection import SourceView, data_write
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.shapes import SourceSettings
from kube_nudge.model.source_kinds import MountStatuses, source_row
from kube_nudge.model.sourcestate import SourceState

__all__ = ["DEFAULT_CLASS_SETTINGS", "PodStatus", "advance", "class_view", "project_pod_status"]

DEFAULT_CLASS_SETTINGS = SourceSettings(ignore=False, share_with=frozenset())
"""A source known once mounted carries no kube-nudge annotations that are read (a
SecretProviderClass): the defaults."""

_MAX_OBJECTS = 1000  # a class fetching more is cut here (a hostile status costs this much)


@dataclass(frozen=True, slots=True)
class PodStatus:
    """What the caches keep of one mount status (a SecretProviderClassPodStatus)."""

    kind: SourceKind
    """The kind of the source mounted."""
    namespace: str
    source: str
    """The source mounted (``status.secretProviderClassName``)."""
    pod: str
    """``status.podName``: the pod it is of (strategy hot reads each pod's)."""
    objects: tuple[tuple[str, str], ...]
    """``status.objects``: (id, version) pairs, sorted by id."""
    resource_version: int
    written_at: float | None = None
    """When its status was last written (``managedFields``), else its creation."""
    writers: tuple[str, ...] = ()
    """The field managers of that write (the driver's): the pace of its writes."""

    @property
    def ref(self) -> SourceRef:
        """The source this status is of."""
        return SourceRef(self.kind, self.namespace, self.source)


def project_pod_status(obj: Mapping[str, Any], kind: SourceKind) -> PodStatus | None:
    """A mount status of ``kind`` (its row's ``mounts``: a SecretProviderClassPodStatus)
    as kept, or None when it names no source or is not mounted (its ``mounted`` field is
    not true). Never raises."""
    fields = source_row(kind).mounts
    metadata = obj.get("metadata")
    status = obj.get(fields.section) if fields is not None else None
    if fields is None or not isinstance(metadata, Mapping) or not isinstance(status, Mapping):
        return None
    name = status.get(fields.source)
    mounted = fields.mounted is None or status.get(fields.mounted) is True
    if not isinstance(name, str) or not name or not mounted:
        return None
    version = str(metadata.get("resourceVersion") or "")
    written_at, writers = data_write(metadata, (f"f:{fields.section}",))
    return PodStatus(
        kind=kind,
        namespace=sys.intern(str(metadata.get("namespace") or "")),
        source=name,
        pod=str(status.get(fields.pod) or ""),
        objects=_objects(status.get(fields.objects), fields),
        resource_version=int(version) if version.isdigit() else 0,
        written_at=written_at,
        writers=writers,
    )


def advance(
    current: SourceView | None, old: PodStatus | None, new: PodStatus | None
) -> SourceView | None:
    """The class's view after one watch event of one of its statuses (``old`` → ``new``,
    None: not there or not mounted), or None when it stays ``current``. Only a status whose
    objects were written after the class's newest (a higher resourceVersion: those of one
    API server grow with every write) moves it; a status that goes away, or is rewritten
    with the objects it had (a label, its owner), never does."""
    if new is None or (old is not None and old.objects == new.objects):
        return None
    if current is not None and new.resource_version <= current.resource_version:
        return None
    view = class_view(new)
    if current is not None and current.state == view.state:
        # The same versions written again (a new pod mounting): the data last changed, and
        # was written by whom, when they were first recorded.
        return replace(view, data_changed_at=current.data_changed_at, writers=current.writers)
    return view


def class_view(status: PodStatus) -> SourceView:
    """The source (a class), from its newest status: each object id a key, its version's
    digest the key's digest."""
    digests = {object_id: value_digest(version) for object_id, version in status.objects}
    return SourceView(
        state=SourceState(present=True, digests=digests),
        settings=DEFAULT_CLASS_SETTINGS,
        errors=(),
        data_changed_at=status.written_at,
        resource_version=status.resource_version,
        writers=status.writers,
    )


def _objects(raw: object, fields: MountStatuses) -> tuple[tuple[str, str], ...]:
    """(id, version) of every readable entry of ``status.objects``, sorted; an id listed
    twice keeps its last version (the driver lists each once)."""
    found: dict[str, str] = {}
    if isinstance(raw, list):
        for entry in raw[:_MAX_OBJECTS]:
            object_id = entry.get(fields.object_id) if isinstance(entry, Mapping) else None
            if isinstance(object_id, str):
                version = entry.get(fields.object_version)
                found[object_id] = version if isinstance(version, str) else ""
    return tuple(sorted(found.items()))
