"""``make demo`` / ``kube-nudge-dev demo``: kube-nudge rolling a Deployment when the config
it consumes changes.

Starts the local control plane, runs ``kube-nudge run`` against it as a user would, and
shows: opting in restarts nothing; a change to a key the pods consume rolls them once
(new ReplicaSet, Event saying which key); a change to a key nobody consumes rolls nothing.
Where this machine can run the real node (root, containerd, cgroups: ``node.py``), the
Deployment's pods are real containers and the demo reads the new config back from a new
pod's log; elsewhere it runs on fake nodes and says what the real node lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess  # nosec B404 # the demo runs kube-nudge as a child process
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, CORE_EVENTS, DEPLOYMENTS, NAMESPACES, REPLICASETS
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH
from kube_nudge.model.annotations import ENABLED
from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.node import NODE_LABEL, TAINT_KEY, missing_requirements
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects

NAMESPACE = "demo"
HASH = CONFIG_HASH


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


async def _run(cluster: LocalCluster, kube: KubeClient, image: str | None) -> None:
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

    port = free_port()
    with _controller(cluster, port):
        await _until(lambda: _ready(port), 60)
        adopted = await wait_for_object(
            kube, DEPLOYMENTS.path(NAMESPACE), "web",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}),
            timeout=60,
        )  # fmt: skip
        baseline = adopted["metadata"]["annotations"][BASELINE_HASH]
        _say(f"kube-nudge adopted deployment/web (baseline {baseline}); pods not restarted")

        started = time.monotonic()
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
        replicasets = await wait_for_objects(
            kube, REPLICASETS.path(NAMESPACE), lambda found: len(found) == 2, timeout=30
        )
        events = await kube.get(CORE_EVENTS.path(NAMESPACE), fieldSelector="reason=Rolling")
        message = events["items"][0]["message"] if events["items"] else "(no event)"
        _say(f"pod template nudged {nudged:.1f} s later (debounce window included): "
             f"{rolled['spec']['template']['metadata']['annotations'][HASH]}")  # fmt: skip
        _say(f"Event on deployment/web: {message}")
        _say(f"rollout complete: replicasets {', '.join(sorted(replicasets))}")
        if image is not None:
            pods = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector="app=web")
            live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
            newest = max(live, key=lambda p: p["metadata"]["creationTimestamp"])
            name = newest["metadata"]["name"]
            _say(f"pod {name} (a real container) started with: {_pod_log(cluster, name)}")

        reconciles = _metric(port, "kube_nudge_reconcile_duration_seconds_count")
        await kube.merge_patch(CONFIGMAPS.path(NAMESPACE, "web-config"), {"data": {"UNUSED": "b"}})
        await _until(
            lambda: _metric(port, "kube_nudge_reconcile_duration_seconds_count") > reconciles, 30
        )
        count = len((await kube.get(REPLICASETS.path(NAMESPACE)))["items"])
        _say(f"changed UNUSED (consumed by no pod): reconciled, {count} replicasets, no rollout")
        nudges = _metric(port, 'kube_nudge_nudges_total{kind="Deployment"}')
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
            kube = KubeClient.from_config(cluster.kubeconfig, user_agent="kube-nudge-demo")
            try:
                await _run(cluster, kube, image)
            finally:
                await kube.aclose()

        asyncio.run(go())
    _say("cluster stopped; done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
