"""`kube-nudge run` as deployed: two replicas with leader election, probes, metrics, JSON logs."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.kubeversion import support_window
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object
from tests.integration.controller_support import Replica, start_replica, template_hash

pytestmark = pytest.mark.cluster
CANARY = "canary-7f3a9c1e-do-not-log"


@pytest.fixture
async def replicas(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> AsyncIterator[list[Replica]]:
    started = [
        await start_replica(cluster.kubeconfig, namespace, tmp_path / f"r{n}.log") for n in range(2)
    ]
    yield started
    for replica in started:
        if replica.proc.returncode is None:
            replica.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(replica.proc.wait(), 30)


async def test_two_replicas_one_leader_failover_and_clean_logs(
    replicas: list[Replica], kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
    await kube.create(SECRETS.path(namespace), manifests.secret("db", {"password": CANARY}))
    spec = manifests.pod_spec(volumes=[
        {"name": "c", "configMap": {"name": "app"}}, {"name": "s", "secret": {"secretName": "db"}},
    ])  # fmt: skip
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("app", spec=spec, annotations=ENABLED),
    )

    async def both_ready() -> bool:
        answers = [await r.get("/readyz") for r in replicas]
        return all(a is not None and a.status_code == 200 for a in answers)

    await until(both_ready, 60)

    async def one_leader() -> bool:
        return [await r.leading() for r in replicas].count(True) == 1

    await until(one_leader, 30)
    leader, standby = replicas if await replicas[0].leading() else replicas[::-1]
    await wait_for_object(
        kube, DEPLOYMENTS.path(namespace), "app",
        lambda o: "kube-nudge.io/baseline-hash" in o["metadata"].get("annotations", {}),
        timeout=30,
    )  # fmt: skip

    leader.proc.kill()  # no release: the standby must wait for the lease to expire
    await leader.proc.wait()
    await until(standby.leading, 30)
    await kube.merge_patch(
        SECRETS.path(namespace, "db"), {"stringData": {"password": CANARY + "2"}}
    )
    await wait_for_object(
        kube, DEPLOYMENTS.path(namespace), "app",
        lambda o: template_hash(o, BUILTIN_KINDS[0]) is not None, timeout=30,
    )  # fmt: skip

    metrics = await standby.get("/metrics")
    assert metrics is not None and 'kube_nudge_nudges_total{kind="Deployment"} 1.0' in metrics.text
    for replica in replicas:
        text = replica.log.read_text()
        assert CANARY not in text
        records = [json.loads(line) for line in text.splitlines()]  # each line one JSON object
        # At start each replica names the server's version; inside the window, no warning.
        version = [r for r in records if r["logger"] == "kube_nudge.app.serverversion"]
        assert [(r["level"], r["msg"]) for r in version] == [
            ("INFO", f"Kubernetes server {cluster.kube_version} (supported: {support_window()})")
        ]
    assert CANARY not in metrics.text


async def test_a_missing_state_namespace_says_how_to_fix_it(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    log = tmp_path / "missing-state.log"
    replica = await start_replica(
        cluster.kubeconfig, namespace, log, state_namespace=f"{namespace}-gone", extra_args=()
    )
    assert await asyncio.wait_for(replica.proc.wait(), 60) == 1
    text = log.read_text()
    assert f"state namespace '{namespace}-gone' does not exist" in text
    assert f"kubectl create namespace {namespace}-gone" in text
