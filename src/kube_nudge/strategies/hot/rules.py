"""Strategy `hot`, decided purely: which changes can reach running pods without a restart,
and whether the pods' reload agents confirmed one (the clock is an argument).

A key consumed through a volume mounted whole (no `subPath`) by app containers reaches
running pods: the kubelet rewrites the files, and the `kube-nudge agent` sidecar reloads
the app. A key consumed through an env var, `envFrom`, a `subPath` mount, a volume an init
container mounts, or a source named only by annotation never does: such a change rolls.
Nor can a pod template with no container running the agent (``runs_agent``): no pod could
ever confirm a reload, so its changes roll at once (or, with `kube-nudge.io/hot-fallback:
warn`, are delivered in place unconfirmed, with a warning), never after a deadline.

Confirmation goes by hash. After each reload the agent writes on its pod
(`kube-nudge.io/loaded-hash`) what it loaded: per watched directory, an HMAC of the files'
paths and contents under its namespace's agent key (Secret `kube-nudge-agent-key`, mounted
into the agent), with that key's id. The controller reads that Secret and the sources once,
lays their data out as the kubelet does for the volume mounted at each directory
(`volume_files`), computes the same HMAC and forgets the values (`check_claim`). A pod has
the change once its agent's claim equals the data delivered, or once it started after the
change; a claim of other data (old files, a wrong key, a directory that isn't a config
volume) is never a confirmation, however fresh its `loaded-at`.

The annotations, the key, the directory hash and the claim are the agent's wire protocol,
``kube_nudge.agentwire``, which the agent writes with: here only the kubelet's side of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
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
from kube_nudge.model.decide import Apply, Assessment
from kube_nudge.model.extensions import Delivery
from kube_nudge.model.hashing import ABSENT, SourceState
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.references import (
    CSI_DRIVER,
    INIT_SUFFIX,
    SUBPATH_SUFFIX,
    Consumption,
    SourceKind,
    SourceRef,
)
from kube_nudge.model.source_kinds import pod_spec_names, source_row

__all__ = [
    "AGENT_COMMAND",
    "NO_AGENT",
    "POLL_SECONDS",
    "UNCONFIRMED",
    "CsiWrites",
    "NotReproducible",
    "PodReport",
    "Verdict",
    "VerdictKind",
    "agent_dir_hash",
    "agent_key",
    "check_claim",
    "claim_sources",
    "delivery",
    "in_place_blockers",
    "judge",
    "restart_reasons",
    "runs_agent",
    "started_after",
    "volume_files",
]

POLL_SECONDS = 2.0
"""How often the pods' reports are read while a hot change waits for them."""
AGENT_COMMAND = "agent"
"""The subcommand of ``kube-nudge`` that runs the reload agent (its image's entrypoint is
``kube-nudge``, so the sidecar's args start with it: docs/reload.md)."""
_AGENT_PROGRAMS = ("kube-nudge", "kubectl-nudge")
_AGENT_MODULES = ("kube_nudge.agent", "kube_nudge.agent.main")
_AGENT_MAIN = ["kube_nudge", AGENT_COMMAND]
NO_AGENT = (
    "no container of its pod template runs the reload agent (`kube-nudge agent`, "
    "docs/reload.md), so no pod could confirm a reload"
)
"""Why a hot change to a pod template without the agent can't wait for confirmation."""
UNCONFIRMED = (
    f"delivered in place unconfirmed: {NO_AGENT}; its pods' volumes are refreshed without "
    "a restart, but nothing reloads the app: a Warning at once, no rollout "
    "(kube-nudge.io/hot-fallback: warn)"
)
"""What a hot change to a pod template without the agent does with `hot-fallback: warn`."""


def runs_agent(pod_spec: Mapping[str, Any]) -> bool:
    """Whether a container of ``pod_spec`` runs the reload agent: an app container, or a
    native sidecar (an init container with ``restartPolicy: Always``). Judged by what it
    runs, not by its image or name, which a registry mirror or a rename changes
    (``_agent_command``)."""
    containers = [
        *(pod_spec.get("containers") or ()),
        *(
            c
            for c in pod_spec.get("initContainers") or ()
            if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
        ),
    ]
    return any(isinstance(c, Mapping) and _agent_command(c) for c in containers)


def _agent_command(container: Mapping[str, Any]) -> bool:
    """Whether ``container``'s command line runs the agent: args starting with ``agent``
    and no command (the image's entrypoint, ``kube-nudge``, as docs/reload.md and the
    chart's NOTES add it), or anywhere in its command and args (a shell's ``-c`` script
    included) ``kube-nudge agent`` by any path (or its other name, ``kubectl-nudge``),
    ``-m kube_nudge agent`` or ``-m kube_nudge.agent``."""
    command, args = _words(container.get("command")), _words(container.get("args"))
    if not command:
        return args[:1] == [AGENT_COMMAND]
    words = [*command, *args]
    for i, word in enumerate(words):
        after = words[i + 1 : i + 3]
        if posixpath.basename(word) in _AGENT_PROGRAMS and after[:1] == [AGENT_COMMAND]:
            return True
        module = after[0] if after else ""
        if word == "-m" and (module in _AGENT_MODULES or after == _AGENT_MAIN):
            return True
    return False


def _words(value: object) -> list[str]:
    """The words of a container's ``command`` or ``args``, each item split at blanks (a
    shell script is one item) and stripped of shell quotes."""
    if not isinstance(value, list):
        return []
    return [w.strip("'\"") for item in value if isinstance(item, str) for w in item.split()]


def restart_reasons(
    plan: Apply,
    visible: Mapping[SourceRef, Consumption],
    states: Mapping[SourceRef, SourceState],
    namespace: str,
) -> list[str]:
    """Why ``plan`` can't be delivered to running pods (empty: it can), naming sources, keys
    and references, never values."""
    if plan.stale_pods:
        return ["the pods started before their config last changed"]
    if plan.changes is None:
        return ["what changed while kube-nudge was not watching is not known key by key"]
    reasons = []
    for ref, keys in plan.changes.items():
        label = ref.display(namespace)
        use = visible.get(ref)
        if not keys:
            went = "appeared" if states.get(ref, ABSENT).present else "was removed"
            reasons.append(f"{label} {went} (only a restart mounts or unmounts it)")
        elif use is None:
            reasons.append(f"{label} no longer counts for the workload")
        elif frozen := use.needs_restart(keys):
            through = ", ".join(_frozen_via(use)) or "a reference read at start"
            reasons.append(f"{label} keys [{', '.join(frozen)}] are read only at start ({through})")
    return reasons


def in_place_blockers(
    view: WorkloadView,
    plan: Apply,
    assessment: Assessment,
    *,
    agent: bool = True,
    fallback_rollout: bool = True,
) -> list[str]:
    """Why ``plan`` must roll ``view`` instead of reloading in place (empty: it reloads):
    no reload agent in its pod template (``agent`` False; ``runs_agent``) when
    `kube-nudge.io/hot-fallback` is rollout (``fallback_rollout``: a reload nobody could
    confirm would roll at the deadline anyway, so it rolls now), keys only a restart
    delivers (``restart_reasons``), pods it can't find, or a template that still names
    another strategy's stand-ins. What ``HotStrategy.apply`` does, and what ``kube-nudge
    plan`` says it will."""
    reasons = [] if agent or not fallback_rollout else [NO_AGENT]
    reasons += restart_reasons(plan, assessment.visible, assessment.states, view.namespace)
    if not view.pod_selector:
        reasons.append("its pods can't be found (no spec.selector)")
    if view.stand_ins:
        reasons.append("its template still names snapshot copies")
    return reasons


def delivery(
    view: WorkloadView,
    plan: Apply,
    assessment: Assessment,
    *,
    agent: bool = True,
    fallback_rollout: bool = True,
) -> Delivery:
    """Strategy hot's ``StrategyModel.delivery`` (``agent`` and ``fallback_rollout`` as for
    ``in_place_blockers``): reload in place, or roll and why; without an agent and with
    `hot-fallback: warn`, in place but unconfirmed."""
    blockers = in_place_blockers(
        view, plan, assessment, agent=agent, fallback_rollout=fallback_rollout
    )
    if blockers:
        return Delivery("roll", f"cannot reload in place: {'; '.join(blockers)}; rolls instead")
    if not agent:
        return Delivery("reload", UNCONFIRMED)
    return Delivery(
        "reload",
        "reloaded in place by each pod's agent: every changed key it reads "
        "reaches its pods through a refreshed volume",
    )


def _frozen_via(use: Consumption) -> list[str]:
    return [
        via
        for via in use.via
        if via.startswith(("env", "annotation")) or via.endswith((SUBPATH_SUFFIX, INIT_SUFFIX))
    ]


@dataclass(frozen=True, slots=True)
class PodReport:
    """What one pod says about its config (from its own annotations and status)."""

    name: str
    started: float | None
    """When its containers read their config at start (Unix seconds), if started."""
    loaded_at: float | None = None
    """Its agent's last successful reload (`kube-nudge.io/loaded-at`)."""
    failed_at: float | None = None
    """Its agent's last failed reload (`kube-nudge.io/reload-failed-at`)."""
    terminating: bool = False
    loaded_delivered: bool = False
    """Whether its agent's `kube-nudge.io/loaded-hash` is the data delivered (`check_claim`)."""
    why_not: str = ""
    """Why its agent's claim is not the data delivered (names, never values), if it made one."""


class VerdictKind(StrEnum):
    """Where a hot change stands."""

    RELOADED = "reloaded"
    WAITING = "waiting"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a hot change went; ``pods`` names the pods that failed or have not confirmed,
    ``why`` says for those whose agent claimed other data than delivered why not."""

    kind: VerdictKind
    pods: tuple[str, ...] = ()
    retry_after: float | None = None
    why: Mapping[str, str] = field(default_factory=dict)


def judge(
    pods: Iterable[PodReport], *, since: float, delivered_at: float, deadline: float, now: float
) -> Verdict:
    """Whether every live pod has the change made at ``since`` (Unix seconds), delivered at
    ``delivered_at``: its agent loaded exactly the data delivered, or it started since. Pods
    that reported a failed reload since then fail it, pods without the change ``deadline``
    seconds after delivery time it out."""
    live = sorted((pod for pod in pods if not pod.terminating), key=lambda pod: pod.name)
    failed = tuple(
        pod.name
        for pod in live
        if pod.failed_at is not None
        and pod.failed_at >= since
        and (pod.loaded_at is None or pod.failed_at > pod.loaded_at)
    )
    if failed:
        return Verdict(VerdictKind.FAILED, failed)
    silent = tuple(pod for pod in live if not _has_change(pod, since))
    if not silent:
        return Verdict(VerdictKind.RELOADED)
    names = tuple(pod.name for pod in silent)
    why = {pod.name: pod.why_not for pod in silent if pod.why_not}
    remaining = delivered_at + deadline - now
    if remaining <= 0:
        return Verdict(VerdictKind.TIMED_OUT, names, why=why)
    return Verdict(VerdictKind.WAITING, names, min(POLL_SECONDS, remaining), why)


def _has_change(pod: PodReport, since: float) -> bool:
    # A reload counts by what it loaded, not by when; a start only when it proves the read.
    return pod.loaded_delivered or started_after(pod.started, since)


def started_after(started: float | None, since: float) -> bool:
    """Whether a pod that started at ``started`` surely read the config changed at
    ``since``. Start times have whole seconds, so only a start in a later second than the
    change proves it: a pod started in the same second may have read either version, and
    counting it would confirm a reload nobody made (seen on the real node, where a pod
    can start and its config change within one second)."""
    return started is not None and started >= math.floor(since) + 1


# -- Confirmation by hash ------------------------------------------------------------------

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


CsiWrites = Mapping[str, float | None]
"""Per SecretProviderClass that counts: when the Secrets Store CSI driver wrote the delivered
versions into the pod (its SecretProviderClassPodStatus's write, whole seconds), None when
its status records other versions or there is none."""


def _csi_classes_at(pod_spec: Mapping[str, Any], directory: str) -> list[str]:
    """The SecretProviderClasses of the Secrets Store CSI volumes mounted at ``directory``
    (empty when something else is mounted there too: that is checked by data)."""
    classes = []
    for volume_name, _, _ in _mounts_at(pod_spec, directory):
        volume = _volume(pod_spec, volume_name) or {}
        csi = volume.get("csi")
        if not isinstance(csi, Mapping) or csi.get("driver") != CSI_DRIVER:
            return []
        name = (csi.get("volumeAttributes") or {}).get("secretProviderClass")
        classes.append(str(name))
    return classes


def _csi_delivered(classes: list[str], csi: CsiWrites, loaded_at: float | None) -> str | None:
    """Whether the pod has a change of the CSI classes mounted at a directory: the files
    there come from the provider, so kube-nudge can't lay them out to check the agent's
    hash. Instead the driver's status of the pod must record the delivered versions, and
    the agent must have reloaded since it wrote them (in that second or later: the driver
    writes the files, then the status). A class that doesn't count is not checked."""
    for name in classes:
        if name not in csi:
            continue
        written = csi[name]
        if written is None:
            return (
                "the CSI driver has not written the delivered versions of "
                f"secretproviderclass/{name} into it yet"
            )
        if loaded_at is None or loaded_at < math.floor(written):
            return (
                f"its agent has not reloaded since the CSI driver wrote secretproviderclass/{name}"
            )
    return None


def check_claim(
    claim: Claim | None,
    pod_spec: Mapping[str, Any],
    namespace: str,
    key: bytes,
    sources: Sources,
    *,
    csi: CsiWrites | None = None,
    loaded_at: float | None = None,
) -> str | None:
    """None when ``claim`` is the data in ``sources`` as the pod's volumes lay it out under
    ``key``; else why not (names, never values). A directory of Secrets Store CSI volumes is
    checked by the driver's record instead (``csi``, and the agent's ``loaded_at``)."""
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
        if classes := _csi_classes_at(pod_spec, directory):
            if (why := _csi_delivered(classes, csi or {}, loaded_at)) is not None:
                return f"{directory}: {why}"
            continue
        expected, problems = _expected(pod_spec, directory, key, namespace, sources)
        if reported in expected:
            continue
        if not expected:
            return f"{directory}: {problems[0]}"
        return f"it loaded other data than delivered in {directory}"
    return None
