"""``make demo`` / ``kube-nudge-dev demo``: kube-nudge rolling a Deployment when the config
it consumes changes.

Starts the local control plane, runs ``kube-nudge run`` against it as a user would, and
shows: opting in restarts nothing; a change to a key the pods consume rolls them once
(new ReplicaSet, Event saying which key); a change to a key nobody consumes rolls nothing.
Each of these is read back from the cluster (the Deployment's pod template, its ReplicaSets,
its pods' uids, before and after) before it is printed; one that is not true stops the demo
with a FAILED line and exit code 1.
Where this machine can run the real node (root, containerd, cgroups: ``node.py``), the
Deployment's pods are real containers and the demo reads the new config back from a new
pod's log; elsewhere it runs on fake nodes and says what the real node lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import subprocess  # nosec B404 # the demo runs kube-nudge as a child process
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    CORE_EVENTS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    REPLICASETS,
)
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH
from kube_nudge.model.annotations import ENABLED
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.node import NODE_LABEL, TAINT_KEY, missing_requirements
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects

NAMESPACE = "demo"
HASH = CONFIG_HASH
JSON = dict[str, Any]


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


#: The real container: prints the LOG_LEVEL it started with, then idles.
_APP = "import os, time\nprint('LOG_LEVEL=' + os.environ['LOG_LEVEL'], flush=True)\ntime.sleep(1e9)"


def _deployment(image: str | None) -> dict[str, Any]:
    """Deployment web, reading LOG_LEVEL from web-config; on the real node when ``image``."""
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {ENABLED: "true"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "name": "web", "image": "registry.invalid/web:1",
                        "env": [{"name": "LOG_LEVEL", "valueFrom": {"configMapKeyRef": {
                            "name": "web-config", "key": "LOG_LEVEL"}}}],
                    }],
                },
            },
        },
    }  # fmt: skip
    if image is not None:
        spec = deployment["spec"]["template"]["spec"]
        spec["containers"][0].update(image=image, imagePullPolicy="Never",
                                     command=["python", "-c", _APP])  # fmt: skip
        spec["nodeSelector"] = {NODE_LABEL: "real"}
        spec["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
        spec["terminationGracePeriodSeconds"] = 1
    return deployment


def _pod_log(cluster: LocalCluster, pod: str) -> str:
    kubectl = find_binary("kubectl")
    if kubectl is None:
        return "(kubectl is not built)"
    result = subprocess.run(  # nosec B603 # the pinned kubectl, fixed argv, no shell
        [str(kubectl), f"--kubeconfig={cluster.kubeconfig}", "logs", "-n", NAMESPACE, pod],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    return result.stdout.strip() or result.stderr.strip()


@contextlib.contextmanager
def _controller(cluster: LocalCluster, port: int) -> Iterator[subprocess.Popen[bytes]]:
    log = cluster.logs / "kube-nudge.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(  # nosec B603 # sys.executable -m kube_nudge, no shell
            [sys.executable, "-m", "kube_nudge", "run", f"--kubeconfig={cluster.kubeconfig}",
             f"--metrics-addr=127.0.0.1:{port}", f"--state-namespace={NAMESPACE}"],
            stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(  # nosec B310 # fixed http URL on loopback
        f"http://127.0.0.1:{port}/metrics", timeout=2
    ) as response:
        text = response.read().decode()
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - polls another process's HTTP endpoint
            await asyncio.sleep(0.05)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(  # nosec B310 # fixed http URL on loopback
            f"http://127.0.0.1:{port}/readyz", timeout=1
        ) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class DemoFailed(RuntimeError):
    """Something the demo was about to print is not what the cluster shows."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """What a restart or a rollout of deployment/web changes: its pod template (a digest of
    it, and the config hash on it), its ReplicaSets and its live pods. Not its generation: a
    Deployment's also counts edits of its annotations, which adopting writes."""

    template: str
    template_hash: str | None
    replicasets: frozenset[str]
    pods: frozenset[str]  # the uids of the pods not being deleted

    @classmethod
    def of(cls, deployment: JSON, replicasets: list[JSON], pods: list[JSON]) -> Fleet:
        """The fleet as read from the Deployment and its ReplicaSets' and pods' lists."""
        template = deployment["spec"]["template"]
        canonical = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
        return cls(
            template=hashlib.sha256(canonical).hexdigest(),
            template_hash=(template["metadata"].get("annotations") or {}).get(HASH),
            replicasets=frozenset(rs["metadata"]["name"] for rs in replicasets),
            pods=frozenset(pod["metadata"]["uid"] for pod in pods
                           if not pod["metadata"].get("deletionTimestamp")),
        )  # fmt: skip

    def changes(self, after: Fleet) -> list[str]:
        """What ``after`` changed, one phrase each; [] when nothing restarted or rolled."""
        found = []
        if after.template != self.template:
            found.append(f"pod template edited (config hash {self.template_hash} -> "
                         f"{after.template_hash})")  # fmt: skip
        if after.replicasets != self.replicasets:
            found.append(f"replicasets {sorted(self.replicasets)} -> {sorted(after.replicasets)}")
        if after.pods != self.pods:
            found.append(f"{len(self.pods - after.pods)} pod(s) replaced")
        return found


def confirm(claim: str, ok: bool, detail: str = "") -> None:
    """Raise DemoFailed unless ``ok``: the demo prints ``claim`` only once it is checked."""
    if not ok:
        raise DemoFailed(f"{claim}: not true{f' ({detail})' if detail else ''}")


def unchanged(claim: str, before: Fleet, after: Fleet) -> None:
    """Raise DemoFailed naming what changed, unless nothing restarted or rolled."""
    changed = before.changes(after)
    confirm(claim, not changed, "; ".join(changed))


async def _fleet(kube: KubeClient) -> Fleet:
    deployment = await kube.get(DEPLOYMENTS.path(NAMESPACE, "web"))
    replicasets = await kube.get(REPLICASETS.path(NAMESPACE), labelSelector="app=web")
    pods = await kube.get(PODS.path(NAMESPACE), labelSelector="app=web")
    return Fleet.of(deployment, replicasets["items"], pods["items"])


async def _reconciles(port: int, more_than: float) -> float:
    """Wait until kube-nudge has finished more passes than ``more_than``; their count."""
    name = "kube_nudge_reconcile_duration_seconds_count"
    await _until(lambda: _metric(port, name) > more_than, 30)
    return _metric(port, name)


async def _adopt(kube: KubeClient, port: int, before: Fleet) -> None:
    """kube-nudge, started since ``before`` was read, adopts deployment/web: its pods are
    not restarted."""
    adopted = await wait_for_object(
        kube, DEPLOYMENTS.path(NAMESPACE), "web",
        lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=60,
    )  # fmt: skip
    await _reconciles(port, 0)  # the adopting pass is over, its writes made
    unchanged("opting in restarted nothing", before, await _fleet(kube))
    baseline = adopted["metadata"]["annotations"][BASELINE_HASH]
    _say(f"kube-nudge adopted deployment/web (baseline {baseline}); pods not restarted")


async def _roll(cluster: LocalCluster, kube: AdminClient, port: int, image: str | None) -> None:
    """Change a consumed key: one rollout, every pod replaced, an Event naming the key."""
    before, started = await _fleet(kube), time.monotonic()
    await kube.merge_patch(
        CONFIGMAPS.path(NAMESPACE, "web-config"), {"data": {"LOG_LEVEL": "debug"}}
    )
    _say("changed LOG_LEVEL=debug in configmap/web-config")
    rolled = await wait_for_object(
        kube, DEPLOYMENTS.path(NAMESPACE), "web",
        lambda o: HASH in o["spec"]["template"]["metadata"].get("annotations", {}), timeout=60,
    )  # fmt: skip
    nudged = time.monotonic() - started
    await wait_for_object(
        kube, DEPLOYMENTS.path(NAMESPACE), "web", deployment_complete, timeout=120
    )
    after = await _fleet(kube)
    new = after.replicasets - before.replicasets
    confirm("one rollout", len(new) == 1 and before.replicasets <= after.replicasets,
            f"replicasets {sorted(before.replicasets)} -> {sorted(after.replicasets)}")  # fmt: skip
    confirm("every pod replaced", not before.pods & after.pods, "some pods kept")
    events = await wait_for_objects(kube, CORE_EVENTS.path(NAMESPACE), bool, timeout=30,
                                    params={"fieldSelector": "reason=Rolling"})  # fmt: skip
    _say(f"pod template nudged {nudged:.1f} s later (debounce window included): "
         f"{rolled['spec']['template']['metadata']['annotations'][HASH]}")  # fmt: skip
    _say(f"Event on deployment/web: {next(iter(events.values()))['message']}")
    _say(f"rollout complete: one new replicaset {''.join(new)}, every pod replaced")
    if image is not None:
        pods = await kube.get(PODS.path(NAMESPACE), labelSelector="app=web")
        live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        newest = max(live, key=lambda p: p["metadata"]["creationTimestamp"])
        name = newest["metadata"]["name"]
        _say(f"pod {name} (a real container) started with: {_pod_log(cluster, name)}")


async def _unused(kube: AdminClient, port: int) -> None:
    """Change a key no pod consumes: kube-nudge looks, and rolls nothing."""
    before = await _fleet(kube)
    reconciles = _metric(port, "kube_nudge_reconcile_duration_seconds_count")
    await kube.merge_patch(CONFIGMAPS.path(NAMESPACE, "web-config"), {"data": {"UNUSED": "b"}})
    await _reconciles(port, reconciles)
    unchanged("a change nobody consumes rolled nothing", before, await _fleet(kube))
    _say(f"changed UNUSED (consumed by no pod): reconciled, {len(before.replicasets)} "
         "replicasets, pods not restarted, no rollout")  # fmt: skip


async def _run(cluster: LocalCluster, kube: AdminClient, image: str | None) -> None:
    await kube.create(NAMESPACES.path(), {"metadata": {"name": NAMESPACE}})
    config = {"metadata": {"name": "web-config"}, "data": {"LOG_LEVEL": "info", "UNUSED": "a"}}
    await kube.create(CONFIGMAPS.path(NAMESPACE), config)
    await kube.create(DEPLOYMENTS.path(NAMESPACE), _deployment(image))
    await wait_for_object(
        kube, DEPLOYMENTS.path(NAMESPACE), "web", deployment_complete, timeout=120
    )
    where = "real containers on the real node" if image else "pods on fake nodes"
    _say(f"deployment/web is Available with 2 ready {where}, reading LOG_LEVEL from "
         "configmap/web-config")  # fmt: skip

    port, before = free_port(), await _fleet(kube)
    with _controller(cluster, port):
        await _until(lambda: _ready(port), 60)
        await _adopt(kube, port, before)
        await _roll(cluster, kube, port, image)
        await _unused(kube, port)
        nudges = _metric(port, 'kube_nudge_nudges_total{kind="Deployment"}')
        confirm("one nudge in all", nudges == 1, f"kube_nudge_nudges_total {nudges:g}")
        _say(f'metrics: kube_nudge_nudges_total{{kind="Deployment"}} = {nudges:.0f}')


def main() -> int:
    """Run the demo; exit non-zero if any step fails."""
    _say("starting the local control plane (the first run builds it: about 10 minutes)")
    missing = missing_requirements()
    if missing:
        _say(f"no real node on this machine (it lacks {', '.join(missing)}): fake nodes only")
    with LocalCluster() as cluster:
        _say(f"cluster ready in {cluster.startup_seconds:.1f} s")
        image = None
        if not missing:
            from kube_nudge_dev.image import build_image  # podman: only with a real node

            built = build_image(Path.cwd())
            started = time.monotonic()
            cluster.add_real_node((built.archive,))
            image = built.ref
            _say(f"real node Ready in {time.monotonic() - started:.1f} s with {image} loaded")

        async def go() -> None:
            kube = AdminClient.from_config(cluster.kubeconfig, user_agent="kube-nudge-demo")
            try:
                await _run(cluster, kube, image)
            finally:
                await kube.aclose()

        try:
            asyncio.run(go())
        except DemoFailed as failed:
            _say(f"FAILED: {failed}")
            return 1
    _say("cluster stopped; done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
