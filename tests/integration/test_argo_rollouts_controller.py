"""Argo Rollouts with its real controller (the pinned v1.10.2, built from the Go module proxy)
running against the session cluster: kube-nudge writes the change, Argo rolls it out as it
does for users (its own canary steps and ReplicaSets, pods on the fake nodes), and kube-nudge
follows what Argo reports. Promotion and abort are the patches Argo's kubectl plugin makes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, ROLLOUTS
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.argo_support import (
    abort,
    adopted,
    argo_rollouts_controller,
    change_and_roll,
    install_argo_rollouts_crds,
    promote,
    rollout,
    rollout_kinds,
)
from tests.integration.controller_support import cli_as, events, posted, running_controller

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
TIMEOUT = 90


@pytest.fixture
async def argo(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> AsyncIterator[tuple[WorkloadKind, ...]]:
    """Argo's CRDs, its controller on ``namespace``, ConfigMap ``app``; the kinds
    ``run --argo-rollouts`` watches."""
    await install_argo_rollouts_crds(kube)
    kinds = await rollout_kinds(kube)
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    async with argo_rollouts_controller(cluster, namespace, tmp_path / "argo.log"):
        yield kinds


async def argo_says(
    kube: KubeClient, namespace: str, name: str, condition: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Rollout ``name`` once Argo has seen its latest spec and its status meets ``condition``."""

    def seen(obj: dict[str, Any]) -> bool:
        status = obj.get("status") or {}
        current = status.get("observedGeneration") == str(obj["metadata"]["generation"])
        return current and condition(status)

    return await wait_for_object(kube, ROLLOUTS.path(namespace), name, seen, timeout=TIMEOUT)


def phase(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda status: status.get("phase") == name


async def state_of(cluster: LocalCluster, namespace: str, kind: str, name: str) -> str:
    """What ``kube-nudge status`` says of workload ``kind/name``."""
    code, out, err = await cli_as(cluster.kubeconfig, namespace, "status", "-o", "json")
    assert code in (0, 1), err
    [row] = [r for r in json.loads(out)["workloads"] if (r["kind"], r["name"]) == (kind, name)]
    return str(row["state"])


async def test_argo_pauses_the_change_kube_nudge_wrote_and_completes_it_once_promoted(
    kube: AdminClient, cluster: LocalCluster, namespace: str, argo: tuple[WorkloadKind, ...]
) -> None:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": manifests.env_consumer()}
    await kube.create(ROLLOUTS.path(namespace), rollout("web", ENABLED, template=template))
    await argo_says(kube, namespace, "web", phase("Healthy"))
    async with running_controller(cluster, namespace, kinds=argo) as running:
        await adopted(kube, ROLLOUTS.path(namespace), "web")
        await change_and_roll(kube, running, argo[-1], namespace, "web")
        # Argo takes the new template as a new revision: canary at 50%, paused for promotion.
        paused = (await argo_says(kube, namespace, "web", phase("Paused")))["status"]
        assert paused["currentPodHash"] != paused["stableRS"]
        assert await state_of(cluster, namespace, "Rollout", "web") == "rolling"
        assert await events(kube, namespace, "RolloutComplete") == []

        await promote(kube, namespace, "web")
        await argo_says(kube, namespace, "web", phase("Healthy"))
        [complete] = await posted(kube, namespace, "RolloutComplete", TIMEOUT)
        assert complete["involvedObject"]["name"] == "web"
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "wait", "rollout/web",
                                      "--timeout=30s")  # fmt: skip
        assert code == 0, out + err
        assert await state_of(cluster, namespace, "Rollout", "web") == "current"


async def test_argo_aborts_a_workload_ref_rollout_and_kube_nudge_stops_the_line(
    kube: AdminClient, cluster: LocalCluster, namespace: str, argo: tuple[WorkloadKind, ...]
) -> None:
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
        "web", replicas=0, spec=manifests.env_consumer(),
        annotations={**ENABLED, "kube-nudge.io/rollout-order": "1"}))  # fmt: skip
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
        "api", replicas=0, spec=manifests.env_consumer(),
        annotations={**ENABLED, "kube-nudge.io/rollout-order": "2"}))  # fmt: skip
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    selector = {"matchLabels": {"app": "web"}}  # the Deployment's: Argo checks they match
    await kube.create(ROLLOUTS.path(namespace), rollout("web-ro", {}, workloadRef=ref,
                                                        selector=selector))  # fmt: skip
    await argo_says(kube, namespace, "web-ro", phase("Healthy"))
    async with running_controller(cluster, namespace, kinds=argo) as running:
        await adopted(kube, DEPLOYMENTS.path(namespace), "web")
        await change_and_roll(kube, running, DEPLOYMENT, namespace, "web")
        # Argo notices the Deployment's new template and runs it as a canary of the Rollout.
        await argo_says(kube, namespace, "web-ro", phase("Paused"))
        assert await state_of(cluster, namespace, "Deployment", "web") == "rolling"

        await abort(kube, namespace, "web-ro")
        # Argo itself handles it: back on the stable ReplicaSet, Degraded, and says why.
        aborted = (await argo_says(kube, namespace, "web-ro", phase("Degraded")))["status"]
        assert aborted["message"].startswith("RolloutAborted"), aborted
        await posted(kube, namespace, "LineStopped", TIMEOUT)
        [failed] = await events(kube, namespace, "RolloutFailed")
        assert (failed["involvedObject"]["kind"], failed["involvedObject"]["name"]) == (
            "Deployment", "web",
        )  # fmt: skip
        assert "Rollout web-ro: aborted" in failed["message"]
        stopped = await events(kube, namespace, "LineStopped")
        assert {e["involvedObject"]["name"] for e in stopped} == {"api"}
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "wait", "deployment/web",
                                      "--timeout=30s")  # fmt: skip
        assert code == 1, out + err
