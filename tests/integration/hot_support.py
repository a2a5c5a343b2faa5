"""Strategy `hot` in integration tests: a Deployment whose pods read one ConfigMap both
ways (an env var and a mounted volume), and each pod's `kube-nudge agent` played by the
test: it writes what the agent writes, the keyed hash of the files it loaded under the
namespace's agent key."""

from __future__ import annotations

import base64
import tempfile
import time
from pathlib import Path
from typing import Any

from kube_nudge.agent.watch import claim, directory_files
from kube_nudge.agentwire import AGENT_KEY_FIELD, AGENT_KEY_SECRET, LOADED_HASH, key_id
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS, REPLICASETS, SECRETS
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until
from tests.agent_support import KEY, kubelet_write
from tests.integration.controller_support import eventually

DATA = {"LEVEL": "info", "app.conf": "port 80"}
HOT = {**ENABLED, "kube-nudge.io/strategy": "hot"}


def agent_key_secret() -> dict[str, Any]:
    """The namespace's agent key Secret, holding the key the played agents hash with."""
    return {
        "metadata": {"name": AGENT_KEY_SECRET},
        "data": {AGENT_KEY_FIELD: base64.b64encode(KEY).decode()},
    }


def agent_container(watch: str = "/etc/app", volume: str | None = "cfg") -> dict[str, Any]:
    """The reload agent's sidecar as docs/reload.md adds it (the image's entrypoint
    ``kube-nudge``, args starting with ``agent``), watching ``volume`` mounted at ``watch``.
    Nothing runs it here: the test plays what it writes."""
    mounts = [{"name": volume, "mountPath": watch, "readOnly": True}] if volume else []
    return {
        "name": "kube-nudge-agent", "image": "registry.invalid/kube-nudge:1",
        "args": ["agent", "--watch", watch], "volumeMounts": mounts,
    }  # fmt: skip


def hot_consumer(*, agent: bool = True) -> dict[str, Any]:
    """Key LEVEL as an env var (read at start); the whole ConfigMap as a mounted volume;
    the reload agent beside the app unless ``agent`` is False."""
    ref = {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}
    return manifests.pod_spec(
        volumes=[{"name": "cfg", "configMap": {"name": "app"}}],
        containers=[{
            "name": "app", "image": "registry.invalid/app:1",
            "env": [{"name": "LEVEL", "valueFrom": ref}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/etc/app"}],
        }, *([agent_container()] if agent else [])],
    )  # fmt: skip


async def pods(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    found = await kube.get(PODS.path(namespace), labelSelector="app=web")
    return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]


async def replicasets(kube: KubeClient, namespace: str) -> int:
    return len((await kube.get(REPLICASETS.path(namespace)))["items"])


async def workload_annotations(kube: KubeClient, namespace: str) -> dict[str, str]:
    web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
    return dict(web["metadata"].get("annotations") or {})


async def nudged(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    """The pods once all carry the workload's hot-reload record."""
    record = ""

    async def all_nudged() -> bool:
        nonlocal record
        record = (await workload_annotations(kube, namespace)).get(HOT_RELOAD, "")
        found = await pods(kube, namespace)
        return bool(record) and all(
            (p["metadata"].get("annotations") or {}).get(HOT_RELOAD) == record for p in found
        )

    await until(all_nudged, timeout=30)
    return await pods(kube, namespace)


def loaded(data: dict[str, str], key: bytes = KEY) -> str:
    """What the agent records after loading ``data`` from the ConfigMap's volume at
    /etc/app: laid out as the kubelet does, hashed by the agent's own code."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cfg"
        kubelet_write(root, {k: v.encode() for k, v in data.items()})
        files = directory_files(str(root))
    return claim((("/etc/app", files),), key, key_id(key))


async def agent_reports(
    kube: AdminClient, namespace: str, pod: str, annotation: str,
    data: dict[str, str] | None = None, key: bytes = KEY,
) -> None:  # fmt: skip
    """What the pod's agent writes after a reload of ``data`` (or a failed one)."""
    annotations = {annotation: f"{time.time():.3f}"}
    if data is not None:
        annotations[LOADED_HASH] = loaded(data, key)
    await kube.merge_patch(PODS.path(namespace, pod), {"metadata": {"annotations": annotations}})


async def start(kube: KubeClient, namespace: str, **more: str) -> list[dict[str, Any]]:
    """ConfigMap `app`, Deployment `web` (2 pods, strategy hot, with the reload agent), both
    running; returns the pods, once the wall clock is past the second they started in
    (start times have whole seconds: a change in that second would count as read at start)."""
    return await _start(kube, namespace, hot_consumer(), more)


async def start_without_agent(
    kube: KubeClient, namespace: str, **more: str
) -> list[dict[str, Any]]:
    """As ``start``, but no container of the pod template runs the reload agent."""
    return await _start(kube, namespace, hot_consumer(agent=False), more)


async def _start(
    kube: KubeClient, namespace: str, spec: dict[str, Any], more: dict[str, str]
) -> list[dict[str, Any]]:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", DATA))
    await kube.create(SECRETS.path(namespace), agent_key_secret())
    deployment = manifests.deployment("web", replicas=2, spec=spec, annotations={**HOT, **more})
    await kube.create(DEPLOYMENTS.path(namespace), deployment)

    async def running() -> bool:
        found = await pods(kube, namespace)
        return len(found) == 2 and all(p["status"].get("phase") == "Running" for p in found)

    await until(running, timeout=60)
    started = [parse_timestamp(p["status"]["startTime"]) for p in await pods(kube, namespace)]
    boundary = max(s for s in started if s is not None) + 1
    await eventually(lambda: time.time() >= boundary, timeout=5)
    return await pods(kube, namespace)
