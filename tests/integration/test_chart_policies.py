"""The chart's policies against the real API server.

Its ValidatingAdmissionPolicies type-check cleanly: for each policy, the API server checks
every expression against the schema of every kind it matches and writes what does not fit
into ``status.typeChecking.expressionWarnings`` (e.g. ``undefined field 'replicas'`` for a
DaemonSet). A warning there means an expression that fails, or is skipped, at admission time
for that kind. And its namespace-scoped mode refuses a missing namespace before applying
anything (its ``lookup`` of each listed namespace, as helm install makes it)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import NAMESPACES, SECRETS
from kube_nudge_dev import chart
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import CHART_KINDS
from kube_nudge_dev.cluster import LocalCluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
POLICY = "ValidatingAdmissionPolicy"
# Every policy the chart can render: the workload and source policies (always), the hot
# strategy's pod policy and the agents' own-pod policy.
EVERY_POLICY = ("hotStrategy.enabled=true", "agent.rbac.serviceAccounts[0].namespace=team-a",
                "agent.rbac.serviceAccounts[0].name=web")  # fmt: skip
TYPE_CHECK_SECONDS = 30.0
log = logging.getLogger("kube_nudge.tests.chart_policies")


async def type_checked(kube: KubeClient, path: str) -> dict[str, Any]:
    """The policy's ``status.typeChecking`` once the API server has checked its current
    generation (within seconds of its creation)."""
    deadline = time.monotonic() + TYPE_CHECK_SECONDS
    while True:
        policy = await kube.get(path)
        status = policy.get("status") or {}
        if status.get("observedGeneration") == policy["metadata"]["generation"] and (
            "typeChecking" in status
        ):
            return dict(status["typeChecking"])
        if time.monotonic() > deadline:
            raise AssertionError(f"{path}: not type-checked within {TYPE_CHECK_SECONDS:g}s")
        await asyncio.sleep(0.2)


async def test_every_admission_policy_type_checks_for_every_kind_it_matches(
    kube: AdminClient, namespace: str
) -> None:
    rendered = chart.template(REPO, release=namespace, namespace=namespace, sets=EVERY_POLICY)
    policies = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == POLICY]
    assert len(policies) == 4
    resource = CHART_KINDS[POLICY]
    created: list[str] = []
    try:
        for policy in policies:  # no bindings: the policies are checked, never enforced
            await kube.create(resource.path(), policy)
            created.append(resource.path(name=policy["metadata"]["name"]))
        warnings = {}
        for path in created:
            found = (await type_checked(kube, path)).get("expressionWarnings", [])
            log.info("%s: type-checked, %d warning(s)", path.rsplit("/", 1)[1], len(found))
            warnings[path.rsplit("/", 1)[1]] = [f"{w['fieldRef']}: {w['warning']}" for w in found]
    finally:
        for path in created:
            await kube.delete(path)
    assert all(not found for found in warnings.values()), "\n".join(
        f"{name}: {text}" for name, found in warnings.items() for text in found
    )


async def test_a_missing_watched_namespace_fails_the_install_before_anything_is_applied(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    missing = f"{namespace}-absent"
    install = (
        "install", namespace, str(chart.CHART), f"--namespace={namespace}",
        f"--kubeconfig={cluster.kubeconfig}", f"--set=watchNamespaces={{{namespace},{missing}}}",
        "--set=admissionPolicy.enabled=false",
    )  # fmt: skip
    with pytest.raises(chart.ChartError, match=rf"namespace\(s\) {missing} not found") as refused:
        chart.helm(*install, cwd=REPO)
    log.info("helm install refused: %s", str(refused.value).splitlines()[-3:])
    # nothing applied: no Role in the namespace that exists, no release recorded
    assert (await kube.get(CHART_KINDS["Role"].path(namespace)))["items"] == []
    assert (await kube.get(SECRETS.path(namespace), labelSelector="owner=helm"))["items"] == []
    # with both there, helm's server-side dry run renders it, creating no namespace
    await kube.create(NAMESPACES.path(), {"metadata": {"name": missing}})
    try:
        rendered = chart.helm(*install, "--dry-run=server", cwd=REPO)
    finally:
        await kube.delete(NAMESPACES.path(name=missing))
    assert "kind: Role\n" in rendered and "kind: Namespace\n" not in rendered
