"""The Helm chart (deploy/helm/kube-nudge), rendered and linted by the pinned helm: lint is
clean, deploy/manifests is exactly what it renders, and what it renders is what we promise
(the controller's real flags, least-privilege RBAC per mode, a hardened pod)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.app.cli import build_parser
from kube_nudge.app.run_command import RUN
from kube_nudge_dev import chart
from kube_nudge_dev.build import helm_binary

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "make manifests  (or: .venv/bin/kube-nudge-dev manifests)"
Doc = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def _helm() -> Iterator[None]:
    helm_binary()  # `make test` builds it first; a bare pytest run builds it here (minutes)
    yield


def render(*sets: str, release: str = chart.RELEASE) -> list[Doc]:
    text = chart.template(REPO, release=release, sets=sets)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def only(docs: list[Doc], kind: str) -> Doc:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def container_args(docs: list[Doc]) -> list[str]:
    [container] = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_helm_lint_is_clean_in_both_modes() -> None:
    for values in chart.manifest_sources(REPO).values():
        out = chart.lint(REPO, values)  # --strict: a warning fails too
        assert "0 chart(s) failed" in out
        assert "[WARNING]" not in out and "[ERROR]" not in out


def test_plain_manifests_are_what_the_chart_renders() -> None:
    rendered = chart.render_manifests(REPO)
    assert {Path("deploy/manifests/cluster-wide.yaml"),
            Path("deploy/manifests/namespace-scoped.yaml")} <= set(rendered)  # fmt: skip
    committed = {p.relative_to(REPO) for p in (REPO / chart.MANIFESTS).glob("*.yaml")}
    assert committed == set(rendered), f"deploy/manifests has other files; run {REGENERATE}"
    for path, text in rendered.items():
        assert (REPO / path).read_text() == text, f"{path} differs from the chart; run {REGENERATE}"


def test_app_version_is_the_product_version() -> None:
    meta = yaml.safe_load((REPO / chart.CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["appVersion"] == project["version"]
    [doc] = [d for d in render() if d["kind"] == "Deployment"]
    [container] = doc["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/kube-nudge/kube-nudge:{project['version']}"


def test_every_value_becomes_a_flag_kube_nudge_run_accepts() -> None:
    docs = render(
        "watchNamespaces={a,b}", "sourceSelector=tier in (web)", "workloadSelector=team=x",
        "compat=true", "debounce=500ms", "maxRollouts=5/1m",
        "leaderElection.leaseDuration=20s", "leaderElection.renewDeadline=12s",
        "leaderElection.retryPeriod=3s", "log.level=debug", "metrics.port=9090",
        "customWorkloads[0].group=example.com", "customWorkloads[0].version=v1",
        "customWorkloads[0].resource=webapps", "customWorkloads[0].kind=WebApp",
        "customWorkloads[0].templatePath=spec.template", "extraArgs={--workers=8}",
    )  # fmt: skip
    args = container_args(docs)
    assert args[0] == "run"
    config = RUN.config(build_parser().parse_args(args))  # raises on a flag it rejects
    assert config.controller.namespaces == ("a", "b")
    assert config.controller.defaults.debounce == 0.5
    assert config.controller.defaults.max_rollouts == 5
    assert config.controller.defaults.compat is True
    assert config.controller.workers == 8
    assert config.metrics_addr is not None and config.metrics_addr[1] == 9090
    assert config.state_namespace == chart.NAMESPACE
    assert config.hmac_secret == "kube-nudge-hmac-key"
    assert config.lease is not None
    assert (config.lease.name, config.lease.lease_duration) == ("kube-nudge", 20.0)
    [spec] = config.custom_workloads
    known = spec.known()
    assert known is not None and known.resource.kind == "WebApp"
    # the custom resource is granted where kube-nudge watches, and nowhere else
    for role in (d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "kube-nudge"):
        assert {"apiGroups": ["example.com"], "resources": ["webapps"],
                "verbs": ["get", "list", "watch", "patch"]} in role["rules"]  # fmt: skip


def test_cluster_wide_mode_grants_through_one_cluster_role() -> None:
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget",
                            "ValidatingAdmissionPolicy",
                            "ValidatingAdmissionPolicyBinding"])  # fmt: skip
    assert not [a for a in container_args(docs) if a.startswith("--namespace")]
    state = only(docs, "Role")
    assert state["metadata"] == {**state["metadata"], "name": "kube-nudge-state",
                                 "namespace": chart.NAMESPACE}  # fmt: skip
    # its own state only: create a Secret (its key), read only that one; its Lease
    assert [(r["resources"], r.get("resourceNames"), r["verbs"]) for r in state["rules"]] == [
        (["secrets"], None, ["create"]),
        (["secrets"], ["kube-nudge-hmac-key"], ["get"]),
        (["leases"], None, ["create"]),
        (["leases"], ["kube-nudge"], ["get", "update"]),
    ]


def test_namespace_scoped_mode_grants_nothing_cluster_wide() -> None:
    cluster_wide = render()
    docs = render("watchNamespaces={team-a,team-b}")
    assert not [d for d in docs if d["kind"].startswith("Cluster")]
    # the only cluster-scoped objects restrict kube-nudge, and can be left out
    assert {d["kind"] for d in docs if "namespace" not in d["metadata"]} == {
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
    }  # fmt: skip
    without = render("watchNamespaces={team-a}", "admissionPolicy.enabled=false")
    assert [d["kind"] for d in without if "namespace" not in d["metadata"]] == []
    watched = [d for d in docs if d["metadata"]["name"] == "kube-nudge"]
    roles = {d["metadata"]["namespace"]: d for d in watched if d["kind"] == "Role"}
    bindings = {d["metadata"]["namespace"] for d in watched if d["kind"] == "RoleBinding"}
    assert set(roles) == bindings == {"team-a", "team-b"}
    for role in roles.values():  # the same rules as cluster-wide, only where it watches
        assert role["rules"] == only(cluster_wide, "ClusterRole")["rules"]
    args = container_args(docs)
    assert [a for a in args if a.startswith("--namespace")] == [
        "--namespace=team-a", "--namespace=team-b"
    ]  # fmt: skip


def test_only_the_snapshot_strategy_may_write_configmaps_and_secrets() -> None:
    writes = {"create", "patch", "delete", "update"}

    def source_writes(docs: list[Doc]) -> set[str]:
        rules = only(docs, "ClusterRole")["rules"]
        return {
            verb for rule in rules if {"configmaps", "secrets"} & set(rule["resources"])
            for verb in rule["verbs"] if verb in writes
        }  # fmt: skip

    assert source_writes(render()) == set()
    granted = render("snapshotStrategy.enabled=true")
    assert source_writes(granted) == {"create", "patch", "delete"}
    lists = {(r["apiGroups"][0], res) for r in only(granted, "ClusterRole")["rules"]
             if r["verbs"] == ["list"] for res in r["resources"]}  # fmt: skip
    assert {("apps", "replicasets"), ("apps", "controllerrevisions"), ("batch", "jobs")} <= lists


def test_the_pod_is_hardened_and_highly_available() -> None:
    docs = render()
    deployment = only(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2 and "--leader-elect" in container["args"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["resources"]["limits"]["memory"]
    [spread] = pod["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    pdb = only(docs, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": deployment["spec"]["selector"]}
    # one replica: no PDB, which would block every drain
    assert not [d for d in render("replicas=1") if d["kind"] == "PodDisruptionBudget"]


def test_service_monitor_is_optional() -> None:
    assert not [d for d in render() if d["kind"] == "ServiceMonitor"]
    monitor = only(render("metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "30s"}]  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("replica=3", "additional properties 'replica' not allowed"),
        ("watchNamespaces={Not_A_Name}", "watchNamespaces/0"),
        ("debounce=soon", "debounce"),
        ("leaderElection.enabled=false", "needs leaderElection.enabled"),
    ],
)
def test_bad_values_are_refused(bad: str, says: str) -> None:
    with pytest.raises(chart.ChartError, match=r"(?s)" + says.replace("(", r"\(")):
        render(bad)
