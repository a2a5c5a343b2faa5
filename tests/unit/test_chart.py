"""The Helm chart (deploy/helm/kube-nudge), rendered and linted by the pinned helm: lint is
clean, deploy/manifests is exactly what it renders, and what it renders is what we promise
(the controller's real flags, least-privilege RBAC per mode, a hardened pod, optional
monitoring objects that carry the chart's dashboard and alert rules as they are, a
NetworkPolicy that opens only what kube-nudge uses)."""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import shutil
import textwrap
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from kube_nudge.agent.config import build_config
from kube_nudge.agent.keys import DEFAULT_KEY_FILE
from kube_nudge.agentwire import AGENT_KEY_SECRET
from kube_nudge.app.cli import build_parser
from kube_nudge.app.run_command import RUN
from kube_nudge.runtime.http import TLS_CHECK_SECONDS
from kube_nudge.strategies.snapshot import WEBHOOK_PATH
from kube_nudge_dev import chart
from kube_nudge_dev.build import helm_binary

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "make manifests  (or: .venv/bin/kube-nudge-dev manifests)"
Doc = dict[str, Any]
# The dashboard and alert rules the chart ships (tests/unit/test_monitoring.py checks them).
DASHBOARD = REPO / chart.CHART / "monitoring" / "grafana-dashboard.json"
ALERTS = REPO / chart.CHART / "monitoring" / "alerts.yaml"


@pytest.fixture(scope="module", autouse=True)
def _helm() -> Iterator[None]:
    helm_binary()  # `make test` builds it first; a bare pytest run builds it here (minutes)
    yield


def render(*sets: str, release: str = chart.RELEASE) -> list[Doc]:
    text = chart.template(REPO, release=release, sets=sets)
    return [doc for doc in yaml.safe_load_all(text) if doc]


# The prometheus-operator's API: the chart renders its objects only where the cluster serves
# it (helm template is told with --api-versions, as a cluster's discovery tells helm install).
MONITORING_API = "monitoring.coreos.com/v1"


def render_with_monitoring_api(*sets: str, values: Path | None = None) -> list[Doc]:
    flags = [f"--values={values}"] if values else []
    text = chart.helm(
        "template", chart.RELEASE, str(chart.CHART), f"--namespace={chart.NAMESPACE}",
        f"--api-versions={MONITORING_API}", *flags, *(f"--set={s}" for s in sets), cwd=REPO,
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(text) if doc]


def values_file(values: Doc, into: Path) -> Path:
    """``values`` as a values file in ``into`` (lists of objects are awkward in --set)."""
    path = into / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render_values(values: Doc, into: Path, *sets: str) -> list[Doc]:
    text = chart.template(REPO, values_file(values, into), sets=sets)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def only(docs: list[Doc], kind: str) -> Doc:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def kinds(docs: list[Doc]) -> set[str]:
    return {d["kind"] for d in docs}


def container_args(docs: list[Doc]) -> list[str]:
    [container] = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


WEBHOOK = ("snapshotStrategy.enabled=true", "snapshotStrategy.webhook.enabled=true")
CERT_MANAGER = (*WEBHOOK, "snapshotStrategy.webhook.certManager.enabled=true",
                "snapshotStrategy.webhook.certManager.issuerRef.name=webhook-ca")  # fmt: skip
WEBHOOK_SERVICE = "kube-nudge-webhook"
WEBHOOK_SECRET = "kube-nudge-webhook-tls"
WEBHOOK_DNS_NAMES = [
    WEBHOOK_SERVICE, f"{WEBHOOK_SERVICE}.{chart.NAMESPACE}",
    f"{WEBHOOK_SERVICE}.{chart.NAMESPACE}.svc",
    f"{WEBHOOK_SERVICE}.{chart.NAMESPACE}.svc.cluster.local",
]  # fmt: skip


def named(docs: list[Doc], kind: str, name: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]


def mounted_webhook_cert(docs: list[Doc], into: Path) -> list[str]:
    """The container's args with the webhook's certificate and key written from the rendered
    Secret into ``into`` (they are mounted at /tls in the pod): `kube-nudge run` checks that
    the files exist."""
    [secret] = named(docs, "Secret", WEBHOOK_SECRET)
    for key in ("tls.crt", "tls.key"):
        (into / key).write_bytes(base64.b64decode(secret["data"][key]))
    return [a.replace("=/tls/", f"={into}/") for a in container_args(docs)]


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


def test_every_value_becomes_a_flag_kube_nudge_run_accepts(tmp_path: Path) -> None:
    docs = render(*WEBHOOK, "snapshotStrategy.webhook.port=9444",
        "watchNamespaces={a,b}", "sourceSelector=tier in (web)", "workloadSelector=team=x",
        "compat=true", "debounce=500ms", "maxRollouts=5/1m",
        "leaderElection.leaseDuration=20s", "leaderElection.renewDeadline=12s",
        "leaderElection.retryPeriod=3s", "log.level=debug", "metrics.port=9090",
        "customWorkloads[0].group=example.com", "customWorkloads[0].version=v1",
        "customWorkloads[0].resource=webapps", "customWorkloads[0].kind=WebApp",
        "customWorkloads[0].templatePath=spec.template", "extraArgs={--workers=8}",
    )  # fmt: skip
    args = mounted_webhook_cert(docs, tmp_path)
    assert args[0] == "run"
    config = RUN.config(build_parser().parse_args(args))  # raises on a flag it rejects
    assert config.webhook is not None and config.webhook.address == ("0.0.0.0", 9444)  # noqa: S104
    assert config.webhook.tls.certfile == tmp_path / "tls.crt"
    assert config.webhook.tls.keyfile == tmp_path / "tls.key"
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


def test_notifications_come_from_a_mounted_secret_and_pace_is_a_flag(tmp_path: Path) -> None:
    docs = render("notifications.existingSecret=team-hooks", "notifications.key=hooks.json",
                  "notifications.clusterName=prod eu", "maxConcurrentRollouts=5")  # fmt: skip
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert {"name": "notify", "secret": {"secretName": "team-hooks"}} in pod["volumes"]
    assert {"name": "notify", "mountPath": "/etc/kube-nudge/notify", "readOnly": True} in (
        container["volumeMounts"]
    )
    args = container["args"]
    assert "--notify-receivers-file=/etc/kube-nudge/notify/hooks.json" in args
    receivers = tmp_path / "hooks.json"
    receivers.write_text('[{"url": "https://hooks.example.com/T/B/X", "format": "slack"}]')
    args = [a.replace("/etc/kube-nudge/notify/hooks.json", str(receivers)) for a in args]
    config = RUN.config(build_parser().parse_args(args))  # raises on a flag it rejects
    assert config.controller.max_concurrent_rollouts == 5
    assert config.cluster_name == "prod eu"
    assert [r.label for r in config.receivers] == ["slack:hooks.example.com#0"]
    # Off by default: no volume, no flag.
    [default] = [d for d in render() if d["kind"] == "Deployment"]
    assert not any("notify" in a for a in default["spec"]["template"]["spec"]["containers"][0][
        "args"])  # fmt: skip


def test_cluster_wide_mode_grants_through_one_cluster_role() -> None:
    docs = render()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                            "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget",
                            "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
                            "ValidatingAdmissionPolicyBinding",
                            "ValidatingAdmissionPolicyBinding"])  # fmt: skip
    # One policy for ConfigMaps and Secrets, one for workloads, each with its binding.
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"].startswith("Validating")) == [
        "kube-nudge-own-sources-only", "kube-nudge-own-sources-only",
        "kube-nudge-workload-config-only", "kube-nudge-workload-config-only",
    ]  # fmt: skip
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


def test_argo_rollouts_get_their_rbac_and_flag_only_when_enabled() -> None:
    def rollout_rules(docs: list[Doc]) -> list[Doc]:
        return [r for r in only(docs, "ClusterRole")["rules"] if "rollouts" in r["resources"]]

    def args(docs: list[Doc]) -> list[str]:
        [container] = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
        return list(container["args"])

    assert rollout_rules(render()) == [] and "--argo-rollouts" not in args(render())
    enabled = render("argoRollouts.enabled=true")
    assert rollout_rules(enabled) == [{"apiGroups": ["argoproj.io"], "resources": ["rollouts"],
                                       "verbs": ["get", "list", "watch", "patch"]}]  # fmt: skip
    assert "--argo-rollouts" in args(enabled)
    config = RUN.config(build_parser().parse_args(args(enabled)))
    assert [spec.flag for spec in config.custom_workloads] == ["--argo-rollouts"]


def test_csi_secrets_read_the_drivers_pod_statuses_only_when_enabled() -> None:
    group = "secrets-store.csi.x-k8s.io"
    csi = {"apiGroups": [group], "resources": ["secretproviderclasspodstatuses"],
           "verbs": ["get", "list", "watch"]}  # fmt: skip

    def driver_rules(docs: list[Doc]) -> list[Doc]:
        return [r for d in docs if d["kind"] in ("ClusterRole", "Role")
                for r in d.get("rules") or [] if group in r["apiGroups"]]  # fmt: skip

    assert driver_rules(render("viewer.create=true")) == []
    assert "--csi-secrets" not in container_args(render())
    docs = render("csi.enabled=true", "viewer.create=true")
    assert driver_rules(docs) == [csi, {**csi, "verbs": ["list"]}]  # the controller; viewers
    args = container_args(docs)
    assert "--csi-secrets" in args
    config = RUN.config(build_parser().parse_args(args))  # raises on a flag it rejects
    assert config.controller.defaults.csi_secrets is True
    scoped = render("csi.enabled=true", "watchNamespaces={team-a}")
    assert driver_rules(scoped) == [csi]  # where it watches, and nowhere else


def test_analysis_queries_only_the_given_servers_with_credentials_of_its_own_namespace(
    tmp_path: Path,
) -> None:
    def template_rules(docs: list[Doc]) -> list[Doc]:
        return [r for d in docs if d["kind"] in ("ClusterRole", "Role")
                for r in d.get("rules") or [] if "analysistemplates" in r["resources"]]  # fmt: skip

    assert template_rules(render()) == []
    assert not [a for a in container_args(render()) if a.startswith("--prometheus")]
    off = render("analysis.argoTemplates=true")  # analysis off: no template is read
    assert template_rules(off) == []
    assert "--argo-analysis-templates" not in container_args(off)
    docs = render(
        "analysis.prometheusUrls={http://prometheus.monitoring:9090}",
        "analysis.credentialsSecret=prom-token",
        "analysis.argoTemplates=true",
    )
    read = ["get", "list", "watch"]  # watched: an analysis reads its template from the cache
    assert template_rules(docs) == [
        {"apiGroups": ["kube-nudge.io"], "resources": ["analysistemplates"], "verbs": read},
        {"apiGroups": ["argoproj.io"],
         "resources": ["analysistemplates", "clusteranalysistemplates"], "verbs": read},
    ]  # fmt: skip
    args = container_args(docs)
    assert "--prometheus-url=http://prometheus.monitoring:9090" in args
    assert "--argo-analysis-templates" in args
    assert "--prometheus-credentials=/etc/kube-nudge/prometheus/prom-token" in args
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "prometheus-0", "secret": {"secretName": "prom-token"}} in pod["volumes"]
    (tmp_path / "token").write_text("t0ken\n")
    given = [a if not a.startswith("--prometheus-credentials") else
             f"--prometheus-credentials={tmp_path}" for a in args]  # fmt: skip
    config = RUN.config(build_parser().parse_args(given))  # raises on a flag it rejects
    assert config.controller.argo_analysis_templates
    access = config.controller.prometheus
    assert access is not None and access.allowed == ("http://prometheus.monitoring:9090",)
    credentials = access.credentials["http://prometheus.monitoring:9090"]
    assert (credentials.token(), credentials.folder) == ("t0ken", tmp_path)


def test_each_prometheus_server_gets_the_secret_that_names_it(tmp_path: Path) -> None:
    docs = render(
        "analysis.prometheusUrls={http://a.monitoring:9090,https://b.example/prom}",
        "analysis.credentialsSecret=for-a",
        "analysis.credentialsSecrets={for-b,for-a}",
        "analysis.namespaceLabel=namespace",
    )
    args = container_args(docs)
    flags = [a for a in args if a.startswith("--prometheus-credentials")]
    assert flags == ["--prometheus-credentials=/etc/kube-nudge/prometheus/for-a",
                     "--prometheus-credentials=/etc/kube-nudge/prometheus/for-b"]  # fmt: skip
    container = only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    mounts = [(m["name"], m["mountPath"]) for m in container["volumeMounts"]
              if m["name"].startswith("prometheus")]  # fmt: skip
    assert mounts == [("prometheus-0", "/etc/kube-nudge/prometheus/for-a"),
                      ("prometheus-1", "/etc/kube-nudge/prometheus/for-b")]  # fmt: skip
    for name, url in (("for-a", "http://a.monitoring:9090/"), ("for-b", "https://b.example/prom")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "url").write_text(url)
        (tmp_path / name / "token").write_text(f"token-of-{name}")
    given = [a.replace("/etc/kube-nudge/prometheus", str(tmp_path)) for a in args]
    controller = RUN.config(build_parser().parse_args(given)).controller
    assert controller.analysis_namespace_label == "namespace"
    access = controller.prometheus
    assert access is not None
    tokens = {server: c.token() for server, c in access.credentials.items()}
    assert tokens == {"http://a.monitoring:9090": "token-of-for-a",
                      "https://b.example:443/prom": "token-of-for-b"}  # fmt: skip


def test_the_analysis_template_crd_ships_in_the_chart_and_the_plain_manifests() -> None:
    crd = yaml.safe_load((REPO / chart.CHART / "crds" / "analysistemplates.yaml").read_text())
    assert crd["metadata"]["name"] == "analysistemplates.kube-nudge.io"
    for path in (REPO / "deploy" / "manifests").glob("*.yaml"):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert crd in docs, path


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
    assert not [d for d in render_with_monitoring_api() if d["kind"] == "ServiceMonitor"]
    monitor = only(render_with_monitoring_api("metrics.serviceMonitor.enabled=true"),
                   "ServiceMonitor")  # fmt: skip
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics",
                                             "interval": "30s"}]  # fmt: skip


def test_pod_monitor_is_optional_and_scrapes_the_pods_without_the_service() -> None:
    assert "PodMonitor" not in kinds(render_with_monitoring_api())
    docs = render_with_monitoring_api(
        "metrics.podMonitor.enabled=true", "metrics.podMonitor.labels.release=prom",
        "metrics.podMonitor.interval=1m", "metrics.service.enabled=false",
    )  # fmt: skip
    assert "Service" not in kinds(docs) and "ServiceMonitor" not in kinds(docs)
    monitor = only(docs, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == chart.NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    deployment = only(docs, "Deployment")
    assert monitor["spec"]["selector"] == deployment["spec"]["selector"]
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics",
                                                       "interval": "1m"}]  # fmt: skip
    # it selects the pods, and names a port they have
    template = deployment["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"][
        "labels"].items()  # fmt: skip
    [container] = template["spec"]["containers"]
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in container["ports"]


def test_network_policy_is_optional_and_opens_only_what_kube_nudge_uses() -> None:
    assert "NetworkPolicy" not in kinds(render(*WEBHOOK))
    docs = render("networkPolicy.enabled=true", "metrics.port=9090")
    policy = only(docs, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == chart.NAMESPACE
    spec = policy["spec"]
    deployment = only(docs, "Deployment")
    assert spec["podSelector"] == deployment["spec"]["selector"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    # in: the metrics port only (the pod's port, not the Service's), from anywhere by default
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert [p["containerPort"] for p in container["ports"]] == [9090]
    assert spec["ingress"] == [{"ports": [{"port": 9090, "protocol": "TCP"}]}]
    # out: DNS over UDP and TCP, and the API server on 443 and 6443, to any destination
    dns = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
    api = {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert spec["egress"] == [dns, api]
    # with the webhook: its pod port too, from anywhere (the API server calls it)
    hooked = render(*WEBHOOK, "networkPolicy.enabled=true", "snapshotStrategy.webhook.port=9444")
    [container] = only(hooked, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {"name": "webhook", "containerPort": 9444, "protocol": "TCP"} in container["ports"]
    assert only(hooked, "NetworkPolicy")["spec"]["ingress"] == [
        {"ports": [{"port": 8080, "protocol": "TCP"}]},
        {"ports": [{"port": 9444, "protocol": "TCP"}]},
    ]  # fmt: skip
    assert only(hooked, "NetworkPolicy")["spec"]["egress"] == [dns, api]


def test_network_policy_peers_api_server_and_extra_egress_come_from_values(
    tmp_path: Path,
) -> None:
    prometheus = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
    }
    kube_dns = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    }
    receivers = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}],
                 "ports": [{"port": 443, "protocol": "TCP"}]}  # fmt: skip
    docs = render_values({"networkPolicy": {
        "enabled": True, "metricsFrom": [prometheus], "dnsTo": [kube_dns],
        "apiServer": {"cidrs": ["10.0.0.1/32", "fd00::1/128"], "ports": [6443]},
        "extraEgress": [receivers],
    }}, tmp_path)  # fmt: skip
    spec = only(docs, "NetworkPolicy")["spec"]
    assert spec["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}],
                                "from": [prometheus]}]  # fmt: skip
    assert spec["egress"] == [
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
         "to": [kube_dns]},
        {"ports": [{"port": 6443, "protocol": "TCP"}],
         "to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}}]},
        receivers,
    ]  # fmt: skip


def test_the_dashboard_config_map_carries_the_dashboard_file_as_it_is() -> None:
    assert "ConfigMap" not in kinds(render())
    docs = render("monitoring.grafanaDashboard.enabled=true",
                  "monitoring.grafanaDashboard.annotations.grafana_folder=Kubernetes")  # fmt: skip
    configmap = only(docs, "ConfigMap")
    assert configmap["metadata"]["name"] == "kube-nudge-dashboard"
    assert configmap["metadata"]["namespace"] == chart.NAMESPACE
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"  # the sidecar's default
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Kubernetes"}
    [(key, text)] = configmap["data"].items()
    assert key == "kube-nudge.json"
    assert text == DASHBOARD.read_text()  # byte for byte, so also:
    assert json.loads(text) == json.loads(DASHBOARD.read_text())
    # elsewhere (the sidecar's namespace), with another label instead of the default one
    moved = only(render("monitoring.grafanaDashboard.enabled=true",
                        "monitoring.grafanaDashboard.namespace=grafana",
                        "monitoring.grafanaDashboard.labels.grafana_dashboard=null",
                        "monitoring.grafanaDashboard.labels.dashboards=kube"),
                 "ConfigMap")  # fmt: skip
    assert moved["metadata"]["namespace"] == "grafana"
    assert "grafana_dashboard" not in moved["metadata"]["labels"]
    assert moved["metadata"]["labels"]["dashboards"] == "kube"
    assert "annotations" not in moved["metadata"]


def test_the_prometheus_rule_carries_the_alert_rules_file_groups() -> None:
    assert "PrometheusRule" not in kinds(render_with_monitoring_api())
    docs = render_with_monitoring_api(
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.labels.release=prometheus",
    )
    rule = only(docs, "PrometheusRule")
    source = yaml.safe_load(ALERTS.read_text())
    assert (rule["apiVersion"], rule["kind"]) == (source["apiVersion"], source["kind"])
    assert rule["metadata"]["name"] == "kube-nudge"
    assert rule["metadata"]["namespace"] == chart.NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    assert rule["spec"] == {"groups": source["spec"]["groups"]}
    # Prometheus's own templates in the annotations reach it untouched by Helm's
    assert "{{ $labels.stage }}" in json.dumps(rule["spec"])


def test_helm_lint_is_clean_with_every_optional_object(tmp_path: Path) -> None:
    values = values_file({
        "metrics": {"podMonitor": {"enabled": True}},
        "monitoring": {"grafanaDashboard": {"enabled": True},
                       "prometheusRule": {"enabled": True}},
        "networkPolicy": {"enabled": True, "metricsFrom": [{"podSelector": {}}],
                          "extraEgress": [{"ports": [{"port": 443, "protocol": "TCP"}]}]},
    }, tmp_path)  # fmt: skip
    docs = render_with_monitoring_api(*WEBHOOK, values=values)
    assert {"PodMonitor", "ConfigMap", "PrometheusRule", "NetworkPolicy"} <= kinds(docs)
    # (helm lint cannot be told the cluster serves the prometheus-operator's API; it reports
    # the chart's refusal as [INFO], not as a failure)
    out = chart.helm("lint", "--strict", str(chart.CHART), f"--values={values}",
                     *(f"--set={s}" for s in WEBHOOK), cwd=REPO)  # fmt: skip
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("value", "kind"),
    [("metrics.serviceMonitor.enabled", "ServiceMonitor"),
     ("metrics.podMonitor.enabled", "PodMonitor"),
     ("monitoring.prometheusRule.enabled", "PrometheusRule")],
)  # fmt: skip
def test_monitoring_objects_need_the_prometheus_operators_api(value: str, kind: str) -> None:
    """Rendered only where the cluster serves monitoring.coreos.com/v1; enabled without it,
    the install fails at once with what to do, not half-way with 'no matches for kind'."""
    with pytest.raises(chart.ChartError) as refused:
        render(f"{value}=true")
    message = str(refused.value)
    assert f"{value}: the cluster does not serve {MONITORING_API}" in message
    assert f"no {kind}: install the operator's CRDs first" in message
    assert f"--api-versions {MONITORING_API}" in message
    assert kind in kinds(render_with_monitoring_api(f"{value}=true"))


def test_the_webhook_is_opt_in_and_leaves_nothing_behind_when_off() -> None:
    for docs in (render(), render("snapshotStrategy.enabled=true")):
        assert not [d for d in docs if d["kind"] in ("MutatingWebhookConfiguration",
                                                     "Certificate", "Secret")]  # fmt: skip
        assert not named(docs, "Service", WEBHOOK_SERVICE)
        assert not [a for a in container_args(docs) if a.startswith("--webhook")]
        pod = only(docs, "Deployment")["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert "volumes" not in pod and "volumeMounts" not in container
        assert [p["name"] for p in container["ports"]] == ["metrics"]
        assert "annotations" not in only(docs, "Deployment")["spec"]["template"]["metadata"]


def test_helm_lint_is_clean_with_the_webhook_in_both_certificate_modes() -> None:
    for sets in (WEBHOOK, CERT_MANAGER, (*WEBHOOK, "watchNamespaces={team-a}")):
        out = chart.helm("lint", "--strict", str(chart.CHART), *(f"--set={s}" for s in sets),
                         cwd=REPO)  # fmt: skip
        assert "0 chart(s) failed" in out
        assert "[WARNING]" not in out and "[ERROR]" not in out


def test_the_webhook_is_registered_on_its_own_service_and_fails_open() -> None:
    docs = render(*WEBHOOK, "snapshotStrategy.webhook.timeoutSeconds=5",
                  "customWorkloads[0].group=example.com", "customWorkloads[0].version=v1",
                  "customWorkloads[0].resource=webapps",
                  "customWorkloads[0].templatePath=spec.template")  # fmt: skip
    [service] = named(docs, "Service", WEBHOOK_SERVICE)
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook",
                                         "protocol": "TCP"}]  # fmt: skip
    deployment = only(docs, "Deployment")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "webhook", "containerPort": 9443, "protocol": "TCP"} in container["ports"]
    assert [a for a in container["args"] if a.startswith("--webhook")] == [
        "--webhook-addr=:9443", "--webhook-cert-file=/tls/tls.crt",
        "--webhook-key-file=/tls/tls.key",
    ]  # fmt: skip
    [hook] = only(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["service"] == {"name": WEBHOOK_SERVICE,
                                               "namespace": chart.NAMESPACE,
                                               "path": WEBHOOK_PATH, "port": 443}  # fmt: skip
    crud = ["CREATE", "UPDATE"]
    assert hook["rules"] == [
        {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": crud, "scope": "Namespaced",
         "resources": ["deployments", "statefulsets", "daemonsets"]},
        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": crud, "scope": "Namespaced",
         "resources": ["cronjobs"]},
        {"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": crud,
         "scope": "Namespaced", "resources": ["webapps"]},
    ]  # fmt: skip
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == (
        "Ignore", "None", 5)  # fmt: skip
    assert hook["admissionReviewVersions"] == ["v1"] and hook["reinvocationPolicy"] == "Never"
    assert only(render(*WEBHOOK), "MutatingWebhookConfiguration")["webhooks"][0][
        "timeoutSeconds"] == 3  # fmt: skip
    # cluster-wide: every namespace but kube-nudge's own and kube-system
    never = {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": [chart.NAMESPACE, "kube-system"]}  # fmt: skip
    assert hook["namespaceSelector"] == {"matchExpressions": [never]}
    # namespace-scoped: only where kube-nudge watches
    scoped = render(*WEBHOOK, "watchNamespaces={team-a,team-b}")
    [hook] = only(scoped, "MutatingWebhookConfiguration")["webhooks"]
    watched = {"key": "kubernetes.io/metadata.name", "operator": "In",
               "values": ["team-a", "team-b"]}  # fmt: skip
    assert hook["namespaceSelector"] == {"matchExpressions": [watched, never]}


def test_helm_generates_the_webhook_certificate_for_the_service_without_cert_manager() -> None:
    docs = render(*WEBHOOK)
    [secret] = named(docs, "Secret", WEBHOOK_SECRET)
    assert secret["type"] == "kubernetes.io/tls"
    assert not [d for d in docs if d["kind"] == "Certificate"]
    webhooks = only(docs, "MutatingWebhookConfiguration")
    assert "cert-manager.io/inject-ca-from" not in webhooks["metadata"].get("annotations", {})
    [hook] = webhooks["webhooks"]
    assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    cert.verify_directly_issued_by(ca)  # raises unless the caBundle's CA signed it
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == WEBHOOK_DNS_NAMES
    # the pod mounts it read-only, and rolls when it changes (it is read at start)
    template = only(docs, "Deployment")["spec"]["template"]
    assert template["spec"]["volumes"] == [{"name": "webhook-tls",
                                           "secret": {"secretName": WEBHOOK_SECRET}}]  # fmt: skip
    [container] = template["spec"]["containers"]
    assert container["volumeMounts"] == [{"name": "webhook-tls", "mountPath": "/tls",
                                          "readOnly": True}]  # fmt: skip
    checksum = hashlib.sha256(secret["data"]["tls.crt"].encode()).hexdigest()
    assert template["metadata"]["annotations"] == {"checksum/webhook-tls": checksum}
    # helm template cannot look the installed Secret up: each render makes a new one
    [again] = named(render(*WEBHOOK), "Secret", WEBHOOK_SECRET)
    assert again["data"]["tls.crt"] != secret["data"]["tls.crt"]


class _SecretsOnly(BaseHTTPRequestHandler):
    """Just enough of an API server for Helm's ``lookup`` of one Secret and of namespaces:
    their discovery, a GET of the Secret if ``self.server.secret`` is set, and of the
    namespaces in ``self.server.namespaces`` (404 otherwise)."""

    server: _FakeApiServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Doc) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        self.server.gets.append(path)
        secret = self.server.secret
        if path == "/api/v1":
            self._reply(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "secrets", "singularName": "secret", "namespaced": True,
                 "kind": "Secret", "verbs": ["get"]},
                {"name": "namespaces", "singularName": "namespace", "namespaced": False,
                 "kind": "Namespace", "verbs": ["get"]},
            ]})  # fmt: skip
        elif (
            path.startswith("/api/v1/namespaces/")
            and path.count("/") == 4
            and (path.rsplit("/", 1)[1] in self.server.namespaces)
        ):
            self._reply(200, self.server.namespaces[path.rsplit("/", 1)[1]])
        elif secret is not None and path == (
            f"/api/v1/namespaces/{chart.NAMESPACE}/secrets/{secret['metadata']['name']}"
        ):
            self._reply(200, secret)
        else:
            self._reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": "NotFound", "code": 404})  # fmt: skip


class _FakeApiServer(ThreadingHTTPServer):
    secret: Doc | None = None
    namespaces: dict[str, Doc]
    gets: list[str]


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[tuple[_FakeApiServer, Path]]:
    """A fake API server on localhost and a kubeconfig for it."""
    server = _FakeApiServer(("127.0.0.1", 0), _SecretsOnly)
    server.gets = []
    server.namespaces = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake",
                      "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "users": [{"name": "fake", "user": {}}],
    }))  # fmt: skip
    try:
        yield server, kubeconfig
    finally:
        server.shutdown()
        server.server_close()


def test_an_installed_webhook_certificate_is_kept_across_upgrades(
    api_server: tuple[_FakeApiServer, Path],
) -> None:
    server, kubeconfig = api_server
    [installed] = named(render(*WEBHOOK), "Secret", WEBHOOK_SECRET)
    server.secret = installed

    def with_lookup() -> list[Doc]:
        # what helm install/upgrade do: lookup reads the cluster (helm template cannot)
        text = chart.helm(
            "template", chart.RELEASE, str(chart.CHART), f"--namespace={chart.NAMESPACE}",
            f"--kubeconfig={kubeconfig}", "--dry-run=server", *(f"--set={s}" for s in WEBHOOK),
            cwd=REPO,
        )  # fmt: skip
        return [doc for doc in yaml.safe_load_all(text) if doc]

    docs = with_lookup()
    [secret] = named(docs, "Secret", WEBHOOK_SECRET)
    assert secret["data"] == installed["data"]
    [hook] = only(docs, "MutatingWebhookConfiguration")["webhooks"]
    assert hook["clientConfig"]["caBundle"] == installed["data"]["ca.crt"]
    template = only(docs, "Deployment")["spec"]["template"]
    checksum = hashlib.sha256(installed["data"]["tls.crt"].encode()).hexdigest()
    assert template["metadata"]["annotations"] == {"checksum/webhook-tls": checksum}  # no roll
    # looked up once per render, however many objects use it
    secret_path = f"/api/v1/namespaces/{chart.NAMESPACE}/secrets/{WEBHOOK_SECRET}"
    assert server.gets.count(secret_path) == 1
    # an incomplete Secret (no CA) is replaced by a new CA and certificate
    server.secret = {**installed, "data": {k: v for k, v in installed["data"].items()
                                           if k != "ca.crt"}}  # fmt: skip
    [renewed] = named(with_lookup(), "Secret", WEBHOOK_SECRET)
    assert renewed["data"]["tls.crt"] != installed["data"]["tls.crt"]


def installed(kubeconfig: Path, *sets: str) -> list[Doc]:
    """What helm install would apply: rendered with ``lookup`` reading the (fake) cluster."""
    text = chart.helm(
        "template", chart.RELEASE, str(chart.CHART), f"--namespace={chart.NAMESPACE}",
        f"--kubeconfig={kubeconfig}", "--dry-run=server", *(f"--set={s}" for s in sets),
        cwd=REPO,
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(text) if doc]


def a_namespace(name: str, annotations: dict[str, str] | None = None) -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "annotations": annotations or {}}}  # fmt: skip


def test_namespace_scoped_mode_refuses_a_missing_namespace_before_applying_anything(
    api_server: tuple[_FakeApiServer, Path],
) -> None:
    server, kubeconfig = api_server
    server.namespaces = {n: a_namespace(n) for n in (chart.NAMESPACE, "team-a")}
    scoped = "watchNamespaces={team-a,team-b,team-c}"
    with pytest.raises(chart.ChartError, match=r"namespace\(s\) team-b, team-c not found"):
        installed(kubeconfig, scoped)  # helm renders everything before it applies anything
    # all there: installs, and creates no namespace
    server.namespaces["team-b"] = server.namespaces["team-c"] = a_namespace("team-b")
    assert "Namespace" not in kinds(installed(kubeconfig, scoped))
    # helm template cannot look: nothing is checked
    assert "Namespace" not in kinds(render(scoped))
    # cluster-wide: nothing looked up
    server.gets.clear()
    installed(kubeconfig)
    assert not [p for p in server.gets if p.startswith("/api/v1/namespaces/")]


def test_create_namespaces_creates_the_missing_ones_and_keeps_them(
    api_server: tuple[_FakeApiServer, Path],
) -> None:
    server, kubeconfig = api_server
    ours = {"meta.helm.sh/release-name": chart.RELEASE,
            "meta.helm.sh/release-namespace": chart.NAMESPACE}  # fmt: skip
    server.namespaces = {
        chart.NAMESPACE: a_namespace(chart.NAMESPACE),
        "team-a": a_namespace("team-a"),  # someone else's: left alone
        "team-b": a_namespace("team-b", ours),  # made by this release
    }
    docs = installed(kubeconfig, "watchNamespaces={team-a,team-b,team-c}", "createNamespaces=true")
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    assert [d["metadata"]["name"] for d in namespaces] == ["team-b", "team-c"]
    for doc in namespaces:  # helm uninstall leaves them, and the workloads in them
        assert doc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    # helm template: every listed one
    offline = render("watchNamespaces={team-a,team-b}", "createNamespaces=true")
    assert [d["metadata"]["name"] for d in offline if d["kind"] == "Namespace"] == [
        "team-a", "team-b"]  # fmt: skip
    with pytest.raises(chart.ChartError, match="createNamespaces needs watchNamespaces"):
        render("createNamespaces=true")


def test_cert_manager_issues_the_webhook_certificate_and_injects_its_ca() -> None:
    docs = render(
        *CERT_MANAGER, "snapshotStrategy.webhook.certManager.issuerRef.kind=ClusterIssuer"
    )
    assert not named(docs, "Secret", WEBHOOK_SECRET)
    certificate = only(docs, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["metadata"]["namespace"] == chart.NAMESPACE
    assert certificate["spec"] == {
        "secretName": WEBHOOK_SECRET,
        "dnsNames": WEBHOOK_DNS_NAMES,
        "issuerRef": {"name": "webhook-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
    }
    webhooks = only(docs, "MutatingWebhookConfiguration")
    assert webhooks["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{chart.NAMESPACE}/{certificate['metadata']['name']}"
    }
    [hook] = webhooks["webhooks"]
    assert "caBundle" not in hook["clientConfig"]
    template = only(docs, "Deployment")["spec"]["template"]
    assert template["spec"]["volumes"] == [{"name": "webhook-tls",
                                           "secret": {"secretName": WEBHOOK_SECRET}}]  # fmt: skip
    assert "annotations" not in template["metadata"]  # cert-manager's renewals roll nothing


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("replica=3", "additional properties 'replica' not allowed"),
        ("maxConcurrentRollouts=-1", "maxConcurrentRollouts"),
        ("watchNamespaces={Not_A_Name}", "watchNamespaces/0"),
        ("debounce=soon", "debounce"),
        ("leaderElection.enabled=false", "needs leaderElection.enabled"),
        ("leaderElection.leaseDuration=8s", "renewDeadline 10s < leaseDuration 8s does not hold"),
        ("debounce=2h", 'debounce "2h": want a duration from 0 to 1h'),
        ("maxRollouts=3/25h", 'maxRollouts\' window "25h": want a duration from 1s to 24h'),
        ("podDisruptionBudget.minAvailable=2", "would block every node drain"),
        (
            "snapshotStrategy.enabled=true snapshotStrategy.webhook.enabled=true "
            "snapshotStrategy.webhook.port=8080",
            "metrics.port and snapshotStrategy.webhook.port are both 8080",
        ),
        ("snapshotStrategy.webhook.enabled=true", "webhook.enabled needs snapshotStrategy.enabled"),
        ("snapshotStrategy.webhook.timeoutSeconds=31", "timeoutSeconds"),
        (
            "snapshotStrategy.enabled=true snapshotStrategy.webhook.enabled=true "
            "snapshotStrategy.webhook.certManager.enabled=true",
            "issuerRef.name is required",
        ),
        ("networkPolicy.enabled=yes", "/networkPolicy/enabled': got string, want boolean"),
        ("networkPolicy.egress=[]", "additional properties 'egress' not allowed"),
        ("networkPolicy.apiServer.cidrs={10.0.0.1}", "/networkPolicy/apiServer/cidrs/0"),
        ("networkPolicy.apiServer.ports=null", "missing property 'ports'"),
        ("networkPolicy.apiServer.ports={70000}", "/networkPolicy/apiServer/ports/0"),
        (
            "networkPolicy.metricsFrom[0].namespaceSelectors.matchLabels.team=mon",
            "additional properties 'namespaceSelectors' not allowed",
        ),
        ("metrics.podMonitor.interval=1.5s", "/metrics/podMonitor/interval"),
        (
            "metrics.podMonitor.enabled=true metrics.serviceMonitor.enabled=true",
            "enable one of metrics.serviceMonitor and metrics.podMonitor",
        ),
        ("monitoring.prometheusRule.enabled=on", "/monitoring/prometheusRule/enabled"),
        ("monitoring.grafanaDashboard.namespace=Not_A_Name", "grafanaDashboard/namespace"),
        ("agent.rbac.serviceAccounts[0].namespace=team-a", "missing property 'name'"),
        (
            "agent.rbac.serviceAccounts[0].namespace=Team_A agent.rbac.serviceAccounts[0].name=w",
            "/agent/rbac/serviceAccounts/0/namespace",
        ),
        (
            "agent.rbac.serviceAccounts[0].namespace=a agent.rbac.serviceAccounts[0].name=w'x",
            "/agent/rbac/serviceAccounts/0/name",
        ),
        ("agent.rbac.serviceAccount=web", "additional properties 'serviceAccount' not allowed"),
        (
            "agent.rbac.serviceAccounts[0].namespace=a agent.rbac.serviceAccounts[0].name=w "
            "agent.rbac.serviceAccounts[1].namespace=a agent.rbac.serviceAccounts[1].name=w",
            "/agent/rbac/serviceAccounts': items at 0 and 1 are equal",
        ),
    ],
)
def test_bad_values_are_refused(bad: str, says: str) -> None:
    with pytest.raises(chart.ChartError, match=r"(?s)" + says.replace("(", r"\(")):
        render(*bad.split(" "))


# The flag each value becomes (deployment.yaml), for the values whose ranges the chart must
# share with `kube-nudge run` (its checks: src/kube_nudge/app/run_command.py).
_FLAG_OF = {"debounce": "--debounce", "maxRollouts": "--max-rollouts",
            "maxConcurrentRollouts": "--max-concurrent-rollouts",
            "leaseDuration": "--lease-duration", "renewDeadline": "--renew-deadline",
            "retryPeriod": "--retry-period", "clusterName": "--cluster-name"}  # fmt: skip


def flags_for(values: Doc) -> list[str]:
    """The flags ``values`` become, as `kube-nudge run` would get them."""
    flags = [f"--namespace={n}" for n in values.get("watchNamespaces", [])]
    for section in (values, values.get("leaderElection", {}), values.get("notifications", {})):
        flags += [f"{_FLAG_OF[k]}={v}" for k, v in section.items() if k in _FLAG_OF and v != ""]
    return flags


def _case(values: Doc, accepted: bool) -> Any:
    return pytest.param(values, accepted, id=json.dumps(values, ensure_ascii=False)[:60])


def _cases(key: str, good: list[Any], bad: list[Any]) -> list[Any]:
    return [_case({key: v}, True) for v in good] + [_case({key: v}, False) for v in bad]


def _timings(good: list[Doc], bad: list[Doc]) -> list[Any]:
    return [_case({"leaderElection": t}, True) for t in good] + [
        _case({"leaderElection": t}, False) for t in bad
    ]


AGREEMENT = [
    *_cases("debounce", ["auto", "0", "500ms", "1.5s", ".5s", "+2s", "1m30s", "3600s", "1h"],
            ["-1s", "1h1s", "2h", "inf", "nan", "soon", "5", "1e3s", "2 s", "99999999999999h",
             "Auto", "auto "]),
    *_cases("maxRollouts", ["3/5m", "1/1s", "03/5m", "1000/24h", "5/1m30s"],
            ["0/5m", "1001/5m", "3/banana", "3/500ms", "3/24h1s", "3/-5m", "3", "-3/5m",
             "3/inf", "x/5m", "3/5m/1h", "1e3/5m"]),
    *_cases("maxConcurrentRollouts", [0, 1, 100000], [-1, 100001]),
    *_cases("watchNamespaces", [["team-a"], ["a" * 63, "b"], ["0a"]],
            [["a" * 64], ["Team-A"], ["-a"], ["a-"], ["a_b"], ["a.b"], [""],
             ["team-a", "team-a"]]),
    *_timings(
        [{"leaseDuration": "20s", "renewDeadline": "12s", "retryPeriod": "3s"},
         {"leaseDuration": "1s", "renewDeadline": "500ms", "retryPeriod": "100ms"},
         {"leaseDuration": "1h", "renewDeadline": "59m", "retryPeriod": "1m"},
         {"leaseDuration": "30s"}, {"retryPeriod": "5s"}],
        [{"leaseDuration": "5s"}, {"renewDeadline": "15s"}, {"retryPeriod": "10s"},
         {"leaseDuration": "500ms", "renewDeadline": "400ms", "retryPeriod": "200ms"},
         {"retryPeriod": "50ms"}, {"leaseDuration": "1h1s"}, {"leaseDuration": "-15s"},
         {"renewDeadline": "inf"}, {"leaseDuration": "15"}, {"retryPeriod": "0"}]),
    *_cases("notifications", [{"clusterName": "prod eu"}, {"clusterName": "x" * 100}],
            [{"clusterName": "x" * 101}, {"clusterName": "a\nb"}, {"clusterName": "a\tb"}]),
]  # fmt: skip


@pytest.mark.parametrize(("values", "accepted"), AGREEMENT)
def test_the_chart_refuses_what_kube_nudge_run_refuses(
    values: Doc, accepted: bool, tmp_path: Path
) -> None:
    """values.schema.json and the chart's checks agree with the controller's flag parser:
    a value the chart installs becomes flags `kube-nudge run` accepts, and one it refuses
    would have crash-looped the pods."""
    try:
        RUN.config(build_parser().parse_args(["run", *flags_for(values)]))
    except ValueError:
        controller = False
    else:
        controller = True
    try:
        docs = render_values(values, tmp_path)
    except chart.ChartError:
        helm = False
    else:
        helm = True
        RUN.config(build_parser().parse_args(container_args(docs)))  # what the pod runs
    assert (helm, controller) == (accepted, accepted)


def test_pods_are_evicted_never_deleted() -> None:
    """kube-nudge.io/pod-selector replaces pods through the Eviction API only, so
    PodDisruptionBudgets hold; the budgets are read, never written."""
    for docs in (render(), render("watchNamespaces={team-a}")):
        rules = next(d for d in docs if d["kind"] in ("ClusterRole", "Role")
                     and d["metadata"]["name"] == "kube-nudge")["rules"]  # fmt: skip
        pods = {(resource, verb) for rule in rules if rule["apiGroups"] == [""]
                for resource in rule["resources"] if resource.startswith("pods")
                for verb in rule["verbs"]}  # fmt: skip
        assert ("pods/eviction", "create") in pods
        assert not {("pods", "delete"), ("pods", "deletecollection")} & pods
        budgets = [r["verbs"] for r in rules if "poddisruptionbudgets" in r["resources"]]
        assert budgets == [["list"]]


AGENT_ACCOUNTS = {"agent": {"rbac": {"serviceAccounts": [
    {"namespace": "team-a", "name": "web"}, {"namespace": "team-b", "name": "api"},
    {"namespace": "team-a", "name": "batch"},
]}}}  # fmt: skip
AGENT_USERS = ["system:serviceaccount:team-a:batch", "system:serviceaccount:team-a:web",
               "system:serviceaccount:team-b:api"]  # fmt: skip
AGENT_POLICY = "kube-nudge-agent-own-pod-only"


def agent_docs(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["metadata"]["name"].startswith("kube-nudge-agent")]


def test_the_agent_grant_is_off_by_default() -> None:
    for docs in (render(), render("watchNamespaces={team-a}"), render("hotStrategy.enabled=true")):
        assert agent_docs(docs) == []


def test_the_agent_grant_is_a_role_per_namespace_narrowed_by_a_policy(tmp_path: Path) -> None:
    docs = render_values(AGENT_ACCOUNTS, tmp_path)
    granted = agent_docs(docs)
    roles = {d["metadata"]["namespace"]: d for d in granted if d["kind"] == "Role"}
    bindings = {d["metadata"]["namespace"]: d for d in granted if d["kind"] == "RoleBinding"}
    assert set(roles) == set(bindings) == {"team-a", "team-b"}
    for role in roles.values():  # patch on pods, nothing else
        assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    for ns, binding in bindings.items():
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": "kube-nudge-agent"}  # fmt: skip
        assert {s["namespace"] for s in binding["subjects"]} == {ns}
    assert [s["name"] for s in bindings["team-a"]["subjects"]] == ["batch", "web"]
    assert [s["name"] for s in bindings["team-b"]["subjects"]] == ["api"]
    # The policy: UPDATE of pods by exactly those users, denied unless it is the token's pod
    # and only the agent's annotations change.
    policies = [d for d in granted if d["kind"].startswith("ValidatingAdmissionPolicy")]
    assert {(d["kind"], d["metadata"]["name"]) for d in policies} == {
        ("ValidatingAdmissionPolicy", AGENT_POLICY),
        ("ValidatingAdmissionPolicyBinding", AGENT_POLICY),
    }  # fmt: skip
    policy = only(policies, "ValidatingAdmissionPolicy")["spec"]
    binding = only(policies, "ValidatingAdmissionPolicyBinding")["spec"]
    assert binding == {"policyName": AGENT_POLICY, "validationActions": ["Deny"]}
    assert policy["failurePolicy"] == "Fail"
    assert policy["matchConstraints"]["resourceRules"] == [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods"],
    }]  # fmt: skip
    [condition] = policy["matchConditions"]
    users = ", ".join(f"'{u}'" for u in AGENT_USERS)
    assert condition["expression"] == f"request.userInfo.username in [{users}]"
    cel = json.dumps(policy)
    for needle in ("authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid",
                   "object.metadata.name", "object.metadata.uid", "kube-nudge.io/loaded-hash",
                   "kube-nudge.io/loaded-at", "kube-nudge.io/reload-failed-at",
                   "object.spec == oldObject.spec", "ownerReferences", "finalizers",
                   "bound to no pod"):  # fmt: skip
        assert needle in cel, needle
    assert all(v["reason"] == "Forbidden" for v in policy["validations"])
    # Without the admission policy: the same grant, no policy (and nothing cluster-scoped).
    plain = agent_docs(render_values(AGENT_ACCOUNTS, tmp_path, "admissionPolicy.enabled=false"))
    assert sorted(d["kind"] for d in plain) == ["Role", "Role", "RoleBinding", "RoleBinding"]
    # The controller's own grants do not change.
    without = [d for d in render() if not d["metadata"]["name"].startswith("kube-nudge-agent")]
    assert [d for d in docs if d not in granted] == without
    out = chart.lint(REPO, values_file(AGENT_ACCOUNTS, tmp_path))
    assert "0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out


def rendered_notes(into: Path, values: Doc, *sets: str) -> str:
    """The chart's NOTES.txt as helm renders it after an install (``helm template`` leaves
    NOTES out: a copy of the chart carries it in a document of its own)."""
    copy = into / "chart"
    shutil.copytree(REPO / chart.CHART, copy)
    notes = (copy / "templates" / "NOTES.txt").read_text()
    (copy / "templates" / "_notes.tpl").write_text(
        '{{- define "test.notes" -}}\n' + notes + "{{- end -}}\n")  # fmt: skip
    (copy / "templates" / "zz-notes.yaml").write_text(
        'kind: Notes\nmetadata: {name: notes}\ntext: |\n{{ include "test.notes" . | indent 2 }}\n'
    )
    flags = [f"--values={values_file(values, into)}", *(f"--set={s}" for s in sets)]
    text = chart.helm("template", chart.RELEASE, str(copy), f"--namespace={chart.NAMESPACE}",
                      "--show-only=templates/zz-notes.yaml", *flags, cwd=REPO)  # fmt: skip
    return str(yaml.safe_load(text)["text"])


def snippet(text: str) -> Doc:
    """The indented pod spec snippet in ``text`` (NOTES) or docs/reload.md's YAML block with
    the sidecar, parsed."""
    if "```yaml\n# the app's pod template spec" in text:
        block = text.split("```yaml\n# the app's pod template spec", 1)[1].split("```", 1)[0]
    else:
        block = text.split("\n\n      shareProcessNamespace", 1)[1]
        block = textwrap.dedent("      shareProcessNamespace" + block)
    parsed = yaml.safe_load(block)
    assert isinstance(parsed, dict)
    return parsed


def sidecar(spec: Doc) -> Doc:
    [found] = [c for c in spec["containers"] if c["name"] == "kube-nudge-agent"]
    return dict(found)


def test_notes_print_the_sidecar_with_the_charts_image_when_the_grant_is_on(
    tmp_path: Path,
) -> None:
    assert "kube-nudge agent" not in rendered_notes(tmp_path / "off", {})
    notes = rendered_notes(tmp_path / "on", AGENT_ACCOUNTS)
    assert "team-a/web, team-b/api, team-a/batch" in notes and AGENT_POLICY in notes
    spec = snippet(notes)
    assert spec["shareProcessNamespace"] is True
    container = sidecar(spec)
    assert container["image"] == only(render(), "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["image"]  # fmt: skip
    args = container["args"]
    assert args[0] == "agent"
    config = build_config(build_parser().parse_args(args))  # raises on a flag it rejects
    assert config.dirs == ("/etc/app",) and config.listen is not None
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": config.listen[1]}
    # The config it watches, and the namespace's agent key where the agent reads it by default
    # (optional: the pod starts before the Secret exists; the agent then picks it up).
    assert container["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/app", "readOnly": True},
        {"name": "kube-nudge-agent-key", "mountPath": posixpath.dirname(DEFAULT_KEY_FILE),
         "readOnly": True},
    ]  # fmt: skip
    assert spec["volumes"] == [{"name": "kube-nudge-agent-key", "secret": {
        "secretName": AGENT_KEY_SECRET, "optional": True}}]  # fmt: skip
    for ns in ("team-a", "team-b"):  # how to make that Secret, in each namespace
        assert f"kubectl -n {ns} create secret generic {AGENT_KEY_SECRET} " in notes
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert fields == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert container["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["resources"]["limits"]["memory"]
    # agent.image, and without the policy the notes say what the grant then allows
    image = ("agent.image.repository=r.example/kn", "agent.image.tag=v9")
    other = rendered_notes(tmp_path / "image", AGENT_ACCOUNTS, *image,
                           "admissionPolicy.enabled=false")  # fmt: skip
    assert sidecar(snippet(other))["image"] == "r.example/kn:v9"
    assert "any pod of\ntheir namespace" in other and AGENT_POLICY not in other
    # The documented sidecar (docs/reload.md) is the same but for the image and the app's uid.
    documented = sidecar(snippet((REPO / "docs" / "reload.md").read_text()))
    for c in (documented, container):
        c.pop("image")
        c["securityContext"] = {k: v for k, v in c["securityContext"].items() if k != "runAsUser"}
    assert documented == container


def test_a_default_install_says_its_image_is_not_published(tmp_path: Path) -> None:
    """The default image.repository names no published image: NOTES says so first, with
    how to build and push one; with a repository of one's own, no warning."""
    default = rendered_notes(tmp_path / "default", {})
    assert default.startswith("WARNING: no kube-nudge image is published at ghcr.io/")
    assert "make image" in default and "--set image.repository=" in default
    own = rendered_notes(tmp_path / "own", {"image": {"repository": "registry.example/kn"}})
    assert "WARNING" not in own
    assert own.startswith("kube-nudge ")


def test_helm_show_readme_gives_the_charts_readme() -> None:
    text = chart.helm("show", "readme", str(chart.CHART), cwd=REPO)
    assert text.strip() == (REPO / chart.CHART / "README.md").read_text().strip()
    flat = " ".join(text.split())
    assert "helm install kube-nudge deploy/helm/kube-nudge" in flat
    assert "helm uninstall kube-nudge" in flat
    # what uninstall leaves, in the words of the install page (docs/install.md)
    kept = ("its Lease (inert once no replica renews it) and its key Secret "
            "`<release>-kube-nudge-hmac-key`, kept")  # fmt: skip
    assert kept in flat and kept in " ".join((REPO / "docs" / "install.md").read_text().split())
    # the values it names are the chart's
    values = yaml.safe_load((REPO / chart.CHART / "values.yaml").read_text())
    for path in ("watchNamespaces", "createNamespaces", "debounce", "maxRollouts",
                 "maxConcurrentRollouts", "snapshotStrategy", "hotStrategy",
                 "agent.rbac.serviceAccounts", "metrics.serviceMonitor", "metrics.podMonitor",
                 "monitoring.prometheusRule", "monitoring.grafanaDashboard", "networkPolicy",
                 "admissionPolicy.enabled", "leaderElection.retryPeriod"):  # fmt: skip
        node = values
        for key in path.split("."):
            node = node[key]  # KeyError: the chart's README names a value the chart lacks
        assert f"`{path.rsplit('.', 1)[-1]}" in text or f"`{path}" in text, path


def test_notes_and_readme_say_what_the_code_does_on_a_certificate_renewal(
    tmp_path: Path,
) -> None:
    """The webhook's server looks for renewed files every TLS_CHECK_SECONDS and loads them
    into the live TLS context (runtime/http.py): no restart, in NOTES as in docs/install.md."""
    said = (f"kube-nudge loads a renewed certificate within {TLS_CHECK_SECONDS:g} s of the "
            "kubelet updating the mounted Secret, without a restart")  # fmt: skip
    notes = " ".join(rendered_notes(tmp_path, {}, *CERT_MANAGER).split())
    assert said in notes
    assert "restart kube-nudge" not in notes
    assert said in " ".join((REPO / "docs" / "install.md").read_text().split())


def test_the_viewer_role_reads_what_status_and_wait_read_and_no_secret() -> None:
    assert not [d for d in render() if d["metadata"]["name"] == "kube-nudge-viewer"]
    for mode in ((), ("watchNamespaces={team-a}",)):
        [viewer] = named(render("viewer.create=true", *mode), "ClusterRole", "kube-nudge-viewer")
        grants = {(group, resource, verb) for rule in viewer["rules"]
                  for group in rule["apiGroups"] for resource in rule["resources"]
                  for verb in rule["verbs"]}  # fmt: skip
        assert grants == {
            ("apps", "deployments", "get"), ("apps", "deployments", "list"),
            ("apps", "statefulsets", "get"), ("apps", "statefulsets", "list"),
            ("apps", "daemonsets", "get"), ("apps", "daemonsets", "list"),
            ("batch", "cronjobs", "get"), ("batch", "cronjobs", "list"),
            ("", "pods", "list"), ("", "configmaps", "get"),
        }  # fmt: skip
        assert not [r for r in viewer["rules"] if "resourceNames" in r]
