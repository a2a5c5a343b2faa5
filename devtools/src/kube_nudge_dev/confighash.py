"""The config hash a workload should carry, computed as the documents say, with none of
kube-nudge's own rules: the independent oracle of the tests and the benchmarks.

It follows README's "The hash" and the annotation tables, and the byte layout the product
documents in `kube_nudge.model.hashing` and `kube_nudge.model.digests` (their docstrings):

1. Which sources and keys the pod template consumes: ConfigMap/Secret volumes and
   projected volume sources (their ``items`` list keys, else every key), as far as the
   volume's mounts show them (docs/concepts.md, "A volume counts for what its mounts
   show": a ``subPath`` shows the keys whose file is at or under it), ``env`` key
   references and ``envFrom`` (every key), in every container list; a copy the template's
   ``kube-nudge.io/snapshots`` map names stands for its source. ``kube-nudge.io/configmaps``
   and ``secrets`` add sources (every key); ``exclude`` removes some. Reloader's and Wave's
   annotations mean what README's ``--compat`` table says. With ``--csi-secrets``
   (docs/csi-secrets.md), a ``csi`` volume of driver ``secrets-store.csi.k8s.io`` consumes
   its ``secretProviderClass`` (every key): the class's keys are the object ids of its newest
   mounted SecretProviderClassPodStatus (highest resourceVersion), each id's value its
   version; a class no pod mounted is unknown and left out of the hash altogether.
2. Which of them count: one another namespace shares (``share-with``), and one not
   ``ignore``d.
3. ``v1-`` and the first 40 hex digits of HMAC-SHA256 under the installation key over a
   length-prefixed encoding of, per counted source in sorted order, its kind, namespace and
   name, whether it exists, whether every key or a listed set counts, and per key (sorted)
   its 16-byte BLAKE2b digest or an absent marker.

It imports nothing of kube-nudge but its HTTP client (an import-linter contract holds it
to that), so a rule changed in the product and not in the documents fails the tests.
Only the well-formed annotations the tests write are modelled: one it cannot read makes
the annotation count for nothing, as the product does with an invalid value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import posixpath
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient

__all__ = ["Ref", "config_hash", "consumed", "expected_hash", "read_sources"]

JSON = dict[str, Any]
Ref = tuple[str, str, str]
"""(kind, namespace, name), kind ``configmap``, ``secret`` or ``secretproviderclass``: sorts
as the hash orders."""
Keys = frozenset[str] | None
"""The consumed keys of a source; None: every key."""

CONFIGMAP, SECRET, CSI = "configmap", "secret", "secretproviderclass"
CSI_DRIVER = "secrets-store.csi.k8s.io"
_CSI_STATUSES = "/apis/secrets-store.csi.x-k8s.io/v1/namespaces/{}/secretproviderclasspodstatuses"
_TRUE = ("true", "True", "TRUE", "t", "T", "1")  # Go's ParseBool, as README lists
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_PREFIX = "kube-nudge.io/"
_RELOADER, _WAVE = "reloader.stakater.com/", "wave.pusher.com/"
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


# --- 1. what the workload consumes ----------------------------------------------------


def consumed(
    workload: JSON, template_path: Sequence[str], *, csi_secrets: bool = False
) -> dict[Ref, Keys]:
    """Every source ``workload`` consumes and its keys, before sharing and ``ignore``
    (``csi_secrets``: as ``--csi-secrets``, Secrets Store CSI classes too)."""
    namespace = workload["metadata"]["namespace"]
    annotations = workload["metadata"].get("annotations") or {}
    template: JSON = workload
    for step in template_path:
        template = template.get(step) or {}
    copies = _stand_ins((template.get("metadata") or {}).get("annotations") or {})
    found: dict[Ref, Keys] = {}
    for kind, name, keys in _template_uses(template.get("spec") or {}):
        if kind != CSI or csi_secrets:
            _use(found, (kind, namespace, copies.get((kind, name), name)), keys)
    peers = _peers(annotations)
    named: set[Ref] = set()
    for kind, value in ((CONFIGMAP, annotations.get(_PREFIX + "configmaps")),
                        (SECRET, annotations.get(_PREFIX + "secrets"))):  # fmt: skip
        for ref in _named(kind, namespace, _items(value)):
            _use(found, ref, None)
    for kind, items in peers["named"].items():  # Reloader's reload lists name sources too
        named |= _named(kind, namespace, items)
    extra = set(named)
    for kind, items in peers["extra"].items():
        extra |= _named(kind, namespace, items)
    for ref in sorted(extra):
        _use(found, ref, None)
    excluded = _excluded(namespace, _items(annotations.get(_PREFIX + "exclude")))
    return {
        ref: keys
        for ref, keys in sorted(found.items())
        if ref not in excluded
        and (peers["kinds"] is None or ref[0] in peers["kinds"])
        and (not peers["named_only"] or ref in named)
    }


def _template_uses(spec: JSON) -> Iterator[tuple[str, str, Keys]]:
    """(kind, name, keys) of each reference of a pod spec."""
    shown = _shown(spec)
    for volume in spec.get("volumes") or []:
        csi = volume.get("csi") or {}
        if csi.get("driver") == CSI_DRIVER and (csi.get("volumeAttributes") or {}).get(
            "secretProviderClass"
        ):
            yield CSI, csi["volumeAttributes"]["secretProviderClass"], None
        paths = shown.get(volume["name"], [None])  # mounted by none: every key counts
        if "configMap" in volume:
            source = volume["configMap"]
            yield CONFIGMAP, source["name"], _volume_keys(source, paths)
        if "secret" in volume:
            source = volume["secret"]
            yield SECRET, source["secretName"], _volume_keys(source, paths)
        for projection in (volume.get("projected") or {}).get("sources") or []:
            for field, kind in (("configMap", CONFIGMAP), ("secret", SECRET)):
                if field in projection:
                    source = projection[field]
                    yield kind, source["name"], _volume_keys(source, paths)
    for field in _CONTAINER_LISTS:
        for container in spec.get(field) or []:
            for env in container.get("env") or []:
                value_from = env.get("valueFrom") or {}
                for ref_field, kind in (("configMapKeyRef", CONFIGMAP), ("secretKeyRef", SECRET)):
                    if ref_field in value_from:
                        ref = value_from[ref_field]
                        yield kind, ref["name"], frozenset({ref["key"]})
            for env_from in container.get("envFrom") or []:
                for ref_field, kind in (("configMapRef", CONFIGMAP), ("secretRef", SECRET)):
                    if ref_field in env_from:
                        yield kind, env_from[ref_field]["name"], None


def _item_keys(volume_source: JSON) -> Keys:
    """A volume's listed keys; every key without a list (or with an empty one)."""
    return frozenset(item["key"] for item in volume_source.get("items") or []) or None


def _shown(spec: JSON) -> dict[str, list[str | None]]:
    """Per volume name, what each of its mounts shows: a normalised path in the volume,
    or None for all of it (no ``subPath``, ``.``, ``..data``, or a ``subPathExpr`` with a
    variable, which may name any path)."""
    shown: dict[str, list[str | None]] = {}
    for field in _CONTAINER_LISTS:
        for container in spec.get(field) or []:
            for mount in container.get("volumeMounts") or []:
                path = mount.get("subPath") or mount.get("subPathExpr") or "."
                if "$" in path:
                    path = "."
                path = posixpath.normpath(path)
                whole = path == "." or path.startswith("..")
                shown.setdefault(mount["name"], []).append(None if whole else path)
    return shown


def _volume_keys(volume_source: JSON, paths: list[str | None]) -> Keys:
    """The keys of one projected source that its volume's mounts show: a file is the key's
    name without ``items``, else each listed key's ``path``; a mount shows the files at or
    under its path."""
    files = [(item["key"], posixpath.normpath(item["path"]))
             for item in volume_source.get("items") or []]  # fmt: skip
    keys: set[str] = set()
    for path in paths:
        if path is None:
            return _item_keys(volume_source)
        if not files:
            keys |= {path} if "/" not in path else set()
        else:
            keys |= {key for key, file in files if file == path or file.startswith(path + "/")}
    return frozenset(keys)


def _use(found: dict[Ref, Keys], ref: Ref, keys: Keys) -> None:
    """Add one use of ``ref``: listed keys add up, one use of every key takes them all."""
    if ref in found:
        before = found[ref]
        found[ref] = None if before is None or keys is None else before | keys
    else:
        found[ref] = keys


def _stand_ins(template_annotations: Mapping[str, str]) -> dict[tuple[str, str], str]:
    """``kube-nudge.io/snapshots``: {"configmap/COPY": "SOURCE"} as {(kind, copy): source}."""
    text = template_annotations.get(_PREFIX + "snapshots")
    if not text:
        return {}
    mapping: dict[str, str] = json.loads(text)
    return {(copy.split("/", 1)[0], copy.split("/", 1)[1]): source
            for copy, source in mapping.items()}  # fmt: skip


def _items(value: object) -> list[str] | None:
    """A comma-separated list; None (the annotation counts for nothing) with an empty item."""
    if not isinstance(value, str):
        return []
    items = [item.strip() for item in value.split(",")] if value else []
    return items if all(items) else None


def _named(kind: str, namespace: str, items: list[str] | None) -> set[Ref]:
    """Sources named ``name`` or ``namespace/name``."""
    refs = set()
    for item in items or []:
        other, _, name = item.rpartition("/")
        refs.add((kind, other or namespace, name))
    return refs


def _excluded(namespace: str, items: list[str] | None) -> set[Ref]:
    """``configmap/NAME`` or ``secret/NAME`` items; any other makes the list count for nothing."""
    refs: set[Ref] = set()
    for item in items or []:
        kind, _, name = item.partition("/")
        if kind not in (CONFIGMAP, SECRET) or not name:
            return set()
        refs |= _named(kind, namespace, [name])
    return refs


def _peers(annotations: Mapping[str, str]) -> dict[str, Any]:
    """README's ``--compat`` table: what Reloader's and Wave's annotations ask."""
    on = {n: annotations.get(n) in _TRUE for n in (
        _RELOADER + "auto", "configmap." + _RELOADER + "auto", "secret." + _RELOADER + "auto",
        _WAVE + "update-on-config-change")}  # fmt: skip
    cm_auto, secret_auto = on["configmap." + _RELOADER + "auto"], on["secret." + _RELOADER + "auto"]
    named = {
        CONFIGMAP: _items(annotations.get("configmap." + _RELOADER + "reload")) or [],
        SECRET: _items(annotations.get("secret." + _RELOADER + "reload")) or [],
    }
    kinds = None
    if (cm_auto or secret_auto) and not on[_RELOADER + "auto"]:
        kinds = {kind for kind, auto in ((CONFIGMAP, cm_auto), (SECRET, secret_auto)) if auto}
    if (
        annotations.get(_RELOADER + "search") in _TRUE
        and not any(on.values())
        and not any(named.values())
    ):
        raise NotImplementedError("reloader.stakater.com/search alone is not modelled")
    return {
        "named": named,
        "extra": {
            CONFIGMAP: _items(annotations.get(_WAVE + "extra-configmaps")) or [],
            SECRET: _items(annotations.get(_WAVE + "extra-secrets")) or [],
        },
        "kinds": kinds,
        "named_only": any(named.values()) and not any(on.values()),
    }


# --- 2. which of them count -----------------------------------------------------------


def counted(
    workload: JSON, uses: Mapping[Ref, Keys], sources: Mapping[Ref, JSON | None]
) -> dict[Ref, Keys]:
    """The consumed sources that count: another namespace's only if it shares with this
    one (one that doesn't exist is refused), and none that is ignored."""
    namespace = workload["metadata"]["namespace"]
    kept = {}
    for ref, keys in uses.items():
        obj = sources.get(ref)
        annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        shared = _items(annotations.get(_PREFIX + "share-with")) or []
        if not all(item == "*" or _LABEL.fullmatch(item) for item in shared):
            shared = []
        if ref[1] != namespace and (obj is None or not ({"*", namespace} & set(shared))):
            continue
        if obj is not None and (
            annotations.get(_PREFIX + "ignore") in _TRUE
            or annotations.get(_RELOADER + "ignore") in _TRUE
        ):
            continue
        kept[ref] = keys
    return kept


# --- 3. the hash ------------------------------------------------------------------------


def config_hash(key: bytes, uses: Mapping[Ref, Keys], sources: Mapping[Ref, JSON | None]) -> str:
    """``v1-<40 hex>``: HMAC-SHA256 under ``key`` of the counted sources' encoding."""
    parts = [_field(b"kube-nudge/config-hash/v1"), _count(len(uses))]
    for ref in sorted(uses):
        obj, keys = sources.get(ref), uses[ref]
        digests = _digests(obj) if obj is not None else {}
        parts += [_field(text.encode()) for text in ref]
        parts += [b"\x01" if obj is not None else b"\x00", b"\x00" if keys is None else b"\x01"]
        listed = sorted(digests) if keys is None else sorted(keys)
        parts.append(_count(len(listed)))
        for name in listed:
            digest = digests.get(name)
            parts.append(_field(name.encode()))
            parts.append(b"\x00" if digest is None else b"\x01" + _field(digest))
    mac = hmac.new(key, b"".join(parts), hashlib.sha256)
    return "v1-" + mac.hexdigest()[:40]


def _digests(obj: JSON) -> dict[str, bytes]:
    """BLAKE2b-128 of each value as the API gives it (Secret values: their base64 text),
    personalised per field; a key in both fields digests the two digests."""
    found = {k: _blake(v, b"kube-nudge:data") for k, v in (obj.get("data") or {}).items()}
    for name, value in (obj.get("binaryData") or {}).items():
        digest = _blake(value, b"kube-nudge:bin")
        found[name] = digest if name not in found else hashlib.blake2b(
            found[name] + digest, digest_size=16, person=b"kube-nudge:both"
        ).digest()  # fmt: skip
    return found


def _blake(value: str, person: bytes) -> bytes:
    return hashlib.blake2b(value.encode(), digest_size=16, person=person).digest()


def _count(n: int) -> bytes:
    return struct.pack(">Q", n)


def _field(data: bytes) -> bytes:
    return _count(len(data)) + data


# --- reading the API ------------------------------------------------------------------


async def read_sources(
    kube: KubeClient, refs: Sequence[Ref], cache: dict[Ref, JSON | None]
) -> dict[Ref, JSON | None]:
    """Each source as the API has it now (None: it doesn't exist), read once per ``cache``."""
    for ref in refs:
        if ref not in cache and ref[0] == CSI:
            cache[ref] = await _csi_class(kube, ref)
        if ref not in cache:
            kind, namespace, name = ref
            plural = "configmaps" if kind == CONFIGMAP else "secrets"
            try:
                cache[ref] = await kube.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
                cache[ref] = None
    return {ref: cache[ref] for ref in refs}


async def _csi_class(kube: KubeClient, ref: Ref) -> JSON | None:
    """A Secrets Store CSI class as a source: its newest mounted status's objects as keys
    and versions as values; None (unknown) when no pod has it mounted."""
    _, namespace, name = ref
    statuses = (await kube.get(_CSI_STATUSES.format(namespace)))["items"]
    mounted = [
        item for item in statuses
        if (item.get("status") or {}).get("secretProviderClassName") == name
        and (item.get("status") or {}).get("mounted") is True
    ]  # fmt: skip
    if not mounted:
        return None
    newest = max(mounted, key=lambda item: int(item["metadata"]["resourceVersion"]))
    objects = newest["status"].get("objects") or []
    return {"data": {entry["id"]: entry.get("version", "") for entry in objects}}


async def expected_hash(
    kube: KubeClient,
    template_path: Sequence[str],
    workload: JSON,
    key: bytes,
    *,
    cache: dict[Ref, JSON | None] | None = None,
    csi_secrets: bool = False,
) -> str:
    """The hash ``workload``'s pod template should carry given its sources in the API now
    (``csi_secrets``: as the controller's ``--csi-secrets``)."""
    uses = consumed(workload, template_path, csi_secrets=csi_secrets)
    sources = await read_sources(kube, list(uses), cache if cache is not None else {})
    # A CSI class no pod mounted is unknown, not absent: it is left out, not hashed as gone.
    uses = {ref: keys for ref, keys in uses.items() if ref[0] != CSI or sources[ref] is not None}
    return config_hash(key, counted(workload, uses, sources), sources)
