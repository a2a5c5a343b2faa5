"""The analysis scenario's figures (bench/gate.py): the delay the gate adds per workload, from
its record and its rollout's completion; rates and peaks from sampled counters."""

from __future__ import annotations

import math

import pytest
from bench import gate
from bench.gate import Gated

from kube_nudge.model.analysis import AnalysisPhase, AnalysisRecord, Measurement

NOMINAL = 15.0  # initialDelay 5s + (count 3 - 1) x interval 5s


def _record(start: float, lasts: dict[str, float], phase: AnalysisPhase | None) -> AnalysisRecord:
    record = AnalysisRecord("h1", start)
    for name, at in lasts.items():
        record = record.measured(name, Measurement(AnalysisPhase.SUCCESSFUL, at, "[0.01]"))
    return record.ended(phase, "ok") if phase is not None else record


def test_the_delay_runs_from_the_rollout_completing_to_the_last_measurement() -> None:
    # Completed at 100.0, started 0.2 s later, the last of two metrics measured at 115.9:
    # 0.9 s beyond the 15 s schedule, of which 0.2 s to start and 0.7 s behind it.
    record = _record(100.2, {"errors": 115.4, "latency": 115.9}, AnalysisPhase.SUCCESSFUL)
    found = gate.gated(record, completed=100.0, verdict_seen=116.3)
    assert found == Gated(100.0, 100.2, 115.9, 116.3)
    assert found.delay(NOMINAL) == pytest.approx(0.9)
    figures = gate.delay_figures([found], NOMINAL)
    assert figures["delay_max_ms"] == 900.0
    assert figures["start_lag_p99_ms"] == 200.0
    assert figures["late_p99_ms"] == 700.0
    assert figures["verdict_max_ms"] == 1300.0


@pytest.mark.parametrize(
    ("record", "completed"),
    [
        (None, 100.0),  # no record
        (_record(100.2, {"errors": 115.2}, None), 100.0),  # still running
        (_record(100.2, {"errors": 105.2}, AnalysisPhase.FAILED), 100.0),  # ended early
        (_record(100.2, {"errors": 115.2}, AnalysisPhase.SUCCESSFUL), 0.0),  # never seen done
        (AnalysisRecord("h1", None), 100.0),  # not started
    ],
)
def test_only_a_passed_analysis_of_a_rollout_seen_complete_counts(
    record: AnalysisRecord | None, completed: float
) -> None:
    assert gate.gated(record, completed, 120.0) is None


def test_percentiles_over_workloads() -> None:
    # 100 workloads, delays 0.01 s ... 1.00 s: p50 between the 50th and 51st, p99 near the
    # top, max the top (linear between closest ranks, as the bench's other percentiles).
    gates = [Gated(0.0, 0.0, NOMINAL + n / 100, NOMINAL + n / 100) for n in range(1, 101)]
    figures = gate.delay_figures(gates, NOMINAL)
    assert figures["delay_p50_ms"] == 505.0
    assert figures["delay_p99_ms"] == 990.1
    assert figures["delay_max_ms"] == 1000.0


def test_no_workload_gives_no_figure() -> None:
    assert all(math.isnan(v) for v in gate.delay_figures([], NOMINAL).values())


SAMPLES = [(0.0, 0.0), (0.5, 10.0), (1.0, 20.0), (1.5, 120.0), (2.0, 130.0), (2.5, 130.0)]


def test_a_counter_between_samples_is_interpolated_and_clamped_outside() -> None:
    assert gate.value_at(SAMPLES, 0.25) == 5.0
    assert gate.value_at(SAMPLES, -1.0) == 0.0
    assert gate.value_at(SAMPLES, 9.0) == 130.0
    assert math.isnan(gate.value_at([], 1.0))


def test_the_mean_rate_is_over_the_window_and_the_peak_over_a_second() -> None:
    assert gate.mean_rate(SAMPLES, 0.0, 2.0) == 65.0
    assert gate.mean_rate(SAMPLES, 0.5, 1.0) == 20.0
    assert math.isnan(gate.mean_rate(SAMPLES, 1.0, 1.0))
    # The busiest second: 0.5 -> 1.5, 110 in a second.
    assert gate.peak_rate(SAMPLES, 0.0, 2.5) == 110.0
    # A window only the last second (1.5 -> 2.5, 10 more) overlaps.
    assert gate.peak_rate(SAMPLES, 2.4, 2.5) == 10.0
    assert math.isnan(gate.peak_rate(SAMPLES[:2], 0.0, 1.0))


def test_a_gauges_highest_sample_within_the_window() -> None:
    rss = [(0.0, 50.0), (1.0, 64.0), (2.0, 58.0), (3.0, 70.0)]
    assert gate.highest(rss, 0.5, 2.5) == 64.0
    assert math.isnan(gate.highest(rss, 3.5, 4.0))


def test_the_queries_answered_are_summed_over_status_codes_of_the_query_handler() -> None:
    exposition = "\n".join([
        "# HELP prometheus_http_requests_total Counter of HTTP requests.",
        'prometheus_http_requests_total{code="200",handler="/api/v1/query"} 2990',
        'prometheus_http_requests_total{code="400",handler="/api/v1/query"} 10',
        'prometheus_http_requests_total{code="200",handler="/api/v1/query_range"} 7',
        'prometheus_http_requests_total{code="200",handler="/metrics"} 40',
        'prometheus_http_request_duration_seconds_count{handler="/api/v1/query"} 3000',
    ])  # fmt: skip
    assert gate.queries_answered(exposition) == 3000.0
