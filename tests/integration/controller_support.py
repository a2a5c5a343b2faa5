"""Running the controller in-process against the session cluster, and observing it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx2 as httpx

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.pods import pod_started
from kube_nudge.kube.resources import CONFIGMAPS, CORE_EVENTS, PODS, Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, WorkloadSpec
from kube_nudge.model import (
    CONFIG_HASH,
    template_annotation,
)
from kube_nudge.model.projection import data_changed_at
from kube_nudge.notifications.model import Notification
from kube_nudge.reporting.hmackey import load_or_create_key
from kube_nudge.runtime.manager import Manager
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.prometheus import PrometheusAccess
from kube_nudge.strategies.registry import product_defaults
from kube_nudge_dev import confighash
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import apply_crd
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.waiting import until, wait_for_objects
from tests.integration.sabotage import replica_command

log = logging.getLogger("kube_nudge.testing.support")

HMAC_SECRET = "kube-nudge-hmac-key"
CONTROLLER_AGENT = "kube-nudge/"
#: Log files of every `kube-nudge run` process the session started (checked for leaks).
REPLICA_LOGS: list[Path] = []
#: The output of every CLI command run through `kube_nudge_cli` or `cli_as` (checked too).
CLI_OUTPUTS: list[str] = []


@dataclass
class Running:
    """A controller running in this event loop, with what tests need to observe it."""

    controller: Controller
    client: KubeClient
    hmac_key: bytes
    metrics: Metrics


@contextlib.asynccontextmanager
async def running_controller(
    cluster: LocalCluster,
    namespace: str,
    *,
    debounce: float | None = 0.0,
    max_rollouts: int = 100,
    window: float = 60.0,
    kinds: tuple[WorkloadKind, ...] = BUILTIN_KINDS,
    pending_kinds: tuple[WorkloadSpec, ...] = (),
    compat: bool = False,
    also_watch: tuple[str, ...] = (),
    kubeconfig: Path | None = None,
    watch_inactivity: float = 90.0,
    max_concurrent_rollouts: int | None = None,
    notify: Callable[[Notification], None] | None = None,
    csi_secrets: bool = False,
    prometheus: PrometheusAccess | None = None,
    analysis_namespace_label: str | None = None,
    argo_analysis_templates: bool = False,
) -> AsyncIterator[Running]:
    """Start a controller scoped to ``namespace``; stop it on exit. ``kubeconfig`` points
    it elsewhere than the cluster's own (e.g. through a fault-injecting proxy)."""
    client = KubeClient.from_config(kubeconfig or cluster.kubeconfig)
    metrics = Metrics()
    key = await load_or_create_key(client, namespace, HMAC_SECRET)
    options = replace(
        ControllerOptions(),
        namespaces=(namespace, *also_watch),
        kinds=kinds,
        pending_kinds=pending_kinds,
        defaults=product_defaults(
            debounce=debounce,
            max_rollouts=max_rollouts,
            rollout_window=window,
            compat=compat,
            csi_secrets=csi_secrets,
        ),
        workers=8,
        watch_inactivity=watch_inactivity,
        max_concurrent_rollouts=max_concurrent_rollouts,
        prometheus=prometheus,
        analysis_namespace_label=analysis_namespace_label,
        argo_analysis_templates=argo_analysis_templates,
    )
    controller = Controller(
        client, options, hmac_key=key, metrics=metrics, recorder=EventRecorder(client),
        notify=notify,
    )  # fmt: skip
    # No elector: this replica leads from the start, as `kube-nudge run` without
    # --leader-elect.
    task = asyncio.create_task(Manager(controller.runnables).run())
    try:
        await eventually(lambda: controller.ready, timeout=30)
        await controller.settled(timeout=30)
        yield Running(controller, client, key, metrics)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.aclose()


@contextlib.asynccontextmanager
async def background(work: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``work`` as a task while the block runs; cancel it (and wait for it) after."""
    task = asyncio.create_task(work)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def eventually(condition: Callable[[], bool], *, timeout: float) -> None:
    """Wait until an in-memory condition holds (checked every 10 ms), or TimeoutError."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def audit_entries(cluster: LocalCluster, namespace: str) -> Iterator[dict[str, Any]]:
    """Completed requests of kube-nudge about objects in ``namespace``, from the API
    server's audit log."""
    with Path(cluster.audit_log).open() as log:
        for line in log:
            if not line.endswith("\n"):
                break  # another client's entry still being written; ours are complete
            entry = json.loads(line)
            if (
                entry.get("stage") == "ResponseComplete"
                and entry.get("userAgent", "").startswith(CONTROLLER_AGENT)
                and (entry.get("objectRef") or {}).get("namespace") == namespace
            ):
                yield entry


def controller_writes(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    """Audit entries of writes by kube-nudge to workloads in ``namespace``."""
    return [
        entry
        for entry in audit_entries(cluster, namespace)
        if (entry.get("objectRef") or {}).get("resource") not in ("secrets", "events")
        and entry.get("verb") in ("patch", "update", "create")
    ]


async def expected_hash(
    kube: KubeClient,
    kind: WorkloadKind,
    obj: dict[str, Any],
    key: bytes,
    *,
    csi_secrets: bool = False,
) -> str:
    """The hash computed from the sources as they are in the API right now, by the
    independent oracle (`kube_nudge_dev.confighash`: the documented hash, none of the
    reconciler's rules); ``csi_secrets`` as the controller's ``--csi-secrets``."""
    return await confighash.expected_hash(kube, kind.template_path, obj, key,
                                          csi_secrets=csi_secrets)  # fmt: skip


def template_hash(obj: dict[str, Any], kind: WorkloadKind) -> str | None:
    """The config hash currently on the workload's pod template."""
    return template_annotation(obj, kind.template_path, CONFIG_HASH)


async def install_crd(
    kube: KubeClient,
    resource: Resource,
    singular: str,
    subresources: dict[str, Any] | None = None,
    schema: dict[str, Any] | None = None,
) -> None:
    """Install a namespaced CRD serving ``resource`` (with ``schema``, else schemaless; with
    ``subresources`` such as ``{"status": {}}``) and wait until it is Established; a CRD left
    by an earlier test of this session is reused."""
    schema = schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    await apply_crd(kube, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{resource.plural}.{resource.group}"},
        "spec": {
            "group": resource.group, "scope": "Namespaced",
            "names": {"plural": resource.plural, "singular": singular, "kind": resource.kind},
            "versions": [{"name": resource.version, "served": True, "storage": True,
                          "subresources": subresources or {},
                          "schema": {"openAPIV3Schema": schema}}],
        },
    })  # fmt: skip


async def events(kube: KubeClient, namespace: str, reason: str) -> list[dict[str, Any]]:
    """Events with ``reason`` in ``namespace``."""
    found = await kube.get(CORE_EVENTS.path(namespace), fieldSelector=f"reason={reason}")
    return list(found.get("items", []))


async def posted(
    kube: KubeClient, namespace: str, reason: str, timeout: float = 30
) -> list[dict[str, Any]]:
    """The Events with ``reason`` in ``namespace`` once there is one (the controller posts
    them in the background, after the write they are about)."""
    found: list[dict[str, Any]] = []

    async def any_posted() -> bool:
        nonlocal found
        found = await events(kube, namespace, reason)
        return bool(found)

    await until(any_posted, timeout)
    return found


class Replica:
    """One `kube-nudge run` process and its probe port."""

    def __init__(self, proc: asyncio.subprocess.Process, port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    async def get(self, path: str) -> httpx.Response | None:
        try:
            async with httpx.AsyncClient() as client:
                return await client.get(f"http://127.0.0.1:{self.port}{path}", timeout=2)
        except httpx.HTTPError:
            return None

    async def leading(self) -> bool:
        response = await self.get("/metrics")
        return response is not None and "\nkube_nudge_leader 1.0" in response.text


#: ``kube-nudge run`` as the fault scenarios run their replicas: leader election with a
#: short lease (a takeover within seconds), no debounce.
FAST_FAILOVER = (
    "--leader-elect", "--debounce=0",
    "--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms",
)  # fmt: skip


async def start_replica(
    kubeconfig: Path,
    namespace: str | None,
    log: Path,
    *,
    state_namespace: str | None = None,
    extra_args: tuple[str, ...] = ("--leader-elect", "--debounce=0"),
) -> Replica:
    """Start `kube-nudge run` (by default with leader election) watching ``namespace``
    (None: every namespace; then ``state_namespace`` is required)."""
    port = free_port()
    REPLICA_LOGS.append(log)
    state = state_namespace or namespace
    assert state is not None, "watching every namespace needs a state_namespace"
    scope = [f"--namespace={namespace}"] if namespace is not None else []
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            *replica_command(), "run", f"--kubeconfig={kubeconfig}",
            *scope, f"--state-namespace={state}",
            f"--metrics-addr=127.0.0.1:{port}", "--log-format=json", *extra_args,
            stdout=sink, stderr=sink,
        )  # fmt: skip
    return Replica(proc, port, log)


async def kube_nudge_cli(cluster: LocalCluster, namespace: str, *args: str) -> tuple[int, str]:
    """Run ``kube-nudge ARGS`` against the cluster in ``namespace``: (exit code, stdout);
    a failure's stderr is in the assertion message of the caller's check of the code."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_nudge", *args, f"--kubeconfig={cluster.kubeconfig}",
        f"--namespace={namespace}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    CLI_OUTPUTS.append(out.decode() + err.decode())
    return proc.returncode, CLI_OUTPUTS[-1]


async def cli_as(
    kubeconfig: Path,
    namespace: str,
    command: str,
    *args: str,
    state: str | None = None,
    timeout: float = 120,
) -> tuple[int, str, str]:
    """``kube-nudge COMMAND`` as the user of ``kubeconfig`` in ``namespace``, the key Secret
    in ``state`` (default: ``namespace``), then ``args`` (so a flag there wins): (exit code,
    stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kube_nudge",
        command,
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        f"--state-namespace={state or namespace}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    CLI_OUTPUTS.append(out.decode() + err.decode())
    return proc.returncode, out.decode(), err.decode()


async def wait_cli(
    kubeconfig: Path, namespace: str, *args: str, state: str | None = None
) -> tuple[int, str, str]:
    """``kube-nudge wait``; the key Secret in ``state`` (default: ``namespace``)."""
    return await cli_as(kubeconfig, namespace, "wait", *args, state=state)


async def change_after_pods_started(
    kube: AdminClient, namespace: str, level: str = "debug", configmap: str = "app"
) -> None:
    """Once every live pod of ``namespace`` started, ConfigMap ``configmap``'s LEVEL becomes
    ``level`` (in a later second than the last start): those pods run stale config. A start
    is what ``kube-nudge status`` reads as one (``pod_started``: the containers' start)."""

    def starts(found: dict[str, Any]) -> list[float]:
        live = [p for p in found.values() if not p["metadata"].get("deletionTimestamp")]
        stamps = [pod_started(p) for p in live]
        return [s for s in stamps if s is not None] if None not in stamps else []

    pods = await wait_for_objects(
        kube, PODS.path(namespace), lambda found: bool(starts(found)), timeout=30
    )
    started = max(starts(pods))
    # API timestamps have whole seconds: the change must land in a later second than the start.
    await eventually(lambda: time.time() >= started + 1.0, timeout=5)
    changed = await kube.merge_patch(
        CONFIGMAPS.path(namespace, configmap), {"data": {"LEVEL": level}}
    )
    await _log_pods_not_before(kube, namespace, changed)


def managed_fields(source: dict[str, Any]) -> list[dict[str, Any]]:
    """``source``'s managedFields entries."""
    return list(source["metadata"].get("managedFields") or ())


async def _log_pods_not_before(kube: KubeClient, namespace: str, source: dict[str, Any]) -> None:
    """Log each live pod that did not start before ``source``'s last data change: a pod the
    caller expects to be stale but a status would not count so (seen once in a full run;
    the log, captured with a failure, says which pod and when)."""
    changed_at = data_changed_at(source["metadata"])
    found = await kube.get(PODS.path(namespace))
    for pod in found.get("items") or ():
        metadata, status = pod["metadata"], pod.get("status") or {}
        if metadata.get("deletionTimestamp"):
            continue
        read_at = pod_started(pod)
        if changed_at is None or read_at is None or read_at >= changed_at:
            log.warning(
                "pod %s (created %s, startTime %s, containers %s) did not start before "
                "the data change at %s (managedFields %s)",
                metadata["name"], metadata.get("creationTimestamp"), status.get("startTime"),
                [c.get("state") for c in status.get("containerStatuses") or ()], changed_at,
                [(m.get("manager"), m.get("time")) for m in managed_fields(source)],
            )  # fmt: skip


async def leader_of(replicas: list[Replica]) -> Replica:
    leading: list[Replica] = []

    async def one() -> bool:
        leading[:] = [r for r in replicas if r.proc.returncode is None and await r.leading()]
        return len(leading) == 1

    await until(one, 30)
    return leading[0]
