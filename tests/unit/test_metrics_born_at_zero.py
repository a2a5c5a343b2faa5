"""Counters are born at zero: every series an alert rule or a dashboard panel reads is in the
exposition of a freshly started controller, before any event.

A counter whose series appears only at its first event is born at 1, and Prometheus's
``increase()``/``rate()`` see no increase in it: the first failed rollout after each start
would never fire KubeNudgeRolloutFailed (issue 36). tests/integration/test_alerts.py shows
the same against a real Prometheus and a real ``kube-nudge run``."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.resources import Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, registry
from kube_nudge.model.decide import HOLD_REASONS
from kube_nudge.notifications.delivery import DROP_REASONS, FAIL_REASONS, NotifierHooks
from kube_nudge.notifications.model import DEFAULT_KINDS, Receiver
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.registry import model_extensions
from tests.monitoring_support import TARGET_LABELS, dashboard, dashboard_exprs, rules, selectors

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"
WIDGET = WorkloadKind(Resource("example.com", "v1", "widgets", "Widget"), ("spec", "template"))
RECEIVER = Receiver("https://hooks.example.com/T0KEN", format="slack")
#: Series Prometheus makes itself for each target, not the controller.
SCRAPE_SERIES = frozenset({"up"})

Series = list[tuple[str, dict[str, str], float]]
"""(name, labels, value) of each sample."""


async def fresh_series(tmp_path: Path) -> Series:
    """(name, labels) of every sample a controller exports before any event: watching the
    built-in kinds and one ``--workload`` kind, with one notification receiver."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    client = KubeClient.from_config(kubeconfig)
    try:
        metrics = Metrics()
        options = ControllerOptions(kinds=registry([WIDGET]))
        Controller(client, options, hmac_key=b"k" * 32, metrics=metrics,
                   recorder=EventRecorder(client))  # fmt: skip
        NotifierHooks.from_counters(
            metrics.notifications_sent, metrics.notifications_failed,
            metrics.notifications_dropped, receivers=(RECEIVER,),
        )  # fmt: skip
        body, _ = metrics.render()
    finally:
        await client.aclose()
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    ]


@pytest.fixture(scope="module")
async def fresh(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Series]:
    yield await fresh_series(tmp_path_factory.mktemp("fresh"))


def _unread(expr: str, series: Series) -> list[str]:
    """The selectors of ``expr`` that select no series of ``series``."""
    return [
        str(selector)
        for selector in selectors(expr)
        if selector.name not in SCRAPE_SERIES
        and not any(selector.matches(n, labels, ignore=TARGET_LABELS) for n, labels, _ in series)
    ]


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
async def test_every_series_a_rule_reads_exists_before_any_event(
    rule: dict[str, str], fresh: Series
) -> None:
    assert _unread(rule["expr"], fresh) == []


@pytest.mark.parametrize(("title", "expr"), dashboard_exprs(dashboard()), ids=lambda v: str(v)[:40])
async def test_every_series_a_panel_reads_exists_before_any_event(
    title: str, expr: str, fresh: Series
) -> None:
    assert _unread(expr, fresh) == [], title


def test_a_selector_of_a_series_born_later_is_caught() -> None:
    name = "kube_nudge_rollouts_finished_total"
    series: Series = [(name, {"kind": "Job", "outcome": "complete"}, 0.0)]
    expr = f'sum by (kind) (increase({name}{{job=~".*", outcome="failed"}}[30m])) > 0'
    assert _unread(expr, series) == [f'{name}{{job=~".*", outcome="failed"}}']
    series.append((name, {"kind": "Job", "outcome": "failed"}, 0.0))
    assert _unread(expr, series) == []
    assert _unread(f'{name}{{outcome!~"fail.*"}} and on (pod) (kube_nudge_leader == 1)',
                   series) == ["kube_nudge_leader{}"]  # fmt: skip


def _labels(series: Series, name: str) -> set[tuple[tuple[str, str], ...]]:
    return {tuple(sorted(labels.items())) for n, labels, _ in series if n == name}


async def test_each_known_label_value_starts_at_zero(fresh: Series) -> None:
    """Kinds (built-in and configured), outcomes, stages, reasons and the receiver: each
    exported with value 0 before any event, as the Prometheus guidelines advise."""
    kinds = [kind.resource.kind for kind in (*BUILTIN_KINDS, WIDGET)]
    finished = _labels(fresh, "kube_nudge_rollouts_finished_total")
    assert {
        (("kind", k), ("outcome", o)) for k in kinds for o in ("complete", "failed")
    } <= finished
    for name in ("kube_nudge_nudges_total", "kube_nudge_writes_total",
                 "kube_nudge_notifications_total"):  # fmt: skip
        assert {(("kind", k),) for k in kinds} <= _labels(fresh, name), name
    resources = {
        "configmaps",
        "secrets",
        *(str(kind.resource) for kind in (*BUILTIN_KINDS, WIDGET)),
    }
    restarts = _labels(fresh, "kube_nudge_watch_restarts_total")
    assert {dict(labels)["resource"] for labels in restarts} == resources
    assert {dict(labels)["reason"] for labels in restarts} == {"expired", "error", "silent"}
    strategy_reasons = [r for model in model_extensions() for r in model.hold_reasons]
    reasons = {*HOLD_REASONS, *strategy_reasons}
    assert {(("reason", r),) for r in reasons} == _labels(fresh, "kube_nudge_holds_total")
    states = {dict(labels)["state"] for labels in _labels(fresh, "kube_nudge_workloads")}
    assert {f"held-{r}" for r in reasons} | {"current", "applied", "failed"} == states
    failed = _labels(fresh, "kube_nudge_notifications_failed_total")
    assert failed == {(("reason", r), ("receiver", RECEIVER.label)) for r in FAIL_REASONS}
    dropped = _labels(fresh, "kube_nudge_notifications_dropped_total")
    assert dropped == {(("reason", r), ("receiver", RECEIVER.label)) for r in DROP_REASONS}
    sent = _labels(fresh, "kube_nudge_notifications_sent_total")
    assert sent == {(("kind", k.value), ("receiver", RECEIVER.label)) for k in DEFAULT_KINDS}
    hot = {dict(labels)["outcome"] for labels in _labels(fresh, "kube_nudge_hot_reloads_total")}
    assert hot == {"reloaded", "failed", "timed-out", "rolled", "unconfirmed"}
    counted = [(n, v) for n, _, v in fresh if n.startswith("kube_nudge_") and n.endswith("_total")]
    assert len(counted) > 50  # the parse found them
    assert [(n, v) for n, v in counted if v != 0] == []


def test_every_hold_reason_given_is_declared() -> None:
    """Each ``Hold("reason", ...)`` written in the product is one the metrics start at 0:
    the model's ``HOLD_REASONS`` or a strategy's ``StrategyModel.hold_reasons``."""
    declared = {*HOLD_REASONS, *(r for model in model_extensions() for r in model.hold_reasons)}
    given = {
        (str(path.relative_to(SRC)), node.args[0].value)
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "Hold"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }
    assert len(given) >= 9  # the parse found the calls: invalid, missing, flapping, gates...
    assert {(where, reason) for where, reason in given if reason not in declared} == set()
