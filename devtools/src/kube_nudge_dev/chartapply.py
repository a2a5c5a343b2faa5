"""Applying what the Helm chart renders to a cluster: the RBAC tests, the agent's grant of
the real-node tests and the bench."""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS, SERVICEACCOUNTS, Resource

RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io"
#: The kinds the chart renders that the tests apply, by kind.
CHART_KINDS = {
    r.kind: r
    for r in (
        SERVICEACCOUNTS,
        DEPLOYMENTS,
        Resource("", "v1", "services", "Service"),
        Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
        Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False),
        Resource(RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
        Resource(RBAC, "v1", "roles", "Role"),
        Resource(RBAC, "v1", "rolebindings", "RoleBinding"),
        Resource(ADMISSION, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                 namespaced=False),
        Resource(ADMISSION, "v1", "validatingadmissionpolicybindings",
                 "ValidatingAdmissionPolicyBinding", namespaced=False),
    )
}  # fmt: skip


def cluster_scoped(docs: list[dict[str, Any]]) -> list[str]:
    """The paths of the cluster-scoped documents (deleting a namespace does not remove them)."""
    return [
        CHART_KINDS[d["kind"]].path(name=d["metadata"]["name"])
        for d in docs
        if not CHART_KINDS[d["kind"]].namespaced
    ]


async def apply_documents(kube: KubeClient, docs: list[dict[str, Any]]) -> list[str]:
    """Create every document, after a server-side dry run of all of them; the paths of the
    cluster-scoped ones."""
    for dry_run in (True, False):
        for doc in docs:
            path = CHART_KINDS[doc["kind"]].path(doc["metadata"].get("namespace"))
            await kube.request("POST", path, params={"dryRun": "All"} if dry_run else None,
                               body=doc)  # fmt: skip
    return cluster_scoped(docs)
