"""The analysis scenario's figures, computed from what it recorded (pure: no clock, no I/O).

Per workload (``Gated``): when its rollout of the change completed (the Deployment's status,
on a watch), when its analysis started and when its last measurement was taken (its
``kube-nudge.io/analysis-run`` record), and when the verdict arrived on the watch. The delay
the gate adds is what the analysis took beyond its template's own schedule, the shortest it
can take: ``initialDelay + (count - 1) x interval`` (Argo's schedule: the first measurement
after ``initialDelay``, each next one ``interval`` after the last).

Over time (``Sample``): counters read every so often (Prometheus's queries answered,
kube-nudge's CPU seconds) give a mean rate over a window and the highest rate over any span
of a second within it; a gauge (RSS) its highest sample within the window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from bench.stats import percentile
from kube_nudge.model.analysis import AnalysisPhase, AnalysisRecord

Metrics = dict[str, float]
Sample = tuple[float, float]
"""(seconds on one clock, the value read then)."""
QUERY_HANDLER = 'handler="/api/v1/query"'


@dataclass(frozen=True, slots=True)
class Gated:
    """One workload's analysis, every time in Unix seconds (one machine, one clock)."""

    completed: float
    """Its rollout of the change completed (its status, as a watch delivered it)."""
    started: float
    """Its analysis started (the record's ``start``)."""
    last_measured: float
    """Its last measurement (the latest ``last`` of the record's metrics)."""
    verdict_seen: float
    """The record with the verdict arrived on the watch."""

    def delay(self, nominal: float) -> float:
        """What the gate added beyond ``nominal``: from the rollout completing to the last
        measurement, less the schedule's own length."""
        return self.last_measured - self.completed - nominal


def gated(record: AnalysisRecord | None, completed: float, verdict_seen: float) -> Gated | None:
    """A workload's ``Gated`` from its record, or None unless the record says the analysis
    passed (a failed or held one ends early or never: no delay to speak of) and the rollout
    was seen complete (``completed`` > 0)."""
    if record is None or record.phase is not AnalysisPhase.SUCCESSFUL:
        return None
    if record.started is None or completed <= 0 or not record.metrics:
        return None
    return Gated(completed, record.started, record.last_at, verdict_seen)


def _ms(values: Sequence[float], q: float | None) -> float:
    """The ``q``-th percentile (None: the max) of seconds, in ms."""
    if not values:
        return math.nan
    value = max(values) if q is None else percentile(values, q)
    return round(value * 1000, 1)


def delay_figures(gates: Sequence[Gated], nominal: float) -> Metrics:
    """p50, p99 and max of the gate's delay (ms), and of its parts: the analysis's start
    after the rollout completed, the last measurement's lateness against the schedule from
    that start, and the verdict seen on a watch beyond ``nominal``."""
    delays = [g.delay(nominal) for g in gates]
    start = [g.started - g.completed for g in gates]
    late = [g.last_measured - g.started - nominal for g in gates]
    verdict = [g.verdict_seen - g.completed - nominal for g in gates]
    return {
        "delay_p50_ms": _ms(delays, 50), "delay_p99_ms": _ms(delays, 99),
        "delay_max_ms": _ms(delays, None),
        "start_lag_p50_ms": _ms(start, 50), "start_lag_p99_ms": _ms(start, 99),
        "late_p50_ms": _ms(late, 50), "late_p99_ms": _ms(late, 99),
        "verdict_p50_ms": _ms(verdict, 50), "verdict_p99_ms": _ms(verdict, 99),
        "verdict_max_ms": _ms(verdict, None),
    }  # fmt: skip


def value_at(samples: Sequence[Sample], when: float) -> float:
    """A counter's value at ``when``: linear between the samples around it, the first or
    the last sample's outside them (NaN without samples)."""
    if not samples:
        return math.nan
    if when <= samples[0][0]:
        return samples[0][1]
    for (t0, v0), (t1, v1) in pairwise(samples):
        if when <= t1:
            return v0 + (v1 - v0) * (when - t0) / (t1 - t0) if t1 > t0 else v1
    return samples[-1][1]


def mean_rate(samples: Sequence[Sample], start: float, end: float) -> float:
    """How fast a counter grew from ``start`` to ``end``, per second."""
    if end <= start:
        return math.nan
    return (value_at(samples, end) - value_at(samples, start)) / (end - start)


def peak_rate(samples: Sequence[Sample], start: float, end: float, span: float = 1.0) -> float:
    """The highest rate of a counter over any ``span`` seconds (between two samples at least
    that far apart, the nearest such) that overlaps ``start``..``end``."""
    best = math.nan
    for i, (t0, v0) in enumerate(samples):
        later = next(((t, v) for t, v in samples[i + 1 :] if t - t0 >= span), None)
        if later is None:
            break
        t1, v1 = later
        if t1 >= start and t0 <= end:
            rate = (v1 - v0) / (t1 - t0)
            best = rate if math.isnan(best) else max(best, rate)
    return best


def highest(samples: Sequence[Sample], start: float, end: float) -> float:
    """A gauge's highest sample from ``start`` to ``end`` (NaN if none falls there)."""
    within = [v for t, v in samples if start <= t <= end]
    return max(within) if within else math.nan


def queries_answered(exposition: str) -> float:
    """Instant queries a Prometheus has answered, from its own ``/metrics``: the sum of
    ``prometheus_http_requests_total{handler="/api/v1/query"}`` over every status code."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith("prometheus_http_requests_total{") and QUERY_HANDLER in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
