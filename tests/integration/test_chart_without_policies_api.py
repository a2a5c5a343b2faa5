"""A cluster that serves no ValidatingAdmissionPolicy (a minor before 1.30, or one that turned
the API off): the chart installs without its policies and says so in one NOTES line, where
the session's cluster gets every policy and no such line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kube_nudge_dev import chart
from kube_nudge_dev.cluster import LocalCluster

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
LEFT_OUT = (
    "The admission policies are left out: this cluster does not serve "
    "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30+), so RBAC "
    "alone bounds kube-nudge's writes."
)
# Only the policies' two resources off: the rest of admissionregistration.k8s.io/v1 (the
# webhook configurations) stays served. Their admission plugin goes too: it waits for the
# resources it enforces, and the API server never gets ready without them.
NO_POLICIES = (
    "--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,"
    "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
    "--disable-admission-plugins=ValidatingAdmissionPolicy",
)


@pytest.fixture(scope="module")
def cluster_without_policies() -> Iterator[LocalCluster]:
    with LocalCluster(nodes=0, apiserver_args=NO_POLICIES) as local:
        yield local


def dry_run_install(kubeconfig: Path) -> tuple[list[str], str]:
    """``helm install --dry-run=server`` (helm asks the cluster which APIs it serves): the
    kinds it would create, and its NOTES."""
    out = chart.helm(
        "install", "kn", str(chart.CHART), "--namespace=default", f"--kubeconfig={kubeconfig}",
        "--dry-run=server", "--set=agent.rbac.serviceAccounts[0].namespace=default",
        "--set=agent.rbac.serviceAccounts[0].name=web", cwd=REPO,
    )  # fmt: skip
    manifest, _, notes = out.partition("\nNOTES:\n")
    manifest = manifest.split("\nMANIFEST:\n", 1)[1]
    kinds = [d["kind"] for d in yaml.safe_load_all(manifest) if d]
    return kinds, notes


def test_the_policies_are_left_out_with_one_notes_line(
    cluster_without_policies: LocalCluster,
) -> None:
    kinds, notes = dry_run_install(cluster_without_policies.kubeconfig)
    assert "ValidatingAdmissionPolicy" not in kinds
    assert "ValidatingAdmissionPolicyBinding" not in kinds
    assert "Deployment" in kinds
    assert notes.count(LEFT_OUT) == 1
    assert "any field: the cluster serves no ValidatingAdmissionPolicy." in notes


def test_a_cluster_that_serves_them_gets_every_policy(cluster: LocalCluster) -> None:
    kinds, notes = dry_run_install(cluster.kubeconfig)
    assert kinds.count("ValidatingAdmissionPolicy") == 3  # workloads, sources, agents' pods
    assert kinds.count("ValidatingAdmissionPolicyBinding") == 3
    assert LEFT_OUT not in notes
