"""Applying what the Helm chart renders to a cluster: the RBAC tests, the agent's grant of
the real-node tests and the bench; and a CRD (the chart's ``crds/`` folder, or one a test
builds), created and waited for until API discovery serves it."""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CRDS, DEPLOYMENTS, SERVICEACCOUNTS, Resource
from kube_nudge_dev.waiting import until, wait_for_object

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


async def apply_crd(kube: KubeClient, crd: dict[str, Any]) -> None:
    """Create CRD manifest ``crd`` (one of that name left by an earlier test of this session
    is reused) and wait until API discovery serves each of its versions."""
    spec = crd["spec"]
    name = crd["metadata"]["name"]
    try:
        await kube.create(CRDS.path(), crd)
    except ApiError as exc:
        if not exc.conflict:
            raise
    await wait_for_object(
        kube, CRDS.path(), name,
        lambda crd: any(c["type"] == "Established" and c["status"] == "True"
                        for c in (crd.get("status") or {}).get("conditions") or []),
        timeout=30,
    )  # fmt: skip

    # Established does not mean API discovery serves the group yet (it lags a moment).
    async def discoverable() -> bool:
        for version in spec["versions"]:
            try:
                found = await kube.get(f"/apis/{spec['group']}/{version['name']}")
            except ApiError:
                return False
            if not any(r.get("name") == spec["names"]["plural"] for r in found["resources"]):
                return False
        return True

    await until(discoverable, 30)
