"""The Grafana dashboard and the alert rules in the chart's monitoring/ directory (the chart
ships them as optional objects; tests/unit/test_chart.py checks those): well-formed, and every
metric they query is one the controller really exports (a renamed metric or a typo in a panel
fails here, not silently as an empty graph or an alert that can never fire)."""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from kube_nudge.runtime.metrics import Metrics
from kube_nudge_dev.build import promtool_binary
from tests.monitoring_support import (
    ALERTS,
    STRING,
    dashboard,
    dashboard_exprs,
    metric_names,
    panels,
    rules,
)

# Series Prometheus adds itself to every scrape, not the controller.
SCRAPE_SERIES = frozenset({"up"})


@cache
def exported() -> frozenset[str]:
    """Every sample name the controller's /metrics shows once each labelled metric has a
    child: ``_total``/``_created`` of counters, ``_bucket``/``_sum``/``_count`` of
    histograms, the ``process_*`` ones."""
    metrics = Metrics()
    for instrument in vars(metrics).values():
        if isinstance(instrument, MetricWrapperBase) and instrument._labelnames:
            instrument.labels(*("x" for _ in instrument._labelnames))
    body, _ = metrics.render()
    return frozenset(
        sample.name
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    )


def unknown_names(expr: str) -> set[str]:
    return metric_names(expr) - exported() - SCRAPE_SERIES


def test_tokenizer_finds_metric_names_and_nothing_else() -> None:
    expr = (
        "histogram_quantile(0.9, sum by (le) (rate(kube_nudge_reconcile_duration_seconds_bucket"
        '{namespace="$namespace", job=~"$job"}[$__rate_interval])))'
        " and on (namespace, pod) (kube_nudge_leader == 1) > 0.5"
    )
    assert metric_names(expr) == {
        "kube_nudge_reconcile_duration_seconds_bucket",
        "kube_nudge_leader",
    }


def test_exported_names_are_what_prometheus_client_renders() -> None:
    names = exported()
    assert "kube_nudge_nudges_total" in names
    assert "kube_nudge_reconcile_duration_seconds_bucket" in names
    assert "kube_nudge_leader" in names
    assert "kube_nudge_nudges" not in names  # counters only ever appear with _total


def test_dashboard_structure() -> None:
    doc = dashboard()
    assert doc["uid"] == "kube-nudge"
    assert 36 <= doc["schemaVersion"] <= 41
    variables = {var["name"]: var for var in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"namespace", "job"} <= variables.keys()
    ids = [panel["id"] for panel in panels(doc)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(doc):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert 'namespace="$namespace"' in target["expr"], panel["title"]
            assert 'job=~"$job"' in target["expr"], panel["title"]


def test_dashboard_covers_every_controller_metric() -> None:
    """Each kube_nudge_ metric family except the opt-in audit ones has a panel."""
    used = {name for _, expr in dashboard_exprs(dashboard()) for name in metric_names(expr)}
    families = {re.sub(r"_(total|bucket|sum|count|created)$", "", n) for n in exported()}
    wanted = {f for f in families if f.startswith("kube_nudge_") and "_audit_" not in f}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in used}
    assert wanted - shown == set()
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total"} <= used


@pytest.mark.parametrize(("title", "expr"), dashboard_exprs(dashboard()), ids=lambda v: str(v)[:40])
def test_dashboard_queries_only_exported_metrics(title: str, expr: str) -> None:
    assert metric_names(expr), f"{title}: no metric in {expr!r}"
    assert unknown_names(expr) == set(), f"panel {title!r} queries metrics /metrics lacks"


def test_a_typo_in_a_panel_is_caught() -> None:
    _, expr = dashboard_exprs(dashboard())[0]
    broken = expr.replace("kube_nudge_", "kube_nuge_", 1)
    assert unknown_names(broken)


def test_alerts_are_a_prometheus_rule() -> None:
    doc = yaml.safe_load(ALERTS.read_text())
    assert doc["apiVersion"] == "monitoring.coreos.com/v1"
    assert doc["kind"] == "PrometheusRule"
    assert doc["metadata"]["name"] == "kube-nudge"
    names = [rule["alert"] for rule in rules()]
    assert len(names) == len(set(names))
    assert {
        "KubeNudgeDown",
        "KubeNudgeNoLeader",
        "KubeNudgeErrors",
        "KubeNudgeWatchRestarts",
        "KubeNudgeWorkloadsHeld",
        "KubeNudgeWorkloadKindUnavailable",
    } <= set(names)


def _balanced(expr: str) -> bool:
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for char in STRING.sub('""', expr):
        if char in "([{":
            stack.append(char)
        elif char in closing and (not stack or stack.pop() != closing[char]):
            return False
    return not stack


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
def test_alert_rule_shape(rule: dict[str, Any]) -> None:
    assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
    assert re.fullmatch(r"[A-Z][A-Za-z]+", rule["alert"])
    assert re.fullmatch(r"\d+[smh]", rule["for"])
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    assert rule["annotations"]["summary"].strip()
    assert rule["annotations"]["description"].strip()
    assert _balanced(rule["expr"]), rule["expr"]
    assert rule["expr"].count('"') % 2 == 0, rule["expr"]
    assert unknown_names(rule["expr"]) == set(), rule["alert"]


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    """The rules pass promtool's own check (the pinned promtool: `make test` builds it
    first; a bare pytest run builds it here, minutes; $PROMTOOL points at another)."""
    promtool = os.environ.get("PROMTOOL") or str(promtool_binary())
    rules_file = tmp_path / "kube-nudge-rules.yaml"
    rules_file.write_text(yaml.safe_dump(yaml.safe_load(ALERTS.read_text())["spec"]))
    result = subprocess.run(
        [promtool, "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _held_alert_test(tmp_path: Path, states: dict[str, int]) -> tuple[dict[str, Any], Path]:
    """A promtool unit test: the leader reports ``states`` (held workloads by state) for two
    hours; what KubeNudgeWorkloadsHeld fires after 90 minutes."""
    [rule] = [r for r in rules() if r["alert"] == "KubeNudgeWorkloadsHeld"]
    rules_file = tmp_path / "kube-nudge-rules.yaml"
    rules_file.write_text(yaml.safe_dump(yaml.safe_load(ALERTS.read_text())["spec"]))
    where = 'job="kube-nudge", namespace="kube-nudge", pod="kube-nudge-0"'
    series = [{"series": f"kube_nudge_leader{{{where}}}", "values": "1x120"}]
    series += [
        {"series": f'kube_nudge_workloads{{{where}, state="{state}"}}', "values": f"{count}x120"}
        for state, count in states.items()
    ]  # fmt: skip
    alerting = {state: count for state, count in states.items() if state in _PROBLEM_HOLDS}

    def annotation(text: str, state: str) -> str:
        return text.replace("{{ $value }}", str(alerting[state])).replace(
            "{{ $labels.state }}", state
        )

    expected = [
        {"exp_labels": {"severity": "warning", "namespace": "kube-nudge", "job": "kube-nudge",
                        "state": state},
         "exp_annotations": {key: annotation(text, state)
                             for key, text in rule["annotations"].items()}}
        for state in alerting
    ]  # fmt: skip
    test = {
        "rule_files": [rules_file.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": [
            {"eval_time": "90m", "alertname": "KubeNudgeWorkloadsHeld", "exp_alerts": expected},
        ]}],
    }  # fmt: skip
    return test, rules_file


# Holds a person must look at; the others are the release working as configured.
_PROBLEM_HOLDS = ("held-missing", "held-flapping", "held-invalid", "held-refused")
_INTENDED_HOLDS = ("held-approval", "held-window", "held-order", "held-turn",
                   "held-rolled-back", "held-line-stopped")  # fmt: skip


@pytest.mark.parametrize(
    "states",
    [
        {state: 3 for state in _INTENDED_HOLDS},
        {"held-approval": 4, "held-window": 2, "held-missing": 1, "held-refused": 2},
    ],
    ids=["intended-holds-only", "intended-and-problem-holds"],
)
def test_the_held_alert_fires_on_problems_not_on_intended_holds(
    tmp_path: Path, states: dict[str, int]
) -> None:
    """promtool's rule unit test: KubeNudgeWorkloadsHeld fires for held-missing and the
    other problems, never for a workload awaiting approval or its rollout window."""
    promtool = os.environ.get("PROMTOOL") or str(promtool_binary())
    test, _ = _held_alert_test(tmp_path, states)
    test_file = tmp_path / "held-test.yaml"
    test_file.write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [promtool, "test", "rules", test_file.name],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
