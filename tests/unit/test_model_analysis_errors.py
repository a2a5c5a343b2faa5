"""Errors paced as Argo Rollouts paces them: a measurement that errored is tried again
after the error interval (Argo's ``DefaultErrorRetryInterval``, 10 s; the metric's
``interval`` where that is shorter), so ``consecutiveErrorLimit`` reaches Error after limit
times that interval, never at once. Time is an argument here: the schedule is pure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.analysis import (
    DEFAULT_ERROR_INTERVAL,
    AnalysisPhase,
    AnalysisRecord,
    Measurement,
    Template,
    due_metrics,
    next_look,
    parse_record,
    read_template,
    run_phase,
)

P = AnalysisPhase
SUPPLIED = {"namespace": "shop", "kind": "Deployment", "name": "web", "config-hash": "h",
            "wave": "0"}  # fmt: skip


def read(error_interval: float = DEFAULT_ERROR_INTERVAL, **fields: Any) -> Template:
    provider = {"prometheus": {"address": "http://p:9090", "query": "up"}}
    metric = {"name": "m", "successCondition": "result[0] < 1", "provider": provider, **fields}
    obj = {"kind": "AnalysisTemplate", "metadata": {"name": "t"}, "spec": {"metrics": [metric]}}
    return read_template(obj, SUPPLIED, error_interval=error_interval)


def until_ended(template: Template, outcomes: list[AnalysisPhase]) -> list[float]:
    """The times of the measurements taken, each as soon as due, with ``outcomes`` in turn
    (the last repeating), until the analysis ends; the record goes through its annotation
    after each, as a restarted controller would read it."""
    record: AnalysisRecord | None = AnalysisRecord("h", started=0.0)
    times: list[float] = []
    while record is not None and (at := next_look(template, record)) is not None:
        assert due_metrics(template, record, at - 0.001) == []  # nothing early
        [due] = due_metrics(template, record, at)
        outcome = outcomes[min(len(times), len(outcomes) - 1)]
        record = parse_record(record.measured(due.name, Measurement(outcome, at, "")).encode())
        times.append(at)
        assert len(times) < 100
    return times


def test_errors_with_no_interval_are_tried_again_every_ten_seconds() -> None:
    """Five errors in a row (more than the default limit of 4): Error 40 s after the first,
    where they once came all at the same moment."""
    template = read()
    assert until_ended(template, [P.ERROR]) == [0.0, 10.0, 20.0, 30.0, 40.0]


@pytest.mark.parametrize(
    ("fields", "error_interval", "times"),
    [
        ({"interval": "1m", "count": 2}, 10.0, [0.0, 10.0, 20.0, 30.0, 40.0]),
        ({"interval": "3s", "count": 2}, 10.0, [0.0, 3.0, 6.0, 9.0, 12.0]),  # the shorter
        ({"consecutiveErrorLimit": 1}, 2.0, [0.0, 2.0]),  # --analysis-error-interval 2s
        ({"initialDelay": "30s"}, 10.0, [30.0, 40.0, 50.0, 60.0, 70.0]),
    ],
)  # fmt: skip
def test_the_error_interval_is_the_flags_or_the_shorter_metric_interval(
    fields: dict[str, Any], error_interval: float, times: list[float]
) -> None:
    template = read(error_interval, **fields)
    assert until_ended(template, [P.ERROR]) == times
    record = AnalysisRecord("h", started=0.0)
    for at in times:
        record = record.measured("m", Measurement(P.ERROR, at, "unreachable"))
    assert run_phase(template, record.metrics) is P.ERROR


def test_after_an_error_and_a_success_the_interval_counts_again() -> None:
    template = read(interval="1m", count=3)
    outcomes = [P.ERROR, P.SUCCESSFUL, P.ERROR, P.SUCCESSFUL, P.SUCCESSFUL]
    assert until_ended(template, outcomes) == [0.0, 10.0, 70.0, 80.0, 140.0]


@given(
    limit=st.integers(0, 6),
    interval=st.sampled_from([None, 1.0, 5.0, 30.0, 120.0]),
    error_interval=st.sampled_from([1.0, 10.0, 60.0]),
)
def test_error_comes_after_limit_times_the_error_interval(
    limit: int, interval: float | None, error_interval: float
) -> None:
    fields: dict[str, Any] = {"consecutiveErrorLimit": limit}
    if interval is not None:
        fields |= {"interval": f"{interval:g}s", "count": 1000}
    template = read(error_interval, **fields)
    times = until_ended(template, [P.ERROR])
    pace = min(interval, error_interval) if interval else error_interval
    assert times == [n * pace for n in range(limit + 1)]
