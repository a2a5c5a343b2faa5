"""`kube-nudge wait` in a pipeline: returns only once a config change is out."""

from __future__ import annotations

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.progress import rollout_complete
from kube_nudge.reporting.hmackey import load_or_create_key
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from tests.integration.controller_support import (
    HMAC_SECRET,
    expected_hash,
    running_controller,
    template_hash,
    wait_cli,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


async def test_wait_returns_once_every_consumer_rolled_out_the_change(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    for name in ("web", "api"):
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(
                name, replicas=2, spec=manifests.env_consumer("LEVEL"), annotations=ENABLED
            ),
        )
    # A 2 s debounce: right after the edit, `kubectl rollout status` would say "done".
    async with running_controller(cluster, namespace, debounce=2.0) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        code, out, err = await wait_cli(cluster.kubeconfig, namespace, "configmap/app",
                                        "--timeout=90s")  # fmt: skip
        assert code == 0, (out, err)
        assert "all 2 workload(s) run the new config" in out
        for name in ("web", "api"):
            obj = await kube.get(DEPLOYMENTS.path(namespace, name))
            assert template_hash(obj, DEPLOYMENT) == await expected_hash(
                kube, DEPLOYMENT, obj, running.hmac_key
            )
            assert rollout_complete("Deployment.apps", obj) is True
        # Progress went to the log line by line (not a terminal): each workload appeared.
        assert f"{namespace}/Deployment/web" in out and f"{namespace}/Deployment/api" in out


async def test_wait_fails_for_a_held_consumer_and_times_out_without_a_controller(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await load_or_create_key(kube, namespace, HMAC_SECRET)  # as an installed kube-nudge has
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("held", spec=manifests.env_consumer("MISSING"), annotations=ENABLED),
    )
    code, _, err = await wait_cli(cluster.kubeconfig, namespace, "deployment/held",
                                  "--timeout=30s")  # fmt: skip
    assert code == 1, err
    reason = "held: missing: configmap/app has no key 'MISSING'"
    assert f"failed: {namespace}/Deployment/held: FAILED ({reason})" in err

    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("idle", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED),
    )
    # No controller runs: the workload is never adopted, so the change is never out.
    code, _, err = await wait_cli(cluster.kubeconfig, namespace, "deployment/idle",
                                  "--timeout=3s")  # fmt: skip
    assert code == 3, err
    assert f"timed out: {namespace}/Deployment/idle: waiting (not-adopted" in err
