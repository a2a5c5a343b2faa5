"""Discovery of the ConfigMaps and Secrets a pod template consumes.

What a container reads of a ConfigMap or Secret volume is what the kubelet projects at
its mount: without `items` every key is a file named by the key; with `items` each listed
key is a file at its `path` (nested paths make directories). A mount without `subPath`
sees the whole volume; a `subPath` mount sees the file or directory at that path, so only
the keys whose file lands at or under it (`_visible`). A volume consumes the union over
its mounts in every container list; a key a `subPath` mount or an init container shows is
read at start only (`Consumption.restart_keys`), but a native sidecar (an init container
with `restartPolicy: Always`) runs beside the app and sees its whole mounts refreshed.
Every listed key stays required even when no mount shows it: the kubelet sets up the whole
volume, and a missing one stops the pod.

`discover` is total: it accepts any JSON-like value, skips what is malformed and never
raises. Whenever it has to guess, it guesses towards consuming more (so a workload
rolls too often rather than too rarely): a volume whose `items` is unusable consumes
every key, a `subPath` it can't read (not a string, absolute, leaving the volume, or
beside a `subPathExpr`) shows the whole volume, a `subPathExpr` with a `$` (a `$(VAR)` the
kubelet expands from the container's env at start, which may hold any path) shows the
whole volume, a volume no container mounts counts whole (a container injected at
admission, a mesh's sidecar mounting user volumes, may read it), and a volume or
container without a name still counts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kube_nudge.model.source_kinds import CSI_DRIVER, SourceKind, pod_spec_names

__all__ = [
    "CSI_DRIVER",
    "Consumption",
    "SourceKind",
    "SourceRef",
    "consume_all",
    "csi_volume_source",
    "discover",
    "merge",
    "rename_references",
]

_UNNAMED = "<unnamed>"
_CONTAINER_FIELDS = ("containers", "initContainers", "ephemeralContainers")
SUBPATH_SUFFIX = " (subPath)"
INIT_SUFFIX = " (init container)"


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
    """Every reference form of every kind (``source_kinds``), in one traversal shared by
    discovery and renaming."""
    names = pod_spec_names()
    for volume in _dicts(spec.get("volumes")):
        label = _label(volume.get("name"))
        candidates = [(kind, volume.get(field), name) for kind, field, name in names.volume]
        projected = _dict(volume.get("projected"))
        if projected is not None:
            for source in _dicts(projected.get("sources")):
                candidates += [(k, source.get(f), n) for k, f, n in names.projected]
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
                for kind, ref_field in names.env_key:
                    if (holder := _dict(value_from.get(ref_field))) is not None:
                        yield _Slot(kind, holder, "name", "env", label)
            for env_from in _dicts(container.get("envFrom")):
                for kind, ref_field in names.env_from:
                    if (holder := _dict(env_from.get(ref_field))) is not None:
                        yield _Slot(kind, holder, "name", "envFrom", label)


def _references(spec: Mapping[str, Any]) -> Iterator[_Found]:
    mounts = _mounts(spec)
    for slot in _slots(spec):
        name = _name(slot.holder.get(slot.name_field))
        if name is None:
            continue
        holder, optional = slot.holder, _optional(slot.holder)
        if slot.form == "volume":
            yield slot.kind, name, _volume_use(holder, optional, slot.label, mounts)
        elif slot.form == "env":
            if (key := _name(holder.get("key"))) is not None:
                yield (
                    slot.kind,
                    name,
                    _use(frozenset((key,)), optional, f"env {slot.label}", frozen=True),
                )
        else:
            yield slot.kind, name, _use(None, optional, f"envFrom {slot.label}", frozen=True)
    yield from _csi_mounted(spec, mounts)


@dataclass(frozen=True, slots=True)
class _Mount:
    """One `volumeMounts` entry, by what it shows of its volume."""

    path: str | None
    """The cleaned path in the volume it shows; None: the whole volume."""
    by_subpath: bool
    """Mounted with `subPath` or `subPathExpr`: the kubelet never refreshes it."""
    init: bool
    """In an init container (not a native sidecar): read once, before the app ran."""

    @property
    def frozen(self) -> bool:
        """Whether what it shows reaches the app only at a restart."""
        return self.by_subpath or self.init


_WHOLE = (_Mount(None, by_subpath=False, init=False),)
"""How a volume no container mounts counts: whole, refreshed."""


def _mounts(spec: Mapping[str, Any]) -> dict[str, tuple[_Mount, ...]]:
    """Every volume's mounts, in every container list, by volume name."""
    found: dict[str, list[_Mount]] = {}
    for field in _CONTAINER_FIELDS:
        for container in _dicts(spec.get(field)):
            init = field == "initContainers" and not _native_sidecar(container)
            for mount in _dicts(container.get("volumeMounts")):
                if (name := _name(mount.get("name"))) is None:
                    continue
                sub, expr = mount.get("subPath"), mount.get("subPathExpr")
                found.setdefault(name, []).append(
                    _Mount(_shown(sub, expr), bool(sub or expr), init)
                )
    return {name: tuple(mounts) for name, mounts in found.items()}


def _native_sidecar(container: Mapping[str, Any]) -> bool:
    """An init container with `restartPolicy: Always` runs beside the app for the pod's
    life, and its whole-volume mounts are refreshed like an app container's."""
    return container.get("restartPolicy") == "Always"


def _shown(sub: object, expr: object) -> str | None:
    """The path in the volume a mount shows, cleaned as the kubelet joins it; None: the
    whole volume, also whenever it can't be known (see the module docstring)."""
    if sub and expr:
        return None  # the API refuses both: don't guess which one
    raw = sub or expr
    if not raw:
        return None
    if not isinstance(raw, str) or (expr and "$" in raw):
        return None
    return _clean(raw)


def _clean(path: str) -> str | None:
    """A relative path inside a volume, normalised (`./conf/` is `conf`); None for the
    volume's root, or for what names no file of the projection: an absolute path, one
    leaving the volume, or the kubelet's own `..data` directories, which hold every file."""
    if path.startswith("/"):
        return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or ".." in parts or parts[0].startswith(".."):
        return None
    return "/".join(parts)


def _volume_use(
    holder: Mapping[str, Any], optional: bool, label: str, mounts: Mapping[str, tuple[_Mount, ...]]
) -> Consumption:
    """One ConfigMap or Secret a volume projects, read as its mounts show it."""
    files = _item_files(holder.get("items"))
    listed = None if files is None else frozenset(key for key, _ in files)
    shown = mounts.get(label, _WHOLE) if label != _UNNAMED else _WHOLE
    keys: frozenset[str] | None = frozenset()
    restart: frozenset[str] | None = frozenset()
    for mount in shown:
        seen = listed if mount.path is None else _visible(files, mount.path)
        keys = None if keys is None or seen is None else keys | seen
        if mount.frozen:
            restart = None if restart is None or seen is None else restart | seen
    via = _via(label, shown)
    return Consumption(
        keys=keys,
        optional=optional,
        required_keys=frozenset() if optional or listed is None else listed,
        via=(via,),
        restart_keys=restart,
    )


def _visible(files: tuple[tuple[str, str | None], ...] | None, path: str) -> frozenset[str]:
    """The keys whose file lands at or under ``path``: without items (``files`` None) the
    key named ``path``, if a key can be (keys hold no `/`); with items, the listed keys
    whose path is ``path`` or below it (one whose path is unusable: every mount's)."""
    if files is None:
        return frozenset() if "/" in path else frozenset((path,))
    return frozenset(
        key for key, file in files if file is None or file == path or file.startswith(path + "/")
    )


def _csi_mounted(
    spec: Mapping[str, Any], mounts: Mapping[str, tuple[_Mount, ...]]
) -> Iterator[_Found]:
    """The source every ``csi`` volume names (the Secrets Store CSI driver's: a
    SecretProviderClass). Every object it fetches counts (None: all keys), and it is
    optional: until a pod mounted it, its versions are unknown, which is not missing config
    (model/mounts.py). A subPath doesn't narrow it: the driver names files by object alias,
    which the class, not the pod spec, says."""
    for volume in _dicts(spec.get("volumes")):
        named = csi_volume_source(volume)
        if named is None:
            continue
        label = _label(volume.get("name"))
        shown = mounts.get(label, ()) if label != _UNNAMED else ()
        frozen = any(m.frozen for m in shown)
        yield *named, _use(None, True, _via(label, shown), frozen=frozen)


def csi_volume_source(volume: Mapping[str, Any]) -> tuple[SourceKind, str] | None:
    """The kind and name of the source a ``csi`` volume names, by the rows' ``csi`` (a
    Secrets Store CSI volume: its SecretProviderClass); None for any other volume."""
    csi = _dict(volume.get("csi"))
    if csi is None:
        return None
    attributes = _dict(csi.get("volumeAttributes")) or {}
    for kind, mount in pod_spec_names().csi:
        name = _name(attributes.get(mount.attribute))
        if csi.get("driver") == mount.driver and name is not None:
            return kind, name
    return None


def _via(label: str, shown: tuple[_Mount, ...]) -> str:
    """How a volume is named in a consumption's ``via``: marked when a mount of it is by
    subPath or in an init container."""
    via = f"volume {label}"
    via += SUBPATH_SUFFIX if any(m.by_subpath for m in shown) else ""
    return via + (INIT_SUFFIX if any(m.init for m in shown) else "")


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


def _item_files(items: object) -> tuple[tuple[str, str | None], ...] | None:
    """(key, cleaned path) of each usable `items` entry (path None: unusable, so shown to
    every mount). None: every key, as a file named by the key. Kubernetes projects every
    key when `items` is absent or empty; an unusable list is treated the same way so that
    a malformed entry never hides a change."""
    if not isinstance(items, list | tuple):
        return None
    files = tuple(
        (key, _clean(path) if isinstance(path := item.get("path"), str) else None)
        for item in _dicts(items)
        if (key := _name(item.get("key"))) is not None
    )
    return files or None


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
