"""README's claims about kube-nudge's writes, from the API server's own records: a config
change restarts a workload with one request, a PATCH under field manager ``kube-nudge``
(README: "one request per restart", "field manager `kube-nudge` (visible in
`managedFields`)")."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import audit_entries, running_controller, template_hash

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


def requests_for(cluster: LocalCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """kube-nudge's requests about Deployment ``name`` the audit policy records (every
    write), in the order the API server received them."""
    found = [
        entry
        for entry in audit_entries(cluster, namespace)
        if (entry.get("objectRef") or {}).get("resource") == "deployments"
        and entry["objectRef"].get("name") == name
    ]
    return sorted(found, key=lambda entry: entry["requestReceivedTimestamp"])


async def test_a_change_restarts_a_workload_with_one_patch_by_field_manager_kube_nudge(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    body = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED)
    await kube.create(DEPLOYMENTS.path(namespace), body)
    async with running_controller(cluster, namespace) as running:
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: BASELINE_HASH in (o["metadata"].get("annotations") or {}), timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        adopted = len(requests_for(cluster, namespace, "web"))

        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        rolled = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        # Followed to the end: a write while following the rollout would count too.
        await running.controller.settled(timeout=30)

    [request] = requests_for(cluster, namespace, "web")[adopted:]
    assert (request["verb"], request["responseStatus"]["code"]) == ("patch", 200), request
    assert parse_qs(urlsplit(request["requestURI"]).query)["fieldManager"] == ["kube-nudge"]

    # The API server names kube-nudge as the manager of the hash it wrote on the template.
    owners = [
        entry
        for entry in rolled["metadata"]["managedFields"]
        if f"f:{CONFIG_HASH}"
        in entry.get("fieldsV1", {})
        .get("f:spec", {})
        .get("f:template", {})
        .get("f:metadata", {})
        .get("f:annotations", {})
    ]
    assert [(o["manager"], o["operation"]) for o in owners] == [("kube-nudge", "Update")]
