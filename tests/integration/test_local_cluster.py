"""The local control plane really runs workloads: rollouts, controllers, kwok, RBAC."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    PODS,
    REPLICASETS,
    SECRETS,
    SERVICEACCOUNTS,
    STATEFULSETS,
    Resource,
)
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects

pytestmark = pytest.mark.cluster
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def test_deployment_becomes_available_then_rolls_out(
    kube: AdminClient, namespace: str
) -> None:
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("web", replicas=2))
    await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web", deployment_complete, timeout=60)
    pods = await kube.get(PODS.path(namespace), labelSelector="app=web")
    assert sum(_ready(pod) for pod in pods["items"]) == 2

    patch = {"spec": {"template": {"metadata": {"annotations": {"example/rev": "2"}}}}}
    await kube.merge_patch(DEPLOYMENTS.path(namespace, "web"), patch)
    await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web", deployment_complete, timeout=60)
    replicasets = await wait_for_objects(
        kube, REPLICASETS.path(namespace), lambda found: len(found) == 2, timeout=30
    )
    by_replicas = sorted(rs["spec"]["replicas"] for rs in replicasets.values())
    assert by_replicas == [0, 2]  # the old ReplicaSet was scaled down: the rollout completed


async def test_statefulset_pods_become_ready(kube: KubeClient, namespace: str) -> None:
    await kube.create(STATEFULSETS.path(namespace), manifests.statefulset("db", replicas=2))
    done = await wait_for_object(
        kube,
        STATEFULSETS.path(namespace),
        "db",
        lambda sts: sts.get("status", {}).get("readyReplicas") == 2,
        timeout=60,
    )
    assert done["status"]["currentRevision"] == done["status"]["updateRevision"]


async def test_daemonset_runs_on_every_fake_node(kube: KubeClient, namespace: str) -> None:
    await kube.create(DAEMONSETS.path(namespace), manifests.daemonset("agent"))
    done = await wait_for_object(
        kube,
        DAEMONSETS.path(namespace),
        "agent",
        lambda ds: ds.get("status", {}).get("numberReady") == 2,
        timeout=60,
    )
    assert done["status"]["desiredNumberScheduled"] == 2


async def test_cronjob_creates_a_job_whose_pod_runs(kube: KubeClient, namespace: str) -> None:
    await kube.create(CRONJOBS.path(namespace), manifests.cronjob("tick"))
    # The cronjob controller fires on the next minute boundary: up to 60 s.
    jobs = await wait_for_objects(
        kube, JOBS.path(namespace), lambda found: len(found) >= 1, timeout=90
    )
    job = next(iter(jobs.values()))
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    pods = await wait_for_objects(
        kube,
        PODS.path(namespace),
        lambda found: any(
            _ready(pod) or pod.get("status", {}).get("phase") == "Succeeded"
            for pod in found.values()
        ),
        timeout=60,
        params={"labelSelector": f"job-name={job['metadata']['name']}"},
    )
    assert pods


async def test_service_account_token_is_authorized_only_by_rbac(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": "reader"}})
    await kube.create(ROLES.path(namespace), {
        "metadata": {"name": "read-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    })  # fmt: skip
    await kube.create(ROLEBINDINGS.path(namespace), {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": ROLES.group, "kind": "Role", "name": "read-configmaps"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    })  # fmt: skip
    token_request = await kube.create(
        SERVICEACCOUNTS.path(namespace, "reader", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token = token_request["status"]["token"]

    admin = json.loads(cluster.kubeconfig.read_text())
    admin["users"] = [{"name": "reader", "user": {"token": token}}]
    admin["contexts"][0]["context"]["user"] = "reader"
    config = tmp_path / "reader.kubeconfig"
    config.write_text(json.dumps(admin))
    reader = KubeClient.from_config(config)
    try:
        allowed = await reader.get(CONFIGMAPS.path(namespace))
        assert allowed["kind"] == "ConfigMapList"
        for forbidden in (SECRETS.path(namespace), CONFIGMAPS.path("kube-system")):
            with pytest.raises(ApiError) as caught:
                await reader.get(forbidden)
            assert caught.value.status == 403, forbidden
    finally:
        await reader.aclose()
    assert base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"])
