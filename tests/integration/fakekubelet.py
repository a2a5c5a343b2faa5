"""A fake kubelet for one extra node, so that a rollout can really fail in tests.

kwok makes every pod on its nodes Running and Ready whatever config it reads. The node
created here carries no kwok annotation (kwok leaves it and its pods alone); instead
``FakeKubelet`` plays its kubelet: when a pod is bound to the node it resolves each
container's environment the way a kubelet does at container start (``env[].value`` with
``$(VAR)`` expansion, ``valueFrom`` ConfigMap/Secret keys read at that moment, honouring
``optional``, ``envFrom`` with ``prefix``, a few ``fieldRef`` paths) and marks the container
ready only when ``valid(env)`` says the config is good. A pod whose config is invalid runs
but never becomes Ready, like a readiness probe failing forever, so a Deployment rolling
to a bad config stalls and hits its progress deadline while the old pods keep serving.

Semantics (decided, as a kubelet does them):

* A running pod is never re-evaluated: a kubelet reads env once, when it creates the
  container, and a container failing its readiness probe is not restarted. Changing the
  ConfigMap afterwards changes nothing until a new pod starts.
* A pod that cannot start yet is retried every ``RETRY_SECONDS`` (faster than a kubelet's
  back-off), reading its config again each time: a missing non-optional ConfigMap/Secret
  or key leaves it Pending with ``CreateContainerConfigError`` (its containers start only
  when all of them can be created); an init container whose config is invalid leaves it
  Pending in ``CrashLoopBackOff`` (a restarted init container re-reads its env).
* A pod with a deletionTimestamp is deleted at once with grace period 0 (the kubelet's
  final delete), so ReplicaSets scale down.
* Secret values are never logged, stored, or written anywhere; only names and keys are.

Not modelled: volumes (files), ``resourceFieldRef``, sidecar restart policies, probes,
node heartbeats. The dev cluster's kube-controller-manager runs with
``--node-monitor-grace-period=8760h``, so the node needs no Lease or heartbeat: observed,
the node lifecycle controller removes the admission's ``node.kubernetes.io/not-ready``
taint once the node reports Ready and never taints it again.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import httpx2 as httpx

from kube_nudge.kube.client import MERGE_PATCH, ApiError
from kube_nudge.kube.resources import CONFIGMAPS, PODS, SECRETS, Resource
from kube_nudge.kube.transport import TransportError
from kube_nudge_dev.admin import AdminClient

# Under kube_nudge so that the session's leak check (conftest) sees every record of it.
log = logging.getLogger("kube_nudge.testing.fakekubelet")

JSON = dict[str, Any]
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
#: Label and taint key of fake-kubelet nodes (the value is the node name).
LABEL = "kube-nudge.io/fake-kubelet"
#: How often a pod that could not start yet is tried again.
RETRY_SECONDS = 1.0
NODE_IP = "10.96.255.1"
CAPACITY = {"pods": "1000", "cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti"}
_NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_COUNTED = {
    "ConfigValid": "valid",
    "ConfigInvalid": "invalid",
    "CreateContainerConfigError": "config_error",
    "InitConfigInvalid": "init_invalid",
    "Error": "error",
}


def placement(node_name: str) -> JSON:
    """The pod-spec fragment that puts a workload's pods on ``node_name``'s fake kubelet:
    ``{**pod_spec, **placement(node)}`` (it sets nodeSelector and tolerations)."""
    return {
        "nodeSelector": {LABEL: node_name},
        "tolerations": [
            {"key": LABEL, "operator": "Equal", "value": node_name, "effect": "NoSchedule"}
        ],
    }


@dataclass
class PodVerdict:
    """What the fake kubelet made of one pod bound to its node."""

    namespace: str
    name: str
    uid: str
    started: bool
    """True once its containers run (then it is never evaluated again)."""
    ready: bool
    reason: str
    """``ConfigValid``, ``ConfigInvalid`` or, while not started,
    ``CreateContainerConfigError`` / ``InitConfigInvalid``."""
    attempts: int = 1


@dataclass
class _Resolved:
    """One container after env resolution: its env, or why it cannot be created."""

    name: str
    image: str
    env: dict[str, str] | None
    error: str | None = None
    valid: bool = False


class _ConfigError(Exception):
    """A container cannot be created: a non-optional source or key is missing."""


class FakeKubelet:
    """Plays the kubelet of the node ``node_name`` (created on enter, deleted on exit).

    ``valid(env)`` gets the resolved environment of each container (never logged) and says
    whether that container becomes ready. Observe with ``ready_pods(namespace)``,
    ``unready_pods(namespace)``, ``waiting_pods(namespace)``, ``verdicts`` and ``counts``
    (``valid``/``invalid``: pods started Ready/not Ready; ``config_error``/``init_invalid``:
    start attempts that left a pod Pending; ``deleted``: final deletes done)."""

    def __init__(
        self, kube: AdminClient, node_name: str, valid: Callable[[Mapping[str, str]], bool]
    ) -> None:
        self.kube = kube
        self.node_name = node_name
        self.valid = valid
        self.verdicts: dict[str, PodVerdict] = {}
        """Pods currently bound to the node, by uid."""
        self.counts: Counter[str] = Counter()
        self._lock = asyncio.Lock()
        self._deleting: set[str] = set()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._next_ip = 0

    # -- observability ---------------------------------------------------------------------

    def _names(self, namespace: str, keep: Callable[[PodVerdict], bool]) -> set[str]:
        return {v.name for v in self.verdicts.values() if v.namespace == namespace and keep(v)}

    def ready_pods(self, namespace: str) -> set[str]:
        """Names of pods in ``namespace`` started Ready (their config was valid)."""
        return self._names(namespace, lambda v: v.started and v.ready)

    def unready_pods(self, namespace: str) -> set[str]:
        """Names of pods in ``namespace`` running but never Ready (invalid config)."""
        return self._names(namespace, lambda v: v.started and not v.ready)

    def waiting_pods(self, namespace: str) -> set[str]:
        """Names of pods in ``namespace`` that could not start yet (retried)."""
        return self._names(namespace, lambda v: not v.started)

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKubelet:
        await self._create_node()
        self._task = asyncio.create_task(self._run(), name=f"fake-kubelet-{self.node_name}")
        synced = asyncio.create_task(self._synced.wait())
        await asyncio.wait({self._task, synced}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        synced.cancel()
        if not self._synced.is_set():
            await self.__aexit__(None, None, None)  # re-raises what stopped the task, if any
            raise TimeoutError(f"the fake kubelet of {self.node_name} did not list its pods")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        crashed: BaseException | None = None
        if self._task is not None:
            self._task.cancel()  # no effect if it already crashed
            await asyncio.wait({self._task})  # never raises what the task raised
            if not self._task.cancelled():
                crashed = self._task.exception()
        await self._cleanup()
        if crashed is None:
            return
        if exc is None:
            raise RuntimeError(f"the fake kubelet of {self.node_name} crashed") from crashed
        # The test failed (likely a timeout) because the kubelet died: say so in its report.
        exc.add_note(f"the fake kubelet of {self.node_name} had crashed: {crashed!r}")

    async def _create_node(self) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                # No kwok.x-k8s.io/node annotation: kwok leaves this node and its pods alone.
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    LABEL: self.node_name,
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                },
            },
            "spec": {"taints": [{"key": LABEL, "value": self.node_name, "effect": "NoSchedule"}]},
        }
        try:
            await self.kube.create(NODES.path(), body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            log.warning("node %s left over by an earlier run; recreating it", self.node_name)
            await self._cleanup()
            await self.kube.create(NODES.path(), body)
        now = _now()
        ready = {
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kube-nudge fake kubelet", "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }  # fmt: skip
        pressure = [
            {"type": kind, "status": "False", "reason": f"KubeletHasNo{kind}",
             "lastHeartbeatTime": now, "lastTransitionTime": now}
            for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
        ]  # fmt: skip
        status = {
            "conditions": [*pressure, ready],
            "addresses": [
                {"type": "InternalIP", "address": NODE_IP},
                {"type": "Hostname", "address": self.node_name},
            ],
            "capacity": CAPACITY,
            "allocatable": CAPACITY,
            "nodeInfo": {
                "architecture": "amd64", "operatingSystem": "linux",
                "kubeletVersion": "fake", "containerRuntimeVersion": "fake://0",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        }  # fmt: skip
        path = NODES.path(name=self.node_name)
        await self.kube.request(
            "PATCH", f"{path}/status", body={"status": status}, content_type=MERGE_PATCH
        )
        # The TaintNodesByCondition admission plugin adds a not-ready
        # NoSchedule taint on create; the node lifecycle controller lifts it once it sees
        # Ready. Wait for that, so pods created next are scheduled at once.
        async with asyncio.timeout(30):
            while True:
                node = await self.kube.get(path)
                taints = (node.get("spec") or {}).get("taints") or []
                if not any(t.get("key") == _NOT_READY_TAINT for t in taints):
                    break
                await asyncio.sleep(0.1)
        log.info("fake kubelet node %s is Ready", self.node_name)

    async def _cleanup(self) -> None:
        """Delete the node, then every pod bound to it (grace 0). In this order: pods
        deleted first are replaced by their ReplicaSet and bound to the node again."""
        with contextlib.suppress(ApiError):
            await self.kube.delete(NODES.path(name=self.node_name))
        params = {"fieldSelector": f"spec.nodeName={self.node_name}"}
        # Until a list comes back empty: the scheduler may still bind a pod it placed
        # before it saw the node go.
        async with asyncio.timeout(30):
            while True:
                found = await self.kube.get(PODS.path(), **params)
                if not found.get("items"):
                    break
                for pod in found["items"]:
                    await self._delete_pod(pod)

    # -- the kubelet's loops ---------------------------------------------------------------

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._watch_pods())
            group.create_task(self._retry_waiting())

    async def _watch_pods(self) -> None:
        """List, then watch from the list's version; re-list on 410 or a broken stream."""
        params = {"fieldSelector": f"spec.nodeName={self.node_name}"}
        version = ""
        while True:
            try:
                if not version:
                    version = await self._relist(params)
                async for event in self.kube.watch(
                    PODS.path(), params, resource_version=version, timeout_seconds=60
                ):
                    pod = event.get("object") or {}
                    if event.get("type") != "BOOKMARK":
                        await self._handle(str(event.get("type")), pod)
                    version = str((pod.get("metadata") or {}).get("resourceVersion") or version)
            except ApiError as exc:
                log.info("fake kubelet %s: watch ended (%s); re-listing", self.node_name, exc)
                version = ""
                if not exc.gone:
                    await asyncio.sleep(0.5)  # back-off before asking the server again
            except (TimeoutError, httpx.HTTPError, TransportError) as exc:
                log.info("fake kubelet %s: watch broke (%r); re-listing", self.node_name, exc)
                version = ""

    async def _relist(self, params: Mapping[str, str]) -> str:
        version, seen = "", set()
        async for items, page_version in self.kube.list_pages(PODS.path(), params):
            version = page_version
            for pod in items:
                seen.add(pod["metadata"]["uid"])
                await self._handle("ADDED", pod)
        for uid in set(self.verdicts) - seen:  # deleted while we were not watching
            self.verdicts.pop(uid, None)
        self._synced.set()
        return version

    async def _retry_waiting(self) -> None:
        """A kubelet's periodic sync for pods that could not start: try them again."""
        while True:
            await asyncio.sleep(RETRY_SECONDS)  # the retry period itself, not a test wait
            for uid, verdict in list(self.verdicts.items()):
                if verdict.started:
                    continue
                try:
                    pod = await self.kube.get(PODS.path(verdict.namespace, verdict.name))
                except ApiError as exc:
                    if exc.not_found:
                        self.verdicts.pop(uid, None)
                    continue
                metadata = pod["metadata"]
                if metadata["uid"] != uid:  # replaced by a pod of the same name
                    self.verdicts.pop(uid, None)
                elif not metadata.get("deletionTimestamp"):
                    await self._start(pod)

    async def _handle(self, kind: str, pod: JSON) -> None:
        metadata = pod.get("metadata") or {}
        uid = str(metadata.get("uid", ""))
        if kind == "DELETED":
            self.verdicts.pop(uid, None)
            self._deleting.discard(uid)
            return
        if metadata.get("deletionTimestamp"):
            if uid not in self._deleting:
                self._deleting.add(uid)
                await self._delete_pod(pod)
            return
        if uid in self.verdicts:
            return  # started (never re-read) or waiting (the retry loop owns it)
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            return  # not started by this kubelet (a node name reused in a crashed run)
        await self._start(pod)

    async def _delete_pod(self, pod: JSON) -> None:
        metadata = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": metadata["uid"]},
        }
        try:
            await self.kube.request(
                "DELETE", PODS.path(metadata["namespace"], metadata["name"]), body=body
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                raise
            return
        self.counts["deleted"] += 1
        log.debug("fake kubelet %s: deleted %s/%s", self.node_name, metadata["namespace"],
                  metadata["name"])  # fmt: skip

    # -- starting a pod --------------------------------------------------------------------

    async def _start(self, pod: JSON) -> None:
        async with self._lock:
            metadata = pod["metadata"]
            uid, namespace, name = metadata["uid"], metadata["namespace"], metadata["name"]
            before = self.verdicts.get(uid)
            if before is not None and before.started:
                return
            status = dict(pod.get("status") or {})
            if not status.get("podIP"):
                self._next_ip += 1
                high, low = divmod(self._next_ip, 254)
                status["podIP"] = f"10.250.{high % 256}.{low + 1}"
            pod = {**pod, "status": status}
            sources: dict[tuple[str, str], JSON | None] = {}
            spec = pod.get("spec") or {}
            init = [await self._resolve(pod, c, sources) for c in spec.get("initContainers") or []]
            main = [await self._resolve(pod, c, sources) for c in spec.get("containers") or []]
            attempts = before.attempts + 1 if before is not None else 1
            new_status, verdict = self._status(pod, init, main, attempts)
            body = {"metadata": {"uid": uid}, "status": new_status}
            try:
                await self.kube.request(
                    "PATCH", PODS.path(namespace, name, "status"),
                    body=body, content_type=MERGE_PATCH,
                )  # fmt: skip
            except ApiError as exc:
                if exc.not_found:
                    return
                log.warning("fake kubelet %s: status of %s/%s not written: %s",
                            self.node_name, namespace, name, exc)  # fmt: skip
                if before is None:  # let the retry loop try again
                    self.verdicts[uid] = PodVerdict(namespace, name, uid, False, False, "Error")
                return
            self.verdicts[uid] = verdict
            self.counts[_COUNTED[verdict.reason]] += 1
            log.info("fake kubelet %s: %s/%s %s (%s)", self.node_name, namespace, name,
                     "started" if verdict.started else "waiting", verdict.reason)  # fmt: skip

    async def _resolve(
        self, pod: JSON, container: JSON, sources: dict[tuple[str, str], JSON | None]
    ) -> _Resolved:
        name, image = str(container.get("name", "")), str(container.get("image", ""))
        try:
            env = await self._env(pod, container, sources)
        except _ConfigError as exc:
            return _Resolved(name, image, None, str(exc))
        return _Resolved(name, image, env, None, bool(self.valid(env)))

    async def _source(
        self, namespace: str, kind: str, name: str, sources: dict[tuple[str, str], JSON | None]
    ) -> dict[str, str] | None:
        """The data of a ConfigMap or Secret as strings, or None when it doesn't exist;
        read once per start attempt, as the kubelet reads them at container creation."""
        if (kind, name) not in sources:
            resource = CONFIGMAPS if kind == "configmap" else SECRETS
            try:
                sources[kind, name] = await self.kube.get(resource.path(namespace, name))
            except ApiError as exc:
                if not exc.not_found:
                    raise _ConfigError(f"{kind} {name!r}: {exc.status} {exc.reason}") from None
                sources[kind, name] = None
        obj = sources[kind, name]
        if obj is None:
            return None
        data = obj.get("data") or {}
        if kind == "secret":
            return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}
        return {str(k): str(v) for k, v in data.items()}  # env never reads binaryData

    async def _env(
        self, pod: JSON, container: JSON, sources: dict[tuple[str, str], JSON | None]
    ) -> dict[str, str]:
        """The container's environment as the kubelet builds it: envFrom first, then env
        in order (later entries win), ``$(VAR)`` expanded in literal values only."""
        namespace = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            kind, ref = (
                ("configmap", source["configMapRef"])
                if source.get("configMapRef")
                else ("secret", source.get("secretRef") or {})
            )
            data = await self._source(namespace, kind, str(ref.get("name", "")), sources)
            if data is None:
                if ref.get("optional"):
                    continue
                raise _ConfigError(f'{kind} "{ref.get("name")}" not found')
            prefix = str(source.get("prefix") or "")
            for key, value in data.items():
                if _env_name_ok(prefix + key):  # the kubelet skips invalid names
                    env[prefix + key] = value
        for var in container.get("env") or []:
            name = str(var["name"])
            value_from = var.get("valueFrom")
            if value_from is None:
                env[name] = _expand(str(var.get("value") or ""), env)
                continue
            for field, kind in (("configMapKeyRef", "configmap"), ("secretKeyRef", "secret")):
                ref = value_from.get(field)
                if ref is None:
                    continue
                data = await self._source(namespace, kind, str(ref.get("name", "")), sources)
                key = str(ref.get("key", ""))
                if data is None or key not in data:
                    if ref.get("optional"):
                        break
                    source = f'{kind} "{ref.get("name")}"'
                    if data is None:
                        raise _ConfigError(f"{source} not found")
                    raise _ConfigError(f"couldn't find key {key} in {source}")
                env[name] = data[key]
            if "fieldRef" in value_from:
                found = _field(pod, str(value_from["fieldRef"].get("fieldPath", "")))
                if found is not None:
                    env[name] = found
        return env

    def _status(
        self, pod: JSON, init: list[_Resolved], main: list[_Resolved], attempts: int
    ) -> tuple[JSON, PodVerdict]:
        """The pod status after this start attempt, and the verdict it records."""
        metadata, old = pod["metadata"], pod.get("status") or {}
        now = _now()
        blocked: str | None = None  # why the init containers did not all complete
        init_statuses = []
        for c in init:
            if blocked is not None:
                init_statuses.append(_container_status(c, _waiting("PodInitializing"), 0))
            elif c.error is not None:
                blocked = "CreateContainerConfigError"
                init_statuses.append(_container_status(c, _waiting(blocked, c.error), 0))
            elif not c.valid:
                blocked = "InitConfigInvalid"
                crashed = _terminated(1, "Error", now)
                state = _waiting("CrashLoopBackOff", "the config this container read is invalid")
                init_statuses.append(_container_status(c, state, attempts - 1, last=crashed))
            else:
                init_statuses.append(_container_status(c, _terminated(0, "Completed", now), 0))
        init_blocked = blocked is not None
        errors = [c for c in main if c.error is not None]
        if blocked is not None:
            statuses = [_container_status(c, _waiting("PodInitializing"), 0) for c in main]
        elif errors:
            blocked = "CreateContainerConfigError"
            statuses = [
                _container_status(c, _waiting(blocked, c.error), 0)
                if c.error is not None
                else _container_status(c, _waiting("ContainerCreating"), 0)
                for c in main
            ]
        else:
            statuses = [
                _container_status(c, {"running": {"startedAt": now}}, 0, ready=c.valid)
                for c in main
            ]
        unready = [c.name for c in main if blocked is not None or not c.valid]
        ready = not unready
        reason = "ConfigValid" if ready else blocked or "ConfigInvalid"
        invalid = blocked == "InitConfigInvalid" or (blocked is None and not ready)
        not_ready_reason = "ConfigInvalid" if invalid else "ContainersNotReady"
        message = f"containers with unready status: [{' '.join(unready)}]"
        conditions = [
            _condition(old, "PodScheduled", True, now),
            _condition(old, "Initialized", not init_blocked, now,
                       "ConfigInvalid" if blocked == "InitConfigInvalid" else
                       "ContainersNotInitialized", "containers with incomplete status"),
            _condition(old, "ContainersReady", ready, now, not_ready_reason, message),
            _condition(old, "Ready", ready, now, not_ready_reason, message),
        ]  # fmt: skip
        status: JSON = {
            "phase": "Pending" if blocked is not None else "Running",
            "hostIP": NODE_IP,
            "hostIPs": [{"ip": NODE_IP}],
            "podIP": old["podIP"],
            "podIPs": [{"ip": old["podIP"]}],
            "startTime": old.get("startTime") or now,
            "qosClass": old.get("qosClass") or "BestEffort",
            "conditions": conditions,
            "containerStatuses": statuses,
        }
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        verdict = PodVerdict(
            metadata["namespace"], metadata["name"], metadata["uid"],
            blocked is None, ready, reason, attempts,
        )  # fmt: skip
        return status, verdict


def _container_status(
    c: _Resolved, state: JSON, restarts: int, *, ready: bool = False, last: JSON | None = None
) -> JSON:
    status: JSON = {
        "name": c.name,
        "image": c.image,
        "imageID": f"fake://{c.image}",
        "ready": ready,
        "started": "running" in state,
        "restartCount": max(restarts, 0),
        "state": state,
        "lastState": last or {},
    }
    if "waiting" not in state:
        status["containerID"] = f"fake://{c.name}"
    return status


def _waiting(reason: str, message: str | None = None) -> JSON:
    return {"waiting": {"reason": reason, **({"message": message} if message else {})}}


def _terminated(code: int, reason: str, now: str) -> JSON:
    return {"terminated": {"exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now}}


def _condition(
    old: JSON, kind: str, true: bool, now: str, reason: str = "", message: str = ""
) -> JSON:
    """A pod condition, keeping its transition time when its status did not change."""
    status = "True" if true else "False"
    before: JSON = next((c for c in old.get("conditions") or [] if c.get("type") == kind), {})
    changed = before.get("status") != status
    condition: JSON = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": now if changed else before.get("lastTransitionTime") or now,
    }
    if not true:
        condition.update(reason=reason, message=message)
    return condition


def _env_name_ok(name: str) -> bool:
    """Relaxed env var names (GA since 1.34): printable ASCII, no '='."""
    return bool(name) and name.isascii() and name.isprintable() and "=" not in name


def _expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known names are replaced, ``$$`` is ``$``,
    anything else (unknown names, an unclosed ``$(``) stays as written."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "$" and i + 1 < len(value):
            if value[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            end = value.find(")", i + 2) if value[i + 1] == "(" else -1
            if end != -1:
                out.append(env.get(value[i + 2 : end], value[i : end + 1]))
                i = end + 1
                continue
        out.append(value[i])
        i += 1
    return "".join(out)


def _field(pod: JSON, path: str) -> str | None:
    """The downward-API fieldRef paths a kubelet resolves for env (None: unsupported)."""
    metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": metadata.get("name"),
        "metadata.namespace": metadata.get("namespace"),
        "metadata.uid": metadata.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": NODE_IP,
        "status.hostIPs": NODE_IP,
        "status.podIP": status.get("podIP"),
        "status.podIPs": status.get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, mapping in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return str((metadata.get(mapping) or {}).get(path[len(prefix) + 2 : -2], ""))
    return None


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
