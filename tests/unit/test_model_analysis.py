"""The analysis rules, pure: templates read as Argo Rollouts reads them, each measurement
and metric judged by Argo's rules, the schedule on an injected clock, and a restart from
the record on the workload that neither measures twice nor skips."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, example, given, settings, target
from hypothesis import strategies as st

from kube_nudge.model.analysis import (
    AnalysisPhase,
    AnalysisRecord,
    Measurement,
    MetricState,
    Template,
    TemplateError,
    due_metrics,
    measure,
    measurement_phase,
    metric_phase,
    next_look,
    parse_record,
    read_template,
    run_phase,
)

P = AnalysisPhase
SUPPLIED = {"namespace": "shop", "kind": "Deployment", "name": "web", "config-hash": "v1-abc",
            "wave": "1"}  # fmt: skip
PROM = {"prometheus": {"address": "http://prometheus:9090", "query": "up"}}


def template(*metrics: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kube-nudge.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {"name": "errors", "namespace": "shop"},
        "spec": {"metrics": list(metrics), **spec},
    }


def metric(**fields: Any) -> dict[str, Any]:
    return {"name": "error-rate", "provider": PROM, "successCondition": "result[0] < 0.05",
            **fields}  # fmt: skip


def one(**fields: Any) -> Any:
    return read_template(template(metric(**fields)), SUPPLIED).metrics[0]


# -- measurements ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("success", "failure", "result", "phase"),
    [
        ("result[0] < 0.05", None, [0.01], P.SUCCESSFUL),
        ("result[0] < 0.05", None, [0.2], P.FAILED),
        (None, "result[0] > 0.1", [0.2], P.FAILED),
        (None, "result[0] > 0.1", [0.05], P.SUCCESSFUL),
        ("result[0] < 0.05", "result[0] > 0.1", [0.07], P.INCONCLUSIVE),
        ("result[0] < 0.05", "result[0] > 0.1", [0.01], P.SUCCESSFUL),
        ("result[0] < 0.05", "result[0] > 0.1", [0.5], P.FAILED),
        ("result < 0.05", None, 0.01, P.SUCCESSFUL),  # a scalar query
        ("result[0] < 0.05", None, [], P.ERROR),  # no data: the index fails
        ("size(result) == 0 || result[0] < 0.05", None, [], P.SUCCESSFUL),
        ("isNaN(result[0]) || result[0] < 0.05", None, [float("nan")], P.SUCCESSFUL),
        ("result[0] + 1", None, [0.01], P.ERROR),  # not a boolean
    ],
)
def test_each_measurement_is_judged_as_argo_judges_it(
    success: str | None, failure: str | None, result: Any, phase: AnalysisPhase
) -> None:
    fields: dict[str, Any] = {"successCondition": success}
    if failure is not None:
        fields["failureCondition"] = failure
    assert measurement_phase(one(**fields), result)[0] is phase


# -- metrics ---------------------------------------------------------------------------------


def after(phases: list[AnalysisPhase]) -> MetricState:
    state = MetricState()
    for n, phase in enumerate(phases):
        state = measure(state, Measurement(phase, float(n), ""))
    return state


@pytest.mark.parametrize(
    ("fields", "phases", "expected"),
    [
        ({"count": 3}, [P.SUCCESSFUL, P.SUCCESSFUL], P.RUNNING),
        ({"count": 3}, [P.SUCCESSFUL] * 3, P.SUCCESSFUL),
        ({"count": 3}, [P.FAILED], P.FAILED),  # failureLimit 0: the first failure
        ({"count": 3, "failureLimit": 1}, [P.FAILED, P.SUCCESSFUL], P.RUNNING),
        ({"count": 3, "failureLimit": 1}, [P.FAILED, P.SUCCESSFUL, P.SUCCESSFUL], P.SUCCESSFUL),
        ({"count": 3, "failureLimit": 1}, [P.FAILED, P.FAILED], P.FAILED),
        ({"count": 3}, [P.INCONCLUSIVE], P.INCONCLUSIVE),
        ({"count": 3, "inconclusiveLimit": 2}, [P.INCONCLUSIVE] * 2, P.RUNNING),
        # Errors don't count towards count, and only in a row past the limit (default 4).
        ({"count": 2}, [P.ERROR] * 4 + [P.SUCCESSFUL], P.RUNNING),
        ({"count": 2}, [P.ERROR] * 4, P.RUNNING),
        ({"count": 2}, [P.ERROR] * 5, P.ERROR),
        ({"count": 2}, [*[P.ERROR] * 4, P.SUCCESSFUL, *[P.ERROR] * 4, P.SUCCESSFUL],
         P.SUCCESSFUL),
        ({"count": 2, "consecutiveErrorLimit": 0}, [P.ERROR], P.ERROR),
    ],
)  # fmt: skip
def test_a_metric_ends_by_argos_limits(
    fields: dict[str, Any], phases: list[AnalysisPhase], expected: AnalysisPhase
) -> None:
    assert metric_phase(one(interval="1m", **fields), after(phases)) is expected


def test_the_analysis_takes_its_worst_metric_and_ignores_dry_runs() -> None:
    read = read_template(
        template(metric(name="a", count=2), metric(name="b", count=2), metric(name="c"),
                 dryRun=[{"metricName": "c"}]),
        SUPPLIED,
    )  # fmt: skip
    ok, bad = after([P.SUCCESSFUL] * 2), after([P.FAILED])
    assert run_phase(read, {}) is P.PENDING
    assert run_phase(read, {"a": after([P.SUCCESSFUL])}) is P.RUNNING
    assert run_phase(read, {"a": ok, "b": ok}) is P.SUCCESSFUL  # c is dry-run
    assert run_phase(read, {"a": ok, "b": ok, "c": bad}) is P.SUCCESSFUL
    # The first to end badly ends the analysis; Failed outranks Error and Inconclusive.
    assert run_phase(read, {"a": after([P.SUCCESSFUL]), "b": bad}) is P.FAILED
    assert run_phase(read, {"a": after([P.INCONCLUSIVE]), "b": after([P.ERROR] * 5)}) is P.ERROR
    assert run_phase(read, {"a": after([P.INCONCLUSIVE]), "b": bad}) is P.FAILED


# -- templates -------------------------------------------------------------------------------


def test_args_are_supplied_by_kube_nudge_or_the_templates_own_values() -> None:
    query = (
        'sum(rate(errors{namespace="{{args.namespace}}",app="{{ args.name }}"}[1m]))'
        " > {{args.floor}}"
    )
    read = read_template(
        template(metric(provider={"prometheus": {"address": "http://p:9090", "query": query}}),
                 args=[{"name": "floor", "value": "0.5"}, {"name": "namespace"}]),
        SUPPLIED,
    )  # fmt: skip
    assert read.metrics[0].provider.query == (
        'sum(rate(errors{namespace="shop",app="web"}[1m])) > 0.5'
    )
    assert read.source == "AnalysisTemplate shop/errors"


def test_an_argo_cluster_template_is_read_as_it_is() -> None:
    argo = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "ClusterAnalysisTemplate",
        "metadata": {"name": "success-rate"},
        "spec": {
            "args": [{"name": "service-name", "value": "web"}],
            "metrics": [{
                "name": "success-rate", "interval": "5m", "count": "3", "failureLimit": 1,
                "initialDelay": "30s", "successCondition": "result[0] >= 0.95",
                "provider": {"prometheus": {
                    "address": "http://prometheus.monitoring:9090", "timeout": 20,
                    "query": 'sum(rate(http_requests{service="{{args.service-name}}"}[5m]))',
                }},
            }],
        },
    }  # fmt: skip
    [read] = read_template(argo, SUPPLIED).metrics
    assert (read.interval, read.count, read.failure_limit, read.initial_delay) == (300, 3, 1, 30)
    assert read.provider.timeout == 20 and 'service="web"' in read.provider.query


@pytest.mark.parametrize(
    ("spec_metric", "spec", "says"),
    [
        (metric(successCondition="result[0] <"), {}, "successCondition: 'result[0] <' is not CEL"),
        (metric(successCondition=None), {}, "give a successCondition or a failureCondition"),
        (metric(interval="1m"), {}, "count: required where interval is set"),
        (metric(count=0), {}, "count must be between 1 and 1000"),
        (metric(interval="soon", count=2), {}, 'interval: want a duration such as "1m"'),
        (metric(provider={"web": {"url": "http://x"}}), {}, "only prometheus is supported"),
        (metric(provider={"prometheus": {"address": "http://p", "query": "{{args.nope}}"}}),
         {}, "{{args.nope}} names no arg"),
        (metric(), {"args": [{"name": "token", "valueFrom": {"secretKeyRef": {}}}]},
         "valueFrom is not supported"),
        (metric(), {"args": [{"name": "service"}]}, "(service): no value"),
        (metric(), {"dryRun": [{"metricName": "error-rate"}]}, "every metric is dryRun"),
    ],
)  # fmt: skip
def test_what_cant_be_evaluated_is_refused_in_one_line(
    spec_metric: dict[str, Any], spec: dict[str, Any], says: str
) -> None:
    with pytest.raises(TemplateError) as caught:
        read_template(template(spec_metric, **spec), SUPPLIED)
    message = str(caught.value)
    assert message.startswith("AnalysisTemplate shop/errors: ") and "\n" not in message
    assert says in message


# -- the schedule and a restart --------------------------------------------------------------


def test_measurements_come_initial_delay_then_interval_after_the_last() -> None:
    read = read_template(template(metric(interval="1m", count=3, initialDelay="30s")), SUPPLIED)
    record = AnalysisRecord("v1-abc", started=1000.0)
    assert due_metrics(read, record, 1029.9) == [] and next_look(read, record) == 1030.0
    record = record.measured("error-rate", Measurement(P.SUCCESSFUL, 1031.0, "[0.01]"))
    assert next_look(read, record) == 1091.0  # from the last measurement, as Argo
    for at in (1091.0, 1151.0):
        [due] = due_metrics(read, record, at)
        record = record.measured(due.name, Measurement(P.SUCCESSFUL, at, "[0.01]"))
    assert run_phase(read, record.metrics) is P.SUCCESSFUL and next_look(read, record) is None


def test_the_record_survives_its_annotation() -> None:
    record = AnalysisRecord("v1-abc", 1000.0).measured(
        "error-rate", Measurement(P.ERROR, 1010.25, "query failed: 503")
    )
    assert parse_record(record.encode()) == record
    ended = record.ended(P.ERROR, "metric error-rate: 5 errors in a row")
    assert parse_record(ended.encode()) == ended
    for broken in (None, "", "{", '{"hash": 1}', '{"hash":"h","start":"x"}', "[]"):
        assert parse_record(broken) is None


@given(st.lists(st.sampled_from(list(P)[2:]), max_size=12))
def test_the_record_stores_what_it_counts_and_derives_the_rest(
    phases: list[AnalysisPhase],
) -> None:
    """Every measurement is counted once, errors included, and the record on the workload
    holds no count that can be derived (``taken`` is ``count + errors``): a record edited by
    hand can't disagree with itself."""
    record = AnalysisRecord("v1-abc", 0.0)
    for at, phase in enumerate(phases):
        record = record.measured("error-rate", Measurement(phase, float(at), ""))
    state = record.state("error-rate")
    assert state.taken == len(phases) == state.count + state.errors
    assert state.errors == phases.count(P.ERROR)
    stored = json.loads(record.encode()).get("metrics", {}).get("error-rate", {})
    assert "n" not in stored and parse_record(record.encode()) == record
    legacy = record.encode().replace('"ok":', '"n":99,"ok":') if phases else record.encode()
    assert parse_record(legacy) == record  # an earlier release's "n" is not read


@pytest.mark.parametrize(
    ("phase", "released_after", "goes_on"),
    [
        (P.SUCCESSFUL, False, True),
        (P.ERROR, False, False),
        (P.ERROR, True, True),
        (P.INCONCLUSIVE, True, True),
        (P.FAILED, True, False),
        (None, True, False),
    ],
)
def test_the_release_rule(phase: AnalysisPhase | None, released_after: bool, goes_on: bool) -> None:
    """The line goes on past a Successful analysis, or an Error or Inconclusive one that an
    operator released after its last measurement; never past a Failed or a running one."""
    record = AnalysisRecord("v1-abc", 1000.0).measured(
        "error-rate", Measurement(P.ERROR, 1010.0, "")
    )
    if phase is not None:
        record = record.ended(phase, "why")
    released_at = 1010.5 if released_after else 1009.5
    assert record.lets_line_go_on(released_at) is goes_on


def measured(
    read: Template, phases: list[AnalysisPhase], restart: int | None
) -> tuple[list[float], AnalysisPhase]:
    """The times of the measurements taken (given ``phases``, one each) and the verdict,
    the controller restarted from the encoded record after ``restart`` of them."""
    record, times, now = AnalysisRecord("v1-abc", 0.0), [], 0.0
    for n in range(len(phases) + 1):
        if n == restart:
            record = parse_record(record.encode()) or AnalysisRecord("lost", 0.0)
        at = next_look(read, record)
        if at is None or n == len(phases):
            break
        now = max(now, at)
        [due] = due_metrics(read, record, now)
        record = record.measured(due.name, Measurement(phases[n], now, ""))
        times.append(now)
    return times, run_phase(read, record.metrics)


def restart_points(phases: list[AnalysisPhase], failure_limit: int) -> set[tuple[int, int]]:
    """Where a restart can fall in the runs of ``phases``: (count, measurements before it),
    for each count from 1 to 6."""
    points = set()
    for count in range(1, 7):
        read = read_template(
            template(metric(interval="1m", count=count, failureLimit=failure_limit)), SUPPLIED
        )
        points |= {(count, n) for n in range(len(measured(read, phases, None)[0]) + 1)}
    return points


LONGEST = [P.ERROR] * 4 + [P.SUCCESSFUL] + [P.ERROR] * 4 + [P.SUCCESSFUL] + [P.ERROR] * 2
"""Each count's longest run of at most 12 measurements: errors, never more than 4 in a row,
delay the successes that end it."""
RESTART_POINTS = restart_points(LONGEST, 0)
"""Every restart point of runs of at most 12 measurements: 6 of a count of 1 (the run ends
at its 5th measurement), 11 of a count of 2, 13 of each other count, 69 in all (checked once
by trying every sequence of 12 phases; the property test checks no run finds another)."""


def test_the_longest_runs_reach_69_restart_points() -> None:
    assert len(RESTART_POINTS) == 69
    assert {(1, 5), (2, 10), (6, 12)} <= RESTART_POINTS  # each count's last


@settings(max_examples=200, deadline=None)
@given(
    phases=st.lists(st.sampled_from(list(P)[2:]), min_size=1, max_size=12),
    failure_limit=st.integers(0, 2),
)
@example(phases=LONGEST, failure_limit=0)
def test_a_restart_from_the_record_measures_nothing_twice_and_skips_nothing(
    phases: list[AnalysisPhase], failure_limit: int
) -> None:
    """The same measurements, at the same times, with the same verdict, whether or not the
    controller restarted (from the encoded record). Every example restarts, for every count
    from 1 to 6 at each point a restart can fall in its run: before the first measurement,
    after each, and after the last. That is all 69 restart points of ``RESTART_POINTS`` with
    the example ``LONGEST``; the drawn ones reach them after other measurements
    (``--hypothesis-show-statistics`` counts them)."""
    taken = 0
    for count in range(1, 7):
        read = read_template(
            template(metric(interval="1m", count=count, failureLimit=failure_limit)), SUPPLIED
        )
        unbroken = measured(read, phases, None)
        taken += len(unbroken[0])
        for restart in range(len(unbroken[0]) + 1):
            assert (count, restart) in RESTART_POINTS
            event(f"a restart after {restart} of {count} measurements")
            assert measured(read, phases, restart) == unbroken, f"after {restart} of {count}"
    target(taken)  # longer runs: later restart points, after more kinds of measurement
