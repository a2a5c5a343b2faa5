"""Fault: another writer edits the same workloads while kube-nudge rolls them.

kube-nudge's merge patches touch only its annotation, so the other writer's changes are
kept and both converge without conflicts.
"""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.controller.controller import BUILTIN_KINDS
from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.waiting import wait_for_objects
from tests.integration import manifests
from tests.integration.controller_support import expected_hash, running_controller, template_hash

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
WORKLOADS = 6


async def test_concurrent_writer_keeps_its_changes_and_hashes_converge(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"k": "0"}))
    spec = manifests.pod_spec(volumes=[{"name": "c", "configMap": {"name": "app"}}])
    for w in range(WORKLOADS):
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(f"w{w}", spec=spec, annotations={"kube-nudge.io/enabled": "true"}),
        )

    async def other_writer(rounds: int) -> None:
        for n in range(rounds):
            for w in range(WORKLOADS):
                await kube.merge_patch(
                    DEPLOYMENTS.path(namespace, f"w{w}"),
                    {"metadata": {"annotations": {"example.com/touched": str(n)}},
                     "spec": {"template": {"metadata": {"labels": {"touched": str(n)}}}}},
                )  # fmt: skip

    async with running_controller(cluster, namespace, debounce=0.05) as running:
        changes = [
            kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"k": str(n)}})
            for n in range(1, 11)
        ]
        writer = asyncio.create_task(other_writer(10))
        for change in changes:
            await change
            await asyncio.sleep(0.05)  # part of the scenario: interleave with the other writer
        await writer
        workloads = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
        want = {
            o["metadata"]["name"]: await expected_hash(kube, DEPLOYMENT, o, running.hmac_key)
            for o in workloads
        }
        done = await wait_for_objects(
            kube,
            DEPLOYMENTS.path(namespace),
            lambda found: all(template_hash(found[n], DEPLOYMENT) == h for n, h in want.items()),
            timeout=60,
        )
        await running.controller.settled(timeout=30)
        assert running.metrics.errors.labels(stage="write")._value.get() == 0
    for obj in done.values():
        assert obj["metadata"]["annotations"]["example.com/touched"] == "9"
        assert obj["spec"]["template"]["metadata"]["labels"]["touched"] == "9"
