"""Each target's met/missed, on small hand-made figure documents."""

from __future__ import annotations

from typing import Any

import pytest
from bench import companions, targets
from bench.config import RESULTS
from bench.report import ROWS, cell, table
from bench.targets import KUBE_NUDGE, Figures

Runs = list[dict[str, float]]
LATEST = RESULTS / "latest.json"
MINIMAL_TIME, CPU_PER_WRITE = targets.minimal_time, targets.cpu_per_write


def _scenario(runs: Runs) -> dict[str, Any]:
    names = {name for run in runs for name in run}
    summary = {}
    for name in names:
        values = sorted(run[name] for run in runs if name in run)
        summary[name] = {"median": values[len(values) // 2], "min": values[0], "max": values[-1]}
    return {"runs": runs, "summary": summary}


def figures(*, repeat: int = 2, **by_tool: dict[str, Runs]) -> Figures:
    """``kube_nudge={"latency": [run, ...]}, reloader=..., minimal=...``; a single run given
    is taken as ``repeat`` identical repetitions (one repetition makes a status ≈)."""
    kinds = {"kube_nudge": KUBE_NUDGE, "minimal": targets.MINIMAL}
    tools, results = {}, {}
    for key, scenarios in by_tool.items():
        label = KUBE_NUDGE if key == "kube_nudge" else key
        tools[label] = {"kind": kinds.get(key, key), "args": []}
        results[label] = {
            name: _scenario(runs * repeat if len(runs) == 1 else runs)
            for name, runs in scenarios.items()
        }
    return Figures(results, tools)


def status(check: targets.Check, f: Figures) -> str:
    return check(f)[2]


def test_default_latency() -> None:
    met = figures(kube_nudge={"latency-debounce": [{"p50_ms": 60.0, "p99_ms": 150.0}]})
    slow = figures(kube_nudge={"latency-debounce": [{"p50_ms": 2003.0, "p99_ms": 2009.0}]})
    tail = figures(kube_nudge={"latency-debounce": [{"p50_ms": 90.0, "p99_ms": 151.0}]})
    assert status(targets._default_latency, met) == "met"
    assert status(targets._default_latency, slow) == "**missed**"
    assert status(targets._default_latency, tail) == "**missed**"
    assert status(targets._default_latency, figures(kube_nudge={})) == "n/a"


@pytest.mark.parametrize(
    ("mine", "peer", "want"),
    [(20.0, 25.0, "met"), (20.5, 25.0, "**missed**"), (15.0, 12.0, "**missed**")],
)
def test_latency_p99_at_debounce_0(mine: float, peer: float, want: str) -> None:
    f = figures(kube_nudge={"latency": [{"p99_ms": mine}]}, wave={"latency": [{"p99_ms": peer}]})
    assert status(targets._latency, f) == want


def _rolls(seconds: float, cpu: float, writes: float = 1000.0) -> Runs:
    return [{"fanout_s": seconds, "fanout_tool_cpu_s": cpu, "change_writes": writes}]


def test_fanout_and_burst_against_the_minimal_client() -> None:
    ok = figures(kube_nudge={"fanout": _rolls(3.0, 0.4), "burst": _rolls(4.5, 0.6)},
                 minimal={"fanout": _rolls(2.0, 0.15), "burst": _rolls(3.0, 0.2)})  # fmt: skip
    assert status(MINIMAL_TIME, ok) == "met"
    assert status(CPU_PER_WRITE, ok) == "met"
    slow = figures(kube_nudge={"fanout": _rolls(3.1, 1.7), "burst": _rolls(4.5, 0.6)},
                   minimal={"fanout": _rolls(2.0, 0.15), "burst": _rolls(3.0, 0.2)})  # fmt: skip
    assert status(MINIMAL_TIME, slow) == "**missed**"
    assert status(CPU_PER_WRITE, slow) == "**missed**"
    assert "fan-out 1.7 ms" in CPU_PER_WRITE(slow)[0]


def test_cpu_per_write_is_per_write_not_in_all() -> None:
    # Twice the CPU for twice the writes is the same cost per write.
    f = figures(kube_nudge={"fanout": _rolls(3.0, 0.9, 2000.0)},
                minimal={"fanout": _rolls(3.0, 0.15, 1000.0)})  # fmt: skip
    assert CPU_PER_WRITE(f)[2] == "met"


def test_steady_rss_against_a_quarter_of_the_best_peer() -> None:
    def f(mine: float) -> Figures:
        return figures(kube_nudge={"memory": [{"steady_rss_mib": mine}]},
                       reloader={"memory": [{"steady_rss_mib": 230.0}]},
                       wave={"memory": [{"steady_rss_mib": 564.0}]})  # fmt: skip

    assert status(targets._steady, f(57.5)) == "met"
    assert status(targets._steady, f(99.5)) == "**missed**"


def _restart(requests: float, ready: float, writes: float = 0.0) -> dict[str, Runs]:
    return {"api-cost": [{"restart_requests": requests, "restart_ready_s": ready,
                          "restart_writes": writes}]}  # fmt: skip


@pytest.mark.parametrize(
    ("run", "want"),
    [
        (_restart(3.0, 0.3), "met"),
        (_restart(11.0, 0.2), "**missed**"),
        (_restart(2.0, 0.96), "**missed**"),
        (_restart(2.0, 0.2, writes=1.0), "**missed**"),
    ],
)
def test_restart(run: dict[str, Runs], want: str) -> None:
    assert status(targets._restart, figures(kube_nudge=run)) == want


def _scale(secrets: float, workloads: float, projected: float = 0.0) -> dict[str, Runs]:
    return {"scale": [{"secrets": secrets, "workloads": workloads, "ready_s": 9.0,
                       "steady_rss_mib": 300.0, "change_ms": 80.0,
                       "change_projected": projected}]}  # fmt: skip


def test_the_10x_scale_point() -> None:
    assert status(targets._scale, figures(kube_nudge=_scale(100_000, 10_000))) == "met"
    assert status(targets._scale, figures(kube_nudge=_scale(100_000, 10_000, 1.0))) == "**missed**"
    small = targets._scale(figures(kube_nudge=_scale(2_000, 200)))
    assert small[2] == "n/a" and "below the full size" in small[1]
    assert status(targets._scale, figures(kube_nudge={})) == "n/a"


def _gated(max_ms: float, workloads: float = 1000.0, passed: float | None = None) -> Runs:
    return [{"delay_max_ms": max_ms, "delay_p99_ms": max_ms * 0.8, "interval_ms": 5000.0,
             "workloads": workloads,
             "analyses_passed": workloads if passed is None else passed}]  # fmt: skip


def test_the_analysis_gate_stays_under_one_interval_for_every_workload() -> None:
    def verdict(*runs: Runs) -> str:
        return status(targets._gate_delay, figures(kube_nudge={"analysis": [
            run for given in runs for run in given]}))  # fmt: skip

    assert verdict(_gated(4999.0), _gated(1200.0)) == "met"
    assert verdict(_gated(1200.0), _gated(5000.0)) == "**missed**"  # the worst run counts
    assert verdict(_gated(800.0, passed=998.0), _gated(800.0)) == "**missed**"
    one = figures(repeat=1, kube_nudge={"analysis": _gated(800.0)})
    assert status(targets._gate_delay, one) == "≈met"  # one repetition
    small = targets._gate_delay(figures(kube_nudge={"analysis": _gated(800.0, workloads=50.0)}))
    assert small[2] == "n/a" and "below the full size" in small[1]
    assert "max 4,999 ms (worst run)" in targets._gate_delay(
        figures(kube_nudge={"analysis": _gated(4999.0)}))[0]  # fmt: skip
    assert status(targets._gate_delay, figures(kube_nudge={})) == "n/a"


def test_a_ratio_resting_on_a_projected_peer_is_marked() -> None:
    f = figures(kube_nudge={"fanout": [{"fanout_s": 3.57, "fanout_projected": 0.0}]},
                reloader={"fanout": [{"fanout_s": 198.0, "fanout_projected": 1.0}]})  # fmt: skip
    _, compare, verdict = targets._faster("fanout")(f)
    assert "≈198 s" in compare and "≈55.5x" in compare and verdict == "≈met"
    finished = figures(kube_nudge={"fanout": [{"fanout_s": 3.57}]},
                       reloader={"fanout": [{"fanout_s": 40.0}]})  # fmt: skip
    assert "≈" not in targets._faster("fanout")(finished)[1]


def test_a_status_resting_on_one_repetition_is_marked() -> None:
    def f(repeat: int) -> Figures:
        return figures(repeat=repeat, kube_nudge={"memory": [{"steady_rss_mib": 57.5}]},
                       reloader={"memory": [{"steady_rss_mib": 230.0}]})  # fmt: skip

    assert status(targets._steady, f(2)) == "met"
    assert status(targets._steady, f(1)) == "≈met"
    lots = figures(repeat=1, kube_nudge={"memory": [{"steady_rss_mib": 99.5}]},
                   reloader={"memory": [{"steady_rss_mib": 230.0}] * 3})  # fmt: skip
    assert status(targets._steady, lots) == "**≈missed**"


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    runs = [{"fanout_tool_cpu_s": cpu, "change_writes": 1000.0} for cpu in (0.67, 0.68)]
    f = figures(kube_nudge={"fanout": runs})
    per_write = f.per_run(KUBE_NUDGE, "fanout", "fanout_tool_cpu_s", "change_writes")
    assert per_write == pytest.approx(0.000675)


def test_peak_rss_is_the_whole_runs_not_the_initial_syncs() -> None:
    # 0.87x over the initial sync hid a later peak of 1.6x steady.
    run = {"steady_rss_mib": 50.0, "peak_rss_sync_mib": 43.5, "peak_rss_total_mib": 80.0}
    assert status(targets._peak, figures(kube_nudge={"memory": [run]})) == "**missed**"
    calm = {"steady_rss_mib": 50.0, "peak_rss_sync_mib": 43.5, "peak_rss_total_mib": 60.0}
    verdict = targets._peak(figures(kube_nudge={"memory": [calm]}))
    assert verdict[0] == "worst run 1.20x" and verdict[2] == "met"


def test_page_cells_mark_ratios_on_projections() -> None:
    row = ROWS["fanout"][0]
    projected = _scenario([{"fanout_s": 198.0, "fanout_projected": 1.0, "fanout_rolled": 308.0}])
    finished = _scenario([{"fanout_s": 3.57, "fanout_projected": 0.0}])
    assert "· ≈55.5x" in cell(row, projected, 3.57, 1)
    assert "· ≈0.4x" not in cell(row, finished, 3.57, 1)
    assert cell(row, finished, 3.57, 1).endswith("· best")
    # a finished tool compared with a projected best is approximate too
    assert "· ≈2.0x" in cell(row, _scenario([{"fanout_s": 7.0}]), 3.5, 1, best_projected=True)


def test_the_targets_table_has_one_row_per_target() -> None:
    document = {"results": {}, "tools": {KUBE_NUDGE: {"kind": KUBE_NUDGE, "args": []}}}
    lines = targets.table(document)
    assert len(lines) == 2 + len(targets.TARGETS)
    assert all(line.endswith("| n/a |") for line in lines[2:])
    assert table("fanout", {}, 1) == []


def _latest() -> dict[str, Any]:
    """The committed latest run, with the companion runs that stand in for its scenarios."""
    return companions.with_companions(companions.load(LATEST), LATEST.parent)


def test_each_target_reads_only_the_scenarios_it_declares() -> None:
    """``Target.reads`` names the runs a row's figures come from: a check given only those
    scenarios' figures says what it says with every scenario's."""
    document = _latest()
    everything = Figures(document["results"], document["tools"])
    for target in targets.TARGETS:
        only = {tool: {name: data for name, data in scenarios.items() if name in target.reads}
                for tool, scenarios in document["results"].items()}  # fmt: skip
        assert target.check(Figures(only, document["tools"])) == target.check(everything), (
            target.text
        )


def test_a_row_from_a_companion_run_names_that_run_and_the_others_do_not() -> None:
    document = _latest()
    lines = targets.table(document)
    assert lines[0].endswith(f"| {targets.OTHER_RUN} |")
    rows = {target.text: line for target, line in zip(targets.TARGETS, lines[2:], strict=True)}
    for target in targets.TARGETS:
        row = rows[target.text]
        for name in target.reads:
            companion = document["companions"].get(name)
            if companion is None:
                continue
            kubernetes = companion["kubernetes"]
            assert f"`{name}` run {companion['generated']}, commit {companion['commit']} on " \
                   f"Kubernetes {kubernetes}" in row, row  # fmt: skip
        if not any(name in document["companions"] for name in target.reads):
            assert row.endswith("|  |"), row  # the heading's run: nothing said
    scale = rows[next(t.text for t in targets.TARGETS if t.reads == ("scale",))]
    assert "commit 85b69d7 on Kubernetes v1.35.4" in scale  # the example


def test_without_companions_the_table_has_no_run_column() -> None:
    document = companions.load(LATEST)
    lines = targets.table(document)
    assert lines[0] == "| Target | kube-nudge | Compared with | Status |"
