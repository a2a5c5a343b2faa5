"""Fault: the controller is SIGKILLed at random points of a stream of changes.

After it comes back, every workload must converge to the hash of the config it consumes
(nothing lost), and no workload may have rolled more often than changes to its consumed
keys justify (nothing extra).
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.controller.controller import BUILTIN_KINDS
from kube_nudge.controller.desired import desired_hash
from kube_nudge.controller.views import BASELINE_HASH
from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, REPLICASETS, SECRETS
from kube_nudge.kube.waiting import wait_for_objects
from tests.integration import manifests
from tests.integration.controller_support import (
    HMAC_SECRET,
    Replica,
    start_replica,
    template_hash,
    until,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
SOURCES, WORKLOADS, CHANGES, KILLS = 8, 20, 80, 4


def applied(obj: dict[str, Any]) -> str | None:
    return template_hash(obj, DEPLOYMENT) or obj["metadata"].get("annotations", {}).get(
        BASELINE_HASH
    )


async def test_sigkill_during_a_stream_of_changes_loses_nothing_and_adds_nothing(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("FAULT_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    print(f"FAULT_SEED={seed}")
    for n in range(SOURCES):
        await kube.create(
            CONFIGMAPS.path(namespace), manifests.configmap(f"cm{n}", {"a": "0", "b": "0"})
        )
    consumes: dict[str, list[int]] = {}
    for w in range(WORKLOADS):
        used = rng.sample(range(SOURCES), 2)
        consumes[f"w{w}"] = used
        spec = manifests.pod_spec(
            containers=[
                {
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    # key `a` of the first source only; every key of the second
                    "env": [
                        {
                            "name": "A",
                            "valueFrom": {"configMapKeyRef": {"name": f"cm{used[0]}", "key": "a"}},
                        }
                    ],
                    "envFrom": [{"configMapRef": {"name": f"cm{used[1]}"}}],
                }
            ]
        )
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(f"w{w}", spec=spec, annotations={"kube-nudge.io/enabled": "true"}),
        )

    args = ("--debounce=100ms", "--max-rollouts=1000/1m")
    replica: Replica = await start_replica(
        cluster.kubeconfig, namespace, tmp_path / "kn.log", extra_args=args
    )
    await wait_for_objects(
        kube,
        DEPLOYMENTS.path(namespace),
        lambda found: len(found) == WORKLOADS and all(applied(o) for o in found.values()),
        timeout=60,
    )

    # The stream: each change bumps one key of one source; kills land at random points.
    kill_at = set(rng.sample(range(1, CHANGES), KILLS))
    justified = dict.fromkeys(consumes, 0)
    for step in range(CHANGES):
        source, key = rng.randrange(SOURCES), rng.choice("ab")
        await kube.merge_patch(
            CONFIGMAPS.path(namespace, f"cm{source}"), {"data": {key: str(step)}}
        )
        for name, (keyed, whole) in consumes.items():
            if (source == keyed and key == "a") or source == whole:
                justified[name] += 1
        await asyncio.sleep(rng.uniform(0, 0.05))  # part of the scenario: an uneven stream
        if step in kill_at:
            replica.proc.kill()
            await replica.proc.wait()
            replica = await start_replica(
                cluster.kubeconfig, namespace, tmp_path / "kn.log", extra_args=args
            )
    try:
        secret = await kube.get(SECRETS.path(namespace, HMAC_SECRET))
        key_bytes = base64.b64decode(secret["data"]["hmac-key"])
        workloads = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
        want = {o["metadata"]["name"]: await desired_hash(kube, DEPLOYMENT, o, key_bytes)
                for o in workloads}  # fmt: skip
        await wait_for_objects(
            kube,
            DEPLOYMENTS.path(namespace),
            lambda found: all(applied(found[name]) == hash_ for name, hash_ in want.items()),
            timeout=60,
        )
        await until(replica.leading, 10)
    finally:
        replica.proc.kill()
        await replica.proc.wait()

    owners: dict[str, int] = dict.fromkeys(consumes, 0)
    for rs in (await kube.get(REPLICASETS.path(namespace)))["items"]:
        owners[rs["metadata"]["ownerReferences"][0]["name"]] += 1
    for name, count in owners.items():
        rollouts = count - 1
        assert rollouts <= justified[name], (name, rollouts, justified[name], seed)
    assert any(count > 1 for count in owners.values())  # the stream really rolled things
