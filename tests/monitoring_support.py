"""The chart's alert rules and Grafana dashboard as the tests read them, and a small PromQL
reader: the metric names an expression selects, with their label matchers.

Shared by the unit tests (tests/unit/test_monitoring.py, test_metrics_born_at_zero.py) and
the alert tests against a real Prometheus (tests/integration/test_alerts.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
# Inside the chart, whose templates can read only its own files (.Files.Get).
MONITORING = REPO / "deploy" / "helm" / "kube-nudge" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
ALERTS = MONITORING / "alerts.yaml"

#: Labels Prometheus adds to every series when it scrapes a target (the chart's
#: ServiceMonitor or PodMonitor): never in the controller's own exposition.
TARGET_LABELS = frozenset({"job", "namespace", "pod", "instance"})

# PromQL words that look like metric names: functions, aggregations, operators, modifiers.
_PROMQL_WORDS = """
    abs absent absent_over_time avg avg_over_time bottomk ceil changes clamp clamp_max
    clamp_min count count_over_time count_values deriv delta exp floor group
    histogram_quantile holt_winters idelta increase irate label_join label_replace last_over_time
    ln log2 log10 max max_over_time min min_over_time predict_linear quantile quantile_over_time
    rate resets round scalar sgn sort sort_desc sqrt stddev stdvar sum sum_over_time time
    timestamp topk vector and or unless by without on ignoring group_left group_right bool
    offset inf nan
"""
PROMQL_WORDS = frozenset(_PROMQL_WORDS.split())
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w.$])[A-Za-z_:][\w:]*")
_SELECTOR = re.compile(r"(?<![\w.$])([A-Za-z_:][\w:]*)(?![\w:])\s*(\{[^{}]*\})?(?!\s*\()")
_MATCHER = re.compile(r'\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (a small PromQL tokenizer, enough for ours)."""
    # Grafana variables ($__rate_interval, ${datasource}) sit inside ranges and matchers.
    text = STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _LABEL_LIST.sub("", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "", text)
    return {word for word in _IDENT.findall(text) if word not in PROMQL_WORDS}


@dataclass(frozen=True)
class Selector:
    """One vector selector of an expression: a metric name and its label matchers."""

    name: str
    matchers: tuple[tuple[str, str, str], ...]
    """(label, operator, value), the operator one of ``=``, ``!=``, ``=~``, ``!~``."""

    def matches(self, name: str, labels: dict[str, str], *, ignore: frozenset[str]) -> bool:
        """Whether a series ``name{labels}`` is selected, matchers on ``ignore`` skipped."""
        if name != self.name:
            return False
        for label, op, value in self.matchers:
            if label in ignore:
                continue
            have = labels.get(label, "")
            hit = re.fullmatch(value, have) is not None if "~" in op else have == value
            if hit == op.startswith("!"):
                return False
        return True

    def __str__(self) -> str:
        inside = ", ".join(f'{label}{op}"{value}"' for label, op, value in self.matchers)
        return f"{self.name}{{{inside}}}"


def selectors(expr: str) -> list[Selector]:
    """Every vector selector in ``expr`` (functions, keywords and label lists left out)."""
    text = _RANGE.sub("", expr)
    text = _LABEL_LIST.sub("", text)
    found = []
    for match in _SELECTOR.finditer(text):
        name, braces = match.group(1), match.group(2) or ""
        if name in PROMQL_WORDS:
            continue
        matchers = tuple(
            (m.group(1), m.group(2), m.group(3)) for m in _MATCHER.finditer(braces.strip("{}"))
        )
        found.append(Selector(name, matchers))
    return found


def dashboard() -> dict[str, Any]:
    """The Grafana dashboard the chart ships."""
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def panels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    out: list[dict[str, Any]] = []
    for panel in doc["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # panels inside collapsed rows
    return out


def dashboard_exprs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, query) of every panel target."""
    return [
        (panel["title"], target["expr"])
        for panel in panels(doc)
        for target in panel.get("targets", [])
    ]


def rules_document() -> dict[str, Any]:
    """The chart's PrometheusRule."""
    doc: dict[str, Any] = yaml.safe_load(ALERTS.read_text())
    return doc


def rules() -> list[dict[str, Any]]:
    """Every alert rule of the chart."""
    return [rule for group in rules_document()["spec"]["groups"] for rule in group["rules"]]
