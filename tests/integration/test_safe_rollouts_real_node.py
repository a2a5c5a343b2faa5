"""Safe config releases on real probes: the app runs on the real node, and the kubelet's
readiness probe fails while the config the container started with is broken. Stopping
the line, ordered releases and rolling back to the good copies are observed from a watch
of the Deployments and from the running containers, not from the controller's account."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.node import RealNode
from kube_nudge_dev.nodepods import kubectl, on_real_node, python_container
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import events, running_controller
from tests.integration.rollout_timeline import (
    TIMEOUT,
    all_done,
    assert_in_order,
    change,
    held,
    make_fleet,
    roll_to_good_then_broken,
    watching,
)

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

#: The app: reads MODE from the ConfigMap at start; its readiness probe (run by the
#: kubelet) fails while that config is broken, so a bad config never becomes available.
_SLEEPER = "import time\nwhile True:\n    time.sleep(3600)\n"


def app_spec(image: str) -> dict[str, Any]:
    container = python_container(
        image, _SLEEPER,
        env=[{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "MODE"}}}],
        readinessProbe={"exec": {"command": ["sh", "-c", 'test "$MODE" != broken']},
                        "periodSeconds": 1},
    )  # fmt: skip
    return on_real_node(manifests.pod_spec(containers=[container], terminationGracePeriodSeconds=1))


ORDERS = {"a1": 1, "a2": 2, "b2": 2}


async def test_an_ordered_release_and_a_stopped_line_on_real_probes(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
) -> None:
    await make_fleet(kube, namespace, ORDERS, app_spec(controller_image.ref), replicas=1)
    async with watching(kube, namespace) as timeline:
        await timeline.until(lambda: len(timeline.seen) == len(ORDERS) and all(
            s.done for s in timeline.seen.values()))  # fmt: skip
        async with running_controller(cluster, namespace):
            start = len(timeline.entries)
            await change(kube, namespace, "v2")
            await timeline.until(lambda: all_done(timeline, start, ORDERS))
            assert_in_order(timeline, start, ORDERS)
            good = {name: timeline.seen[name].template for name in ORDERS}

            start = len(timeline.entries)
            await change(kube, namespace, "broken")
            await timeline.until(lambda: timeline.seen["a1"].failed)
            stopped: set[str] = set()

            async def line_stopped() -> bool:
                stopped.update(held(await events(kube, namespace, "LineStopped")))
                return {"a2", "b2"} <= stopped

            await until(line_stopped, TIMEOUT)
            assert held(await events(kube, namespace, "RolloutFailed")) == {"a1"}
            # Nothing of a higher order rolled into the broken config, and their pods still
            # run the good one.
            assert {n: timeline.seen[n].template for n in ("a2", "b2")} == {
                n: good[n] for n in ("a2", "b2")
            }
            for name in ("a2", "b2"):
                assert await _modes_running(kube, cluster, namespace, name) == {"v2"}


async def _modes_running(
    kube: KubeClient, cluster: LocalCluster, namespace: str, app: str
) -> set[str]:
    """MODE as each Ready container of ``app`` started with (read from the container)."""
    pods = (await kube.get(PODS.path(namespace), labelSelector=f"app={app}"))["items"]
    modes = set()
    for pod in pods:
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in pod.get("status", {}).get("conditions", []))  # fmt: skip
        if ready and not pod["metadata"].get("deletionTimestamp"):
            out = await asyncio.to_thread(
                kubectl, cluster, "exec", "-n", namespace, pod["metadata"]["name"], "--",
                "printenv", "MODE",
            )  # fmt: skip
            modes.add(out.strip())
    return modes


async def test_a_failed_snapshot_rollout_rolls_back_and_the_pods_are_ready_on_the_old_data(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
) -> None:
    rollback = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}
    spec = app_spec(controller_image.ref)
    await make_fleet(kube, namespace, {"web": None}, spec, more=rollback)
    async with watching(kube, namespace) as timeline:
        await timeline.until(lambda: "web" in timeline.seen and timeline.seen["web"].done)
        async with running_controller(cluster, namespace):
            await roll_to_good_then_broken(kube, namespace, timeline)
            web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
            env = web["spec"]["template"]["spec"]["containers"][0]["env"][0]
            copy = env["valueFrom"]["configMapKeyRef"]["name"]
            assert (await kube.get(CONFIGMAPS.path(namespace, copy)))["data"] == {"MODE": "v2"}
            # Every Ready pod really runs the good config again, through its real probe.
            assert await _modes_running(kube, cluster, namespace, "web") == {"v2"}
            assert web["status"].get("readyReplicas") == web["spec"]["replicas"]
