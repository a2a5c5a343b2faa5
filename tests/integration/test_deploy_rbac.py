"""deploy/kube-nudge.yaml grants enough: the controller works with exactly those rules."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    SERVICEACCOUNTS,
    Resource,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import wait_for_object
from tests.integration import manifests
from tests.integration.controller_support import start_replica, template_hash, until
from tests.integration.manifests import ENABLED

pytestmark = pytest.mark.cluster
MANIFEST = Path(__file__).parents[2] / "deploy" / "kube-nudge.yaml"
RBAC = "rbac.authorization.k8s.io"
RESOURCES = {
    "ClusterRole": Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False),
    "ClusterRoleBinding": Resource(
        RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
    ),
    "Role": Resource(RBAC, "v1", "roles", "Role"),
    "RoleBinding": Resource(RBAC, "v1", "rolebindings", "RoleBinding"),
}


def rbac_documents(state_namespace: str, suffix: str) -> list[dict[str, Any]]:
    """The manifest's RBAC objects, moved to a per-test namespace and cluster-unique names."""
    text = MANIFEST.read_text().replace("namespace: kube-nudge", f"namespace: {state_namespace}")
    docs = [d for d in yaml.safe_load_all(text) if d["kind"] in RESOURCES]
    for doc in docs:
        if doc["kind"].startswith("Cluster"):
            doc["metadata"]["name"] += f"-{suffix}"
        if "roleRef" in doc and doc["roleRef"]["kind"] == "ClusterRole":
            doc["roleRef"]["name"] += f"-{suffix}"
    return docs


async def test_controller_runs_with_exactly_the_shipped_rbac(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    state = f"{namespace}-kn"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": state}})
    created: list[str] = []
    try:
        await kube.create(SERVICEACCOUNTS.path(state), {"metadata": {"name": "kube-nudge"}})
        for doc in rbac_documents(state, namespace):
            resource = RESOURCES[doc["kind"]]
            ns = doc["metadata"].get("namespace")
            await kube.create(resource.path(ns), doc)
            if not resource.namespaced:
                created.append(resource.path(name=doc["metadata"]["name"]))
        token = await kube.create(
            SERVICEACCOUNTS.path(state, "kube-nudge", "token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        config = json.loads(cluster.kubeconfig.read_text())
        config["users"] = [{"name": "sa", "user": {"token": token["status"]["token"]}}]
        config["contexts"][0]["context"]["user"] = "sa"
        kubeconfig = tmp_path / "sa.kubeconfig"
        kubeconfig.write_text(json.dumps(config))

        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
        spec = manifests.pod_spec(volumes=[{"name": "c", "configMap": {"name": "app"}}])
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment("app", spec=spec, annotations=ENABLED),
        )
        replica = await start_replica(kubeconfig, namespace, tmp_path / "kn.log",
                                      state_namespace=state)  # fmt: skip
        try:
            await until(replica.leading, 60)
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "app",
                lambda o: "kube-nudge.io/baseline-hash" in o["metadata"].get("annotations", {}),
                timeout=30,
            )  # fmt: skip
            await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"K": "2"}})
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "app",
                lambda o: template_hash(o, BUILTIN_KINDS[0]) is not None, timeout=30,
            )  # fmt: skip
            metrics = await replica.get("/metrics")
            assert metrics is not None
            assert 'kube_nudge_errors_total{stage="event"} 0.0' in metrics.text
            assert "Forbidden" not in (tmp_path / "kn.log").read_text()
        finally:
            replica.proc.send_signal(signal.SIGTERM)
            await replica.proc.wait()
    finally:
        for path in created:
            await kube.delete(path)
        await kube.delete(NAMESPACES.path(name=state))
