"""`kube-nudge status` as a person or a cron job runs it: which pods run which config."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from kube_nudge.controller.audit import Audit
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.runtime.metrics import Metrics
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects
from tests.integration import manifests
from tests.integration.controller_support import eventually, running_controller
from tests.integration.manifests import ENABLED
from tests.unit.test_app_status import status_validator

pytestmark = pytest.mark.cluster


async def status(kubeconfig: Path, namespace: str, *flags: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_nudge", "status", f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}", f"--state-namespace={namespace}", *flags,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def make_stale_legacy(kube: KubeClient, namespace: str) -> None:
    """A Deployment `legacy`, not opted in, whose pod started before its ConfigMap changed."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("legacy", spec=manifests.env_consumer(), annotations={}),
    )
    pods = await wait_for_objects(
        kube, PODS.path(namespace),
        lambda found: any((p.get("status") or {}).get("startTime") for p in found.values()),
        timeout=30,
    )  # fmt: skip
    started = min(
        parse_timestamp(p["status"]["startTime"]) or 0.0
        for p in pods.values() if (p.get("status") or {}).get("startTime")
    )  # fmt: skip
    # API timestamps have whole seconds: the change must land in a later second than the start.
    await eventually(lambda: time.time() >= started + 1.0, timeout=5)
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})


async def test_status_finds_stale_pods_and_clears_once_rolled(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_stale_legacy(kube, namespace)

    # Not opted in: invisible without --all, found with it.
    code, out, _ = await status(cluster.kubeconfig, namespace, "-o", "json")
    assert code == 0 and json.loads(out)["workloads"] == []
    code, out, err = await status(cluster.kubeconfig, namespace, "--all", "-o", "json")
    assert code == 1, err
    document = json.loads(out)
    status_validator().validate(document)
    assert document["schema"] == "kube-nudge.io/status/v1" and document["drift"] is True
    [row] = document["workloads"]
    assert (row["name"], row["kind"], row["optedIn"], row["state"]) == (
        "legacy", "Deployment", False, "stale"
    )  # fmt: skip
    assert row["stalePods"] == 1 and row["pods"] == {"-": 1}
    assert "certainly stale (env, subPath or init container): configmap/app" in row["detail"]
    assert row["sources"] == ["configmap/app [LEVEL]"]
    assert "debug" not in out and "info" not in out  # names and hashes, never values

    code, table, _ = await status(cluster.kubeconfig, namespace, "--all")
    assert code == 1
    lines = table.splitlines()
    assert lines[0].split() == ["WORKLOAD", "STATE", "PODS", "DETAIL"]
    assert lines[1].startswith(f"{namespace}/Deployment/legacy") and " stale " in lines[1]
    assert all(len(line) <= 80 for line in lines), lines

    # Opting in rolls the stale pods (adoption sees them); then status is clean.
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(
            DEPLOYMENTS.path(namespace, "legacy"), {"metadata": {"annotations": ENABLED}}
        )
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "legacy",
            lambda o: deployment_complete(o) and o["metadata"]["generation"] > 1, timeout=60,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
    await wait_for_objects(kube, PODS.path(namespace), lambda found: len(found) == 1, timeout=60)
    code, out, err = await status(cluster.kubeconfig, namespace, "--all", "-o", "json")
    assert code == 0, (out, err)
    status_validator().validate(json.loads(out))
    [row] = json.loads(out)["workloads"]
    assert (row["optedIn"], row["state"], row["strategy"]) == (True, "current", "rollout")
    assert row["desiredHash"] == row["appliedHash"] and row["pods"] == {row["appliedHash"]: 1}


async def test_the_drift_audit_exports_what_status_all_finds(
    kube: KubeClient, namespace: str
) -> None:
    await make_stale_legacy(kube, namespace)
    metrics = Metrics()
    audit = Audit(
        kube, metrics, interval=60, namespaces=(namespace,), kinds=BUILTIN_KINDS,
        hmac_key=b"k" * 32, compat=False,
    )  # fmt: skip
    assert metrics.audit_timestamp._value.get() == 0
    await audit.run_once()
    assert metrics.audit_workloads.labels(state="stale", opted_in="false")._value.get() == 1
    assert metrics.audit_workloads.labels(state="current", opted_in="true")._value.get() == 0
    assert metrics.audit_stale_pods._value.get() == 1
    assert metrics.audit_timestamp._value.get() > 0
