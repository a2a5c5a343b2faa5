"""Pods on the real node whose image comes from the session's registry, and what the kubelet
said about pulling it (its Events)."""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CORE_EVENTS, PODS
from kube_nudge_dev import manifests
from kube_nudge_dev.nodepods import on_real_node
from kube_nudge_dev.waiting import wait_for_object, wait_for_objects

JSON = dict[str, Any]


async def run_pod(kube: KubeClient, namespace: str, name: str, image: str) -> None:
    """A pod of ``image`` on the real node, pulled from the registry whatever the node holds
    (``imagePullPolicy: Always``)."""
    container = {"name": "app", "image": image, "imagePullPolicy": "Always"}
    spec = on_real_node(manifests.pod_spec(containers=[container], terminationGracePeriodSeconds=0))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    await kube.create(PODS.path(namespace), pod)


async def running(kube: KubeClient, namespace: str, name: str, timeout: float = 120) -> JSON:
    """The pod once its container runs."""
    return await wait_for_object(kube, PODS.path(namespace), name, _running, timeout=timeout)


def _running(pod: JSON) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses", [])
    return bool(statuses) and all("running" in s.get("state", {}) for s in statuses)


async def pull_events(
    kube: KubeClient, namespace: str, pod: str, reason: str, timeout: float = 120
) -> list[str]:
    """The messages of the kubelet's Events of ``reason`` (``Pulled``, ``Failed``) about
    ``pod``, once there is one."""

    def about(event: JSON) -> bool:
        involved = event.get("involvedObject", {})
        return involved.get("name") == pod and event.get("reason") == reason

    found = await wait_for_objects(
        kube, CORE_EVENTS.path(namespace),
        lambda events: any(about(e) for e in events.values()), timeout=timeout,
    )  # fmt: skip
    return [str(e.get("message", "")) for e in found.values() if about(e)]
