"""Fault: the leader of two replicas dies during a stream of changes.

Exactly one replica writes at any time (every write is attributed through the user agent in
the API server's audit log), and no change is lost.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from pathlib import Path

import pytest

from kube_nudge.controller.controller import BUILTIN_KINDS
from kube_nudge.controller.desired import desired_hash
from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge.kube.waiting import wait_for_objects
from tests.integration import manifests
from tests.integration.controller_support import (
    HMAC_SECRET,
    controller_writes,
    start_replica,
    template_hash,
    until,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
ARGS = ("--leader-elect", "--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms",
        "--debounce=100ms", "--max-rollouts=1000/1m")  # fmt: skip


async def test_leader_dies_mid_stream_one_writer_at_a_time_nothing_lost(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    for n in range(4):
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(f"cm{n}", {"k": "0"}))
    for w in range(8):
        spec = manifests.pod_spec(volumes=[{"name": "c", "configMap": {"name": f"cm{w % 4}"}}])
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(f"w{w}", spec=spec, annotations={"kube-nudge.io/enabled": "true"}),
        )
    replicas = [
        await start_replica(cluster.kubeconfig, namespace, tmp_path / f"r{n}.log", extra_args=ARGS)
        for n in range(2)
    ]
    try:

        async def one_leader() -> bool:
            return [await r.leading() for r in replicas].count(True) == 1

        await until(one_leader, 30)
        leader, standby = replicas if await replicas[0].leading() else replicas[::-1]
        for step in range(40):
            await kube.merge_patch(
                CONFIGMAPS.path(namespace, f"cm{step % 4}"), {"data": {"k": str(step)}}
            )
            await asyncio.sleep(0.05)  # part of the scenario: a steady stream
            if step == 20:
                leader.proc.kill()  # no release: the standby waits out the lease
                await leader.proc.wait()
        await until(standby.leading, 30)

        secret = await kube.get(SECRETS.path(namespace, HMAC_SECRET))
        key = base64.b64decode(secret["data"]["hmac-key"])
        workloads = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
        want = {
            o["metadata"]["name"]: await desired_hash(kube, DEPLOYMENT, o, key) for o in workloads
        }
        await wait_for_objects(
            kube,
            DEPLOYMENTS.path(namespace),
            lambda found: all(template_hash(found[n], DEPLOYMENT) == h for n, h in want.items()),
            timeout=60,
        )
    finally:
        for replica in replicas:
            if replica.proc.returncode is None:
                replica.proc.kill()
                await replica.proc.wait()

    writes = sorted(
        controller_writes(cluster, namespace), key=lambda e: e["requestReceivedTimestamp"]
    )
    writers = [entry["userAgent"] for entry in writes]
    switches = sum(1 for a, b in itertools.pairwise(writers) if a != b)
    assert len(set(writers)) == 2, set(writers)  # both led, one after the other
    assert switches == 1, writers  # never interleaved: one writer at a time
