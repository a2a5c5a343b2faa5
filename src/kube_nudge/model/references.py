"""Discovery of the ConfigMaps and Secrets a pod template consumes.

`discover` is total: it accepts any JSON-like value, skips what is malformed and never
raises. Whenever it has to guess, it guesses towards consuming more (so a workload
rolls too often rather than too rarely): a volume whose `items` is unusable consumes
every key, and a volume or container without a name still counts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "CSI_DRIVER",
    "Consumption",
    "SourceKind",
    "SourceRef",
    "consume_all",
    "discover",
    "merge",
    "rename_references",
]

_UNNAMED = "<unnamed>"
CSI_DRIVER = "secrets-store.csi.k8s.io"
"""The Secrets Store CSI driver's name in a pod's ``csi`` volume."""
_CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")
SUBPATH_SUFFIX = " (subPath)"
INIT_SUFFIX = " (init container)"


class SourceKind(StrEnum):
    """Kind of a configuration source."""

    CONFIGMAP = "configmap"
    SECRET = "secret"  # noqa: S105  # nosec B105 # a kind, not a password
    CSI = "secretproviderclass"
    """A SecretProviderClass mounted by the Secrets Store CSI driver (docs/csi-secrets.md):
    its "keys" are the ids of the objects the driver fetched, their data the versions."""


@dataclass(frozen=True, slots=True, order=True)
class SourceRef:
    """A ConfigMap or Secret, by namespace and name. `str(ref)` is `kind/namespace/name`."""

    kind: SourceKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    def display(self, namespace: str | None = None) -> str:
        """`kind/name` when the source lives in `namespace`, else `kind/namespace/name`."""
        if namespace is not None and namespace == self.namespace:
            return f"{self.kind}/{self.name}"
        return str(self)


@dataclass(frozen=True, slots=True)
class Consumption:
    """How a pod template consumes one source, merged over all its references."""

    keys: frozenset[str] | None
    """Consumed keys; None means every key (data and binaryData)."""
    optional: bool
    """True only if every reference to the source is optional."""
    required_keys: frozenset[str]
    """Keys that a non-optional key reference or volume `items` entry needs to exist."""
    via: tuple[str, ...]
    """Sorted, unique human-readable forms of the references, e.g. `volume cfg`, `env app`,
    `volume cfg (subPath)` for a volume some container mounts with `subPath`."""
    restart_keys: frozenset[str] | None = frozenset()
    """Keys a running container never sees change (env vars, `envFrom`, `subPath` mounts,
    volumes an init container mounts): only a restart brings their new data. None: every
    key; empty: none (the source reaches the pods through refreshed volumes only)."""

    @property
    def never_refreshed(self) -> bool:
        """True when a running pod never sees a change through some reference (env vars,
        `envFrom`, `subPath` mounts, init containers): only a restart brings it new data."""
        return self.restart_keys is None or bool(self.restart_keys)

    def needs_restart(self, changed: list[str]) -> list[str]:
        """Which of the ``changed`` keys only a restart delivers."""
        if self.restart_keys is None:
            return list(changed)
        return [key for key in changed if key in self.restart_keys]


def discover(pod_spec: Mapping[str, Any], namespace: str) -> dict[SourceRef, Consumption]:
    """Every ConfigMap/Secret consumed by a pod spec, sorted by reference. Never raises."""
    found: dict[SourceRef, Consumption] = {}
    spec: object = pod_spec  # callers pass raw JSON: check rather than trust the hint
    if not isinstance(spec, Mapping):
        return found
    for kind, name, use in _references(spec):
        ref = SourceRef(kind, namespace, name)
        previous = found.get(ref)
        found[ref] = use if previous is None else _combine(previous, use)
    return {ref: found[ref] for ref in sorted(found)}


def merge(
    a: Mapping[SourceRef, Consumption], b: Mapping[SourceRef, Consumption]
) -> dict[SourceRef, Consumption]:
    """Union of two discoveries, combining the consumption of sources present in both."""
    merged = dict(a)
    for ref, use in b.items():
        previous = merged.get(ref)
        merged[ref] = use if previous is None else _combine(previous, use)
    return {ref: merged[ref] for ref in sorted(merged)}


def consume_all(refs: Iterable[SourceRef], via: str) -> dict[SourceRef, Consumption]:
    """Consumption of sources named outside the pod spec: all keys, not optional."""
    # How the pods use them is unknown: count them as read at start (a change rolls).
    use = Consumption(
        keys=None, optional=False, required_keys=frozenset(), via=(via,), restart_keys=None
    )
    return {ref: use for ref in sorted(set(refs))}


def _combine(a: Consumption, b: Consumption) -> Consumption:
    keys = None if a.keys is None or b.keys is None else a.keys | b.keys
    restart = (
        None
        if a.restart_keys is None or b.restart_keys is None
        else a.restart_keys | b.restart_keys
    )
    return Consumption(
        keys=keys,
        optional=a.optional and b.optional,
        required_keys=a.required_keys | b.required_keys,
        via=tuple(sorted(set(a.via) | set(b.via))),
        restart_keys=restart,
    )


def _use(
    keys: frozenset[str] | None, optional: bool, via: str, *, frozen: bool = False
) -> Consumption:
    """One reference. The keys it names are required unless it is optional; ``frozen``:
    a running container never sees them change."""
    required = frozenset() if optional or keys is None else keys
    restart = keys if frozen else frozenset()
    return Consumption(
        keys=keys, optional=optional, required_keys=required, via=(via,), restart_keys=restart
    )


_Found = tuple[SourceKind, str, Consumption]


@dataclass(frozen=True, slots=True)
class _Slot:
    """One place in a pod spec that names a ConfigMap or Secret."""

    kind: SourceKind
    holder: Mapping[str, Any]
    """The object holding the name (a volume's `configMap`, a `secretKeyRef`, ...)."""
    name_field: str  # "name", or "secretName" in a secret volume
    form: str  # "volume" | "env" | "envFrom"
    label: str  # the volume's or container's name


def _slots(spec: Mapping[str, Any]) -> Iterator[_Slot]:
    """Every reference form, in one traversal shared by discovery and renaming."""
    for volume in _dicts(spec.get("volumes")):
        label = _label(volume.get("name"))
        candidates: list[tuple[SourceKind, object, str]] = [
            (SourceKind.CONFIGMAP, volume.get("configMap"), "name"),
            (SourceKind.SECRET, volume.get("secret"), "secretName"),
        ]
        projected = _dict(volume.get("projected"))
        if projected is not None:
            for source in _dicts(projected.get("sources")):
                candidates.append((SourceKind.CONFIGMAP, source.get("configMap"), "name"))
                candidates.append((SourceKind.SECRET, source.get("secret"), "name"))
        for kind, raw, name_field in candidates:
            if (holder := _dict(raw)) is not None:
                yield _Slot(kind, holder, name_field, "volume", label)
    for field in _CONTAINER_FIELDS:
        for container in _dicts(spec.get(field)):
            label = _label(container.get("name"))
            for env in _dicts(container.get("env")):
                value_from = _dict(env.get("valueFrom"))
                if value_from is None:
                    continue
                for kind, ref_field in _KEY_REFS:
                    if (holder := _dict(value_from.get(ref_field))) is not None:
                        yield _Slot(kind, holder, "name", "env", label)
            for env_from in _dicts(container.get("envFrom")):
                for kind, ref_field in _WHOLE_REFS:
                    if (holder := _dict(env_from.get(ref_field))) is not None:
                        yield _Slot(kind, holder, "name", "envFrom", label)


_KEY_REFS = ((SourceKind.CONFIGMAP, "configMapKeyRef"), (SourceKind.SECRET, "secretKeyRef"))
_WHOLE_REFS = ((SourceKind.CONFIGMAP, "configMapRef"), (SourceKind.SECRET, "secretRef"))


def _references(spec: Mapping[str, Any]) -> Iterator[_Found]:
    subpath_volumes = _subpath_volumes(spec)
    init_volumes = _init_volumes(spec)
    for slot in _slots(spec):
        name = _name(slot.holder.get(slot.name_field))
        if name is None:
            continue
        holder, optional = slot.holder, _optional(slot.holder)
        if slot.form == "volume":
            via = f"volume {slot.label}"
            if slot.label in subpath_volumes:
                via += SUBPATH_SUFFIX
            if slot.label in init_volumes:
                via += INIT_SUFFIX
            frozen = slot.label in subpath_volumes or slot.label in init_volumes
            keys = _item_keys(holder.get("items"))
            yield slot.kind, name, _use(keys, optional, via, frozen=frozen)
        elif slot.form == "env":
            if (key := _name(holder.get("key"))) is not None:
                yield (
                    slot.kind,
                    name,
                    _use(frozenset((key,)), optional, f"env {slot.label}", frozen=True),
                )
        else:
            yield slot.kind, name, _use(None, optional, f"envFrom {slot.label}", frozen=True)
    yield from _csi_classes(spec, subpath_volumes, init_volumes)


def _csi_classes(
    spec: Mapping[str, Any], subpath_volumes: set[str], init_volumes: set[str]
) -> Iterator[_Found]:
    """The SecretProviderClass of every Secrets Store CSI volume. Every object it fetches
    counts (None: all keys), and it is optional: until a pod mounted it, its versions are
    unknown, which is not missing config (model/csi.py)."""
    for volume in _dicts(spec.get("volumes")):
        csi = _dict(volume.get("csi"))
        if csi is None or csi.get("driver") != CSI_DRIVER:
            continue
        attributes = _dict(csi.get("volumeAttributes")) or {}
        name = _name(attributes.get("secretProviderClass"))
        if name is None:
            continue
        label = _label(volume.get("name"))
        via = f"volume {label}"
        via += SUBPATH_SUFFIX if label in subpath_volumes else ""
        via += INIT_SUFFIX if label in init_volumes else ""
        frozen = label in subpath_volumes or label in init_volumes
        yield SourceKind.CSI, name, _use(None, True, via, frozen=frozen)


def rename_references(
    pod_spec: Mapping[str, Any], rename: Callable[[SourceKind, str], str | None]
) -> dict[str, Any]:
    """A deep copy of `pod_spec` in which every ConfigMap/Secret reference, in every form
    `discover` knows, names `rename(kind, name)` instead (None: left as it is)."""
    renamed: dict[str, Any] = copy.deepcopy(dict(pod_spec))
    for slot in _slots(renamed):
        name = _name(slot.holder.get(slot.name_field))
        new = rename(slot.kind, name) if name is not None else None
        if new is not None and isinstance(slot.holder, dict):
            slot.holder[slot.name_field] = new
    return renamed


def _subpath_volumes(spec: Mapping[str, Any]) -> set[str]:
    """Names of volumes that some container mounts with `subPath` or `subPathExpr`: the
    kubelet never updates such a mount."""
    return {
        name
        for field in _CONTAINER_FIELDS
        for container in _dicts(spec.get(field))
        for mount in _dicts(container.get("volumeMounts"))
        if (mount.get("subPath") or mount.get("subPathExpr"))
        and (name := _name(mount.get("name"))) is not None
    }


def _init_volumes(spec: Mapping[str, Any]) -> set[str]:
    """Names of volumes an init container mounts: it read them once, before the app ran,
    and whatever it made of them never changes."""
    return {
        name
        for container in _dicts(spec.get("initContainers"))
        for mount in _dicts(container.get("volumeMounts"))
        if (name := _name(mount.get("name"))) is not None
    }


def _item_keys(items: object) -> frozenset[str] | None:
    # Kubernetes projects every key when `items` is absent or empty; an unusable list is
    # treated the same way so that a malformed entry never hides a change.
    if not isinstance(items, list | tuple):
        return None
    keys = frozenset(key for item in _dicts(items) if (key := _name(item.get("key"))) is not None)
    return keys or None


def _dict(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _dicts(value: object) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, Mapping):
                yield item


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _label(value: object) -> str:
    return value if isinstance(value, str) and value else _UNNAMED


def _optional(source: Mapping[str, Any]) -> bool:
    return source.get("optional") is True
