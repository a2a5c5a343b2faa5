"""Strategy `hot`'s claims, decided purely: the files the kubelet lays out for a pod's
config volumes, rebuilt from the sources, to check the keyed claim a pod's reload agent
makes of what it loaded.

After each reload the agent writes on its pod (`kube-nudge.io/loaded-hash`) what it
loaded: per watched directory, an HMAC of the files' paths and contents under its
namespace's agent key (Secret `kube-nudge-agent-key`, mounted into the agent), with that
key's id. The controller reads that Secret and the sources once, lays their data out as
the kubelet does for the volume mounted at each directory (`volume_files`), computes the
same HMAC and forgets the values (`check_claim`). A claim of other data (old files, a
wrong key, a directory that isn't a config volume) does not check; a directory of Secrets
Store CSI volumes is checked by the driver's record of the pod instead.

The annotations, the key, the directory hash and the claim are the agent's wire protocol,
``kube_nudge.agentwire``, which the agent writes with: here only the kubelet's side of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import posixpath
from collections.abc import Mapping
from typing import Any

from kube_nudge.agentwire import (
    AGENT_KEY_FIELD,
    AGENT_KEY_SECRET,
    MIN_KEY_BYTES,
    Claim,
    directory_hash,
    key_id,
    usable_key,
)
from kube_nudge.model.references import SourceKind, SourceRef, csi_volume_source
from kube_nudge.model.source_kinds import pod_spec_names, source_row

__all__ = [
    "MountWrites",
    "NotReproducible",
    "agent_dir_hash",
    "agent_key",
    "check_claim",
    "claim_sources",
    "volume_files",
]

Sources = Mapping[SourceRef, Mapping[str, Any] | None]
"""Sources as read from the API server (None: not found), for the moment of one check."""


class NotReproducible(Exception):
    """kube-nudge can't tell what the kubelet put in a directory; the message says why,
    naming volumes, sources and keys, never values."""


def agent_dir_hash(key: bytes, files: Mapping[str, bytes]) -> str:
    """The agent's hash of a directory holding ``files`` (relative path -> content)."""
    by_name = {path.encode("utf-8", "surrogatepass"): content for path, content in files.items()}
    digests = ((name, hashlib.sha256(by_name[name]).digest()) for name in sorted(by_name))
    return directory_hash(key, digests)


def agent_key(secret: Mapping[str, Any] | None) -> bytes:
    """The agent key in the Secret ``AGENT_KEY_SECRET`` as the agent reads its file
    (surrounding whitespace dropped); NotReproducible when there is none to use."""
    if secret is None:
        raise NotReproducible(
            f"there is no Secret {AGENT_KEY_SECRET} with the agents' key in this namespace "
            "(docs/reload.md: the agents' key)"
        )
    encoded = (secret.get("data") or {}).get(AGENT_KEY_FIELD)
    try:
        raw = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    key = usable_key(raw)
    if key is None:
        raise NotReproducible(
            f"Secret {AGENT_KEY_SECRET} has no {AGENT_KEY_FIELD!r} of {MIN_KEY_BYTES} bytes or more"
        )
    return key


# The kubelet's layout of a volume: `MakePayload` of its configMap and secret volume
# plugins, and `collectData` of the projected one.


def _source_files(
    kind: SourceKind,
    source: Mapping[str, Any],
    name_field: str,
    namespace: str,
    sources: Sources,
) -> dict[str, bytes]:
    name = source.get(name_field)
    ref = SourceRef(kind, namespace, name if isinstance(name, str) else "")
    label = ref.display(namespace)
    optional = source.get("optional") is True
    obj = sources.get(ref)
    if obj is None:
        if optional:
            return {}  # an optional source that doesn't exist: an empty volume
        raise NotReproducible(f"{label} doesn't exist: the kubelet keeps the files it had")
    values = _values(kind, obj, label)
    items = source.get("items")
    if not isinstance(items, list) or not items:
        return dict(values)
    files: dict[str, bytes] = {}
    for item in items:
        key = item.get("key") if isinstance(item, Mapping) else None
        path = item.get("path") if isinstance(item, Mapping) else None
        if not isinstance(key, str) or not isinstance(path, str) or not path:
            raise NotReproducible(f"a volume item of {label} has no key or path")
        if key not in values:
            if optional:
                continue
            raise NotReproducible(f"{label} has no key {key!r}: the kubelet keeps the files it had")
        files[posixpath.normpath(path)] = values[key]
    return files


def _values(kind: SourceKind, obj: Mapping[str, Any], label: str) -> dict[str, bytes]:
    """Each key's bytes as the kubelet writes them: the kind's data fields in order
    (a ConfigMap's data, then binaryData), text as UTF-8 and base64 decoded."""
    values: dict[str, bytes] = {}
    for data_field in source_row(kind).data:
        entries = obj.get(data_field.name) or {}
        if not isinstance(entries, Mapping):
            raise NotReproducible(f"{label} has a malformed {data_field.name}")
        for key, value in entries.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise NotReproducible(f"{label} has a malformed {data_field.name}")
            if not data_field.base64:
                values[key] = value.encode("utf-8", "surrogatepass")
                continue
            try:
                values[key] = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise NotReproducible(f"{label} key {key!r} is not base64") from None
    return values


def _volume_sources(
    volume: Mapping[str, Any],
) -> list[tuple[SourceKind, Mapping[str, Any], str]]:
    """(kind, source, its name field) for each source the volume projects, in order;
    NotReproducible for a volume that isn't made of the sources' volumes only."""
    label = f"volume {volume.get('name')}"
    names = pod_spec_names()
    for kind, held_in, name_field in names.volume:
        if isinstance(source := volume.get(held_in), Mapping):
            return [(kind, source, name_field)]
    projected = volume.get("projected")
    if not isinstance(projected, Mapping):
        raise NotReproducible(f"{label} is not a ConfigMap, Secret or projected volume")
    found: list[tuple[SourceKind, Mapping[str, Any], str]] = []
    for entry in projected.get("sources") or []:
        named = [
            (kind, source, name_field)
            for kind, held_in, name_field in names.projected
            if isinstance(entry, Mapping) and isinstance(source := entry.get(held_in), Mapping)
        ]
        if not named:
            other = ", ".join(sorted(entry)) if isinstance(entry, Mapping) else "?"
            raise NotReproducible(f"{label} also projects {other}, which only the kubelet knows")
        found.append(named[0])
    return found


def volume_files(volume: Mapping[str, Any], namespace: str, sources: Sources) -> dict[str, bytes]:
    """The files the kubelet lays out for ``volume`` from ``sources`` (relative path ->
    content), or NotReproducible. Without `items` each key is a file of its name; with them
    only the listed keys, at their paths; a projected volume merges its sources in order
    (a later one wins a path). Modes don't count: the agent's hash has none."""
    files: dict[str, bytes] = {}
    for kind, source, name_field in _volume_sources(volume):
        files.update(_source_files(kind, source, name_field, namespace, sources))
    return files


def _mounts_at(pod_spec: Mapping[str, Any], directory: str) -> list[tuple[str, str, bool]]:
    """(volume name, path below the mount, whether by subPath) of the deepest mount that
    holds ``directory`` in each container that has one."""
    found: set[tuple[str, str, bool]] = set()
    containers = [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]
    for container in containers:
        best: tuple[int, tuple[str, str, bool]] | None = None
        for mount in (
            (container.get("volumeMounts") or []) if isinstance(container, Mapping) else []
        ):
            if not isinstance(mount, Mapping) or not isinstance(mount.get("mountPath"), str):
                continue
            root = posixpath.normpath(mount["mountPath"])
            if directory == root:
                rel = ""
            elif directory.startswith(root.rstrip("/") + "/"):
                rel = directory[len(root.rstrip("/")) + 1 :]
            else:
                continue
            by_subpath = bool(mount.get("subPath") or mount.get("subPathExpr"))
            if best is None or len(root) > best[0]:
                best = (len(root), (str(mount.get("name")), rel, by_subpath))
        if best is not None:
            found.add(best[1])
    return sorted(found)


def _volume(pod_spec: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    for volume in pod_spec.get("volumes") or []:
        if isinstance(volume, Mapping) and volume.get("name") == name:
            return volume
    return None


def claim_sources(claim: Claim, pod_spec: Mapping[str, Any], namespace: str) -> set[SourceRef]:
    """The sources whose data ``claim`` is checked against (to read them first)."""
    refs: set[SourceRef] = set()
    for directory in claim.dirs:
        for volume_name, _, _ in _mounts_at(pod_spec, directory):
            volume = _volume(pod_spec, volume_name)
            try:
                found = [] if volume is None else _volume_sources(volume)
            except NotReproducible:
                continue
            for kind, source, name_field in found:
                if isinstance(name := source.get(name_field), str):
                    refs.add(SourceRef(kind, namespace, name))
    return refs


def _expected(
    pod_spec: Mapping[str, Any], directory: str, key: bytes, namespace: str, sources: Sources
) -> tuple[set[str | None], list[str]]:
    """The hashes ``directory`` may hold (one per container mounting something there), and
    why some can't be known."""
    expected: set[str | None] = set()
    problems: list[str] = []
    mounts = _mounts_at(pod_spec, directory)
    if not mounts:
        problems.append("no container mounts a volume there")
    for volume_name, rel, by_subpath in mounts:
        volume = _volume(pod_spec, volume_name)
        if volume is None:
            problems.append(f"volume {volume_name} is not in the pod")
            continue
        if by_subpath:
            problems.append(f"volume {volume_name} is mounted by subPath: never refreshed")
            continue
        try:
            files = volume_files(volume, namespace, sources)
        except NotReproducible as exc:
            problems.append(str(exc))
            continue
        if rel:
            prefix = rel + "/"
            files = {p[len(prefix) :]: c for p, c in files.items() if p.startswith(prefix)}
            if not files:
                expected.add(None)  # no file below it: the agent finds no such directory
                continue
        expected.add(agent_dir_hash(key, files))
    return expected, problems


MountWrites = Mapping[SourceRef, float | None]
"""Per source known once mounted that counts (a Secrets Store CSI class): when whatever
mounts it wrote the delivered versions into the pod (the write of its mount status, a
SecretProviderClassPodStatus; whole seconds), None when its status records other versions
or there is none."""


def _mounted_at(pod_spec: Mapping[str, Any], directory: str, namespace: str) -> list[SourceRef]:
    """The sources known once mounted (a Secrets Store CSI class) of the ``csi`` volumes
    mounted at ``directory`` (empty when something else is mounted there too: that is
    checked by data)."""
    refs = []
    for volume_name, _, _ in _mounts_at(pod_spec, directory):
        named = csi_volume_source(_volume(pod_spec, volume_name) or {})
        if named is None:
            return []
        refs.append(SourceRef(named[0], namespace, named[1]))
    return refs


def _mounted_delivered(
    refs: list[SourceRef], written: MountWrites, loaded_at: float | None
) -> str | None:
    """Whether the pod has a change of the sources known once mounted at a directory: the
    files there come from the provider, so kube-nudge can't lay them out to check the
    agent's hash. Instead the mount's status must record the delivered versions, and the
    agent must have reloaded since it was written (in that second or later: the driver
    writes the files, then the status). A source that doesn't count is not checked."""
    for ref in refs:
        if ref not in written:
            continue
        mounts = source_row(ref.kind).mounts
        at, shown = written[ref], ref.display(ref.namespace)
        writer = mounts.writer if mounts is not None else "its driver"
        if at is None:
            return f"{writer} has not written the delivered versions of {shown} into it yet"
        if loaded_at is None or loaded_at < math.floor(at):
            return f"its agent has not reloaded since {writer} wrote {shown}"
    return None


def check_claim(
    claim: Claim | None,
    pod_spec: Mapping[str, Any],
    namespace: str,
    key: bytes,
    sources: Sources,
    *,
    mounted: MountWrites | None = None,
    loaded_at: float | None = None,
) -> str | None:
    """None when ``claim`` is the data in ``sources`` as the pod's volumes lay it out under
    ``key``; else why not (names, never values). A directory of sources known once mounted
    (Secrets Store CSI volumes) is checked by their mounts' records instead (``mounted``,
    and the agent's ``loaded_at``)."""
    if claim is None:
        return "its kube-nudge.io/loaded-hash is missing or not of this version"
    if claim.key_id != key_id(key):
        return (
            f"its agent hashes with key {claim.key_id}, not {AGENT_KEY_SECRET}'s "
            f"({key_id(key)}): mount that Secret into the agent"
        )
    if not claim.dirs:
        return "its agent watches no directory"
    for directory, reported in sorted(claim.dirs.items()):
        if refs := _mounted_at(pod_spec, directory, namespace):
            if (why := _mounted_delivered(refs, mounted or {}, loaded_at)) is not None:
                return f"{directory}: {why}"
            continue
        expected, problems = _expected(pod_spec, directory, key, namespace, sources)
        if reported in expected:
            continue
        if not expected:
            return f"{directory}: {problems[0]}"
        return f"it loaded other data than delivered in {directory}"
    return None
