"""kube-nudge's targets (issues 14 and 24), checked against a run's figures, honest about
misses. A ratio resting on a peer's projected time (it did not finish within the roll limit)
is marked ≈, and so is a status ("≈met", "**≈missed**") that rests on such a projection or
on a single repetition of a scenario it reads."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bench import companions

KUBE_NUDGE = "kube-nudge"
MINIMAL = "minimal"  # the minimal client's kind (bench/minimal.py): the limit, not a peer


@dataclass(frozen=True, slots=True)
class Figures:
    """Medians and runs of one results document."""

    results: dict[str, Any]
    tools: dict[str, Any]

    def median(self, tool: str, scenario: str, metric: str) -> float | None:
        """The median of ``metric``, or None if not measured."""
        summary = ((self.results.get(tool) or {}).get(scenario) or {}).get("summary") or {}
        value = (summary.get(metric) or {}).get("median")
        return None if value is None or math.isnan(value) else float(value)

    def runs(self, tool: str, scenario: str) -> list[dict[str, float]]:
        """Every run's metrics."""
        return list(((self.results.get(tool) or {}).get(scenario) or {}).get("runs") or [])

    def projected(self, tool: str, scenario: str, flag: str = "fanout_projected") -> bool:
        """Some run of ``tool`` in ``scenario`` was stopped at the limit and projected."""
        return any(run.get(flag) for run in self.runs(tool, scenario))

    def per_run(self, tool: str, scenario: str, top: str, bottom: str) -> float | None:
        """The median over runs of ``top / bottom`` (None without such runs): the true
        median, the mean of the middle two for an even count, as the tables' medians are."""
        values = [
            run[top] / run[bottom] for run in self.runs(tool, scenario)
            if run.get(top) is not None and run.get(bottom)
        ]  # fmt: skip
        return statistics.median(values) if values else None

    def approximate(self, tools: Iterable[str | None], scenarios: Iterable[str]) -> bool:
        """Whether a status read from ``tools`` in ``scenarios`` rests on one repetition or
        on a projected run of one of them (tools without runs there are not counted)."""
        scenarios = tuple(scenarios)
        return any(
            len(self.runs(tool, scenario)) == 1
            or any(self.projected(tool, scenario, flag) for flag in _PROJECTED)
            for tool in tools if tool
            for scenario in scenarios
        )  # fmt: skip

    def peers(self, *, defaults_only: bool = False) -> list[str]:
        """Peer columns (with ``defaults_only``: not the knob-raised variants)."""
        return [
            label
            for label, info in self.tools.items()
            if info["kind"] not in (KUBE_NUDGE, MINIMAL) and not (defaults_only and info["args"])
        ]

    def minimal(self) -> str | None:
        """The minimal client's column, if this run has one."""
        return next((label for label, info in self.tools.items() if info["kind"] == MINIMAL), None)

    def best_peer(self, scenario: str, metric: str, *, defaults_only: bool = False,
                  lowest: bool = True) -> tuple[str, float] | None:  # fmt: skip
        """(peer, median) of the best peer for ``metric``, or None without peer figures."""
        found = [
            (peer, value)
            for peer in self.peers(defaults_only=defaults_only)
            if (value := self.median(peer, scenario, metric)) is not None
        ]
        if not found:
            return None
        return (min if lowest else max)(found, key=lambda item: item[1])


#: The flags a scenario sets on a run stopped at the roll limit and projected.
_PROJECTED = ("fanout_projected", "change_projected")

Verdict = tuple[str, str, str]  # kube-nudge's figure, the comparison, status
Check = Callable[[Figures], Verdict]


def _n(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}".strip()


def _status(ok: bool | None, *, approx: bool = False) -> str:
    """met / **missed** / n/a; ≈ in front when it rests on a projection or one repetition."""
    if ok is None:
        return "n/a"
    mark = "≈" if approx else ""
    return f"{mark}met" if ok else f"**{mark}missed**"


LATENCY_P99_MS = 20.0
DEFAULT_P50_MS, DEFAULT_P99_MS = 100.0, 150.0


def _latency(f: Figures) -> Verdict:
    p99 = f.median(KUBE_NUDGE, "latency", "p99_ms")
    best = f.best_peer("latency", "p99_ms")
    compare = f"best peer {best[0]} {_n(best[1], 'ms')}" if best else "no peer figures"
    ok = None if p99 is None else p99 <= LATENCY_P99_MS and (best is None or p99 <= best[1])
    approx = f.approximate((KUBE_NUDGE, best[0] if best else None), ("latency",))
    return _n(p99, "ms"), compare, _status(ok, approx=approx)


def _default_latency(f: Figures) -> Verdict:
    p50 = f.median(KUBE_NUDGE, "latency-debounce", "p50_ms")
    p99 = f.median(KUBE_NUDGE, "latency-debounce", "p99_ms")
    if p50 is None or p99 is None:
        return "n/a", "", "n/a"
    ok = p50 <= DEFAULT_P50_MS and p99 <= DEFAULT_P99_MS
    approx = f.approximate((KUBE_NUDGE,), ("latency-debounce",))
    return f"p50 {_n(p50, 'ms')}, p99 {_n(p99, 'ms')}", "no flag at all", _status(ok, approx=approx)


def _faster(scenario: str) -> Check:
    def check(f: Figures) -> Verdict:
        mine = f.median(KUBE_NUDGE, scenario, "fanout_s")
        best = f.best_peer(scenario, "fanout_s", defaults_only=True)
        if mine is None or best is None:
            return _n(mine, "s"), "no peer figures", "n/a"
        ratio = best[1] / mine if mine else math.inf
        approx = "≈" if f.projected(best[0], scenario) else ""
        rests = f.approximate((KUBE_NUDGE, best[0]), (scenario,))
        return (_n(mine, "s"), f"best peer at its defaults: {best[0]} {approx}{_n(best[1], 's')} "
                f"({approx}{ratio:,.1f}x kube-nudge's time)",
                _status(ratio >= 10.0, approx=rests))  # fmt: skip

    return check


#: Fan-out and burst: kube-nudge's time within 1.5x of the minimal client's, its CPU per
#: workload write within 3x.
MINIMAL_TIME_RATIO, CPU_PER_WRITE_RATIO = 1.5, 3.0
Figure = Callable[[Figures, str, str], float | None]


def _against_minimal(figure: Figure, unit: str, scale: float, bound: float) -> Check:
    """kube-nudge's ``figure`` in the fan-out and the burst over the minimal client's."""

    def check(f: Figures) -> Verdict:
        limit = f.minimal()
        mine, compare, ratios = [], [], []
        for scenario, name in (("fanout", "fan-out"), ("burst", "burst")):
            ours = figure(f, KUBE_NUDGE, scenario)
            floor = figure(f, limit, scenario) if limit else None
            if ours is None or floor is None:
                continue
            ratios.append(ours / floor if floor else math.inf)
            mine.append(f"{name} {_n(ours * scale, unit)}")
            compare.append(f"{name} {_n(floor * scale, unit)} ({ratios[-1]:,.2f}x)")
        if not ratios:
            return "n/a", "no minimal-client figures", "n/a"
        ok = max(ratios) <= bound
        approx = f.approximate((KUBE_NUDGE, limit), ("fanout", "burst"))
        return ", ".join(mine), f"{limit}: " + ", ".join(compare), _status(ok, approx=approx)

    return check


def _time(f: Figures, tool: str, scenario: str) -> float | None:
    return f.median(tool, scenario, "fanout_s")


def _cpu_per_write(f: Figures, tool: str, scenario: str) -> float | None:
    return f.per_run(tool, scenario, "fanout_tool_cpu_s", "change_writes")


minimal_time = _against_minimal(_time, "s", 1.0, MINIMAL_TIME_RATIO)
cpu_per_write = _against_minimal(_cpu_per_write, "ms", 1000.0, CPU_PER_WRITE_RATIO)


def _steady(f: Figures) -> Verdict:
    mine = f.median(KUBE_NUDGE, "memory", "steady_rss_mib")
    best = f.best_peer("memory", "steady_rss_mib")
    if mine is None or best is None:
        return _n(mine, "MiB"), "no peer figures", "n/a"
    approx = f.approximate((KUBE_NUDGE, best[0]), ("memory",))
    return (_n(mine, "MiB"), f"best peer {best[0]} {_n(best[1], 'MiB')} (1/4: "
            f"{_n(best[1] / 4, 'MiB')})", _status(mine <= best[1] / 4, approx=approx))  # fmt: skip


def _peak(f: Figures) -> Verdict:
    # The whole run's peak (VmHWM at the end), not the initial sync's: a peak that comes
    # later (a burst of events after ready) is a peak too.
    ratios = [
        run["peak_rss_total_mib"] / run["steady_rss_mib"]
        for run in f.runs(KUBE_NUDGE, "memory")
        if run.get("steady_rss_mib") and run.get("peak_rss_total_mib")
    ]
    if not ratios:
        return "n/a", "", "n/a"
    worst = max(ratios)
    approx = f.approximate((KUBE_NUDGE,), ("memory",))
    return (f"worst run {worst:.2f}x", "peak (VmHWM, whole run) / steady",
            _status(worst <= 1.5, approx=approx))  # fmt: skip


RESTART_REQUESTS, RESTART_READY_S = 3.0, 0.3


def _restart(f: Figures) -> Verdict:
    runs = [run for run in f.runs(KUBE_NUDGE, "api-cost") if "restart_requests" in run]
    if not runs:
        return "n/a", "", "n/a"
    requests = max(run["restart_requests"] for run in runs)
    ready = max(run["restart_ready_s"] for run in runs)
    writes = max(run.get("restart_writes", 0) for run in runs)
    ok = requests <= RESTART_REQUESTS and ready <= RESTART_READY_S and writes == 0
    approx = f.approximate((KUBE_NUDGE,), ("api-cost",))
    return (f"{_n(requests)} requests, ready in {_n(ready, 's')}, {_n(writes)} writes (worst run)",
            "Leases aside; the api-cost scenario's objects",
            _status(ok, approx=approx))  # fmt: skip


#: The 10x scale point: the scale scenario at its full size.
SCALE_SECRETS, SCALE_WORKLOADS = 100_000, 10_000


def _scale(f: Figures) -> Verdict:
    runs = f.runs(KUBE_NUDGE, "scale")
    if not runs:
        return "n/a", "not run (`BENCH_SCENARIOS=scale`)", "n/a"
    steady = f.median(KUBE_NUDGE, "scale", "steady_rss_mib")
    ready = f.median(KUBE_NUDGE, "scale", "ready_s")
    change = f.median(KUBE_NUDGE, "scale", "change_ms")
    smallest = min(runs, key=lambda run: run["secrets"])
    size = f"{_n(smallest['secrets'])} Secrets, {_n(smallest['workloads'])} Deployments"
    full = smallest["secrets"] >= SCALE_SECRETS and smallest["workloads"] >= SCALE_WORKLOADS
    rolled = all(not run.get("change_projected") for run in runs)
    mine = f"ready {_n(ready, 's')}, steady {_n(steady, 'MiB')}, one change {_n(change, 'ms')}"
    if not full:
        return mine, f"{size}: below the full size", "n/a"
    return mine, size, _status(rolled, approx=len(runs) == 1)


def _every_run(scenario: str, metric: str, want: Callable[[dict[str, float]], float]) -> Check:
    def check(f: Figures) -> Verdict:
        runs = [run for run in f.runs(KUBE_NUDGE, scenario) if metric in run]
        if not runs:
            return "n/a", "", "n/a"
        misses = [run for run in runs if run[metric] != want(run)]
        values = ", ".join(_n(run[metric]) for run in runs)
        approx = f.approximate((KUBE_NUDGE,), (scenario,))
        return (
            values,
            f"want {_n(want(runs[0]))} in every run",
            (_status(True, approx=approx) if not misses
             else f"**missed** in {len(misses)} of {len(runs)} runs"),
        )  # fmt: skip

    return check


def _fewest_rollouts(f: Figures) -> Verdict:
    mine = f.median(KUBE_NUDGE, "flapping", "rollouts")
    best = f.best_peer("flapping", "rollouts")
    if mine is None or best is None:
        return _n(mine), "no peer figures", "n/a"
    approx = f.approximate((KUBE_NUDGE, best[0]), ("flapping",))
    return (_n(mine), f"fewest of the peers: {best[0]} {_n(best[1])}",
            _status(mine <= best[1], approx=approx))  # fmt: skip


AGENT_RSS_MIB = 30e6 / 2**20  # the 30 MB, in MiB as the tables give memory


def _agent_rss(f: Figures) -> Verdict:
    peaks = [run["peak_rss_any_mib"] for run in f.runs(KUBE_NUDGE, "agent")
             if "peak_rss_any_mib" in run]  # fmt: skip
    if not peaks:
        return "n/a", "", "n/a"
    steady = f.median(KUBE_NUDGE, "agent", "rss_mib")
    approx = f.approximate((KUBE_NUDGE,), ("agent",))
    return (f"steady {_n(steady, 'MiB')}, peak {_n(max(peaks), 'MiB')} (worst run)",
            f"30 MB = {_n(AGENT_RSS_MIB, 'MiB')}",
            _status(max(peaks) < AGENT_RSS_MIB, approx=approx))  # fmt: skip


#: Issue 22: with the nudge, the PATCH to the app reloaded on a real kubelet, p50.
NODE_NUDGE_P50_S = 2.0


def _node_nudge(f: Figures) -> Verdict:
    p50 = f.median(KUBE_NUDGE, "agent-node", "nudge_p50_ms")
    if p50 is None:
        return "n/a", "", "n/a"
    sync = f.median(KUBE_NUDGE, "agent-node", "sync_p50_ms")
    windowed = f.median(KUBE_NUDGE, "agent-node", "debounced_p50_ms")
    compare = (f"`--debounce 0`; at kube-nudge's defaults p50 {_n(windowed, 'ms')}; no "
               f"nudge (the kubelet's sync, default 1 m): p50 {_n(sync, 'ms')}")  # fmt: skip
    approx = f.approximate((KUBE_NUDGE,), ("agent-node",))
    return _n(p50, "ms"), compare, _status(p50 <= NODE_NUDGE_P50_S * 1000, approx=approx)


#: Issue 44: the delay an analysis gate adds beyond its template's schedule stays under one
#: interval for every workload, 1,000 of them gated in one wave.
ANALYSIS_WORKLOADS = 1000


def _gate_delay(f: Figures) -> Verdict:
    runs = [run for run in f.runs(KUBE_NUDGE, "analysis") if "delay_max_ms" in run]
    if not runs:
        return "n/a", "not run", "n/a"
    worst = max(run["delay_max_ms"] for run in runs)
    p99 = f.median(KUBE_NUDGE, "analysis", "delay_p99_ms")
    interval = min(run["interval_ms"] for run in runs)
    workloads = min(run["workloads"] for run in runs)
    unjudged = sum(run["workloads"] - run["analyses_passed"] for run in runs)
    mine = f"p99 {_n(p99, 'ms')}, max {_n(worst, 'ms')} (worst run)"
    compare = f"one interval, {_n(interval, 'ms')}; {_n(workloads)} workloads in one wave"
    if unjudged:
        compare += f"; {_n(unjudged)} analyses not passed"
    if workloads < ANALYSIS_WORKLOADS:
        return mine, f"{compare}: below the full size", "n/a"
    ok = worst < interval and not unjudged
    return mine, compare, _status(ok, approx=f.approximate((KUBE_NUDGE,), ("analysis",)))


@dataclass(frozen=True, slots=True)
class Target:
    """One target: its text, the scenarios its figures come from, and its check."""

    text: str
    reads: tuple[str, ...]
    check: Check


TARGETS: tuple[Target, ...] = (
    Target(
        "Default latency: at kube-nudge's defaults, p50 <= 100 ms and p99 <= 150 ms",
        ("latency-debounce",),
        _default_latency,
    ),
    Target(
        "Latency p99 <= 20 ms at `--debounce 0`, and no worse than the best peer",
        ("latency",),
        _latency,
    ),
    Target(
        "Fan-out at least 10x faster than the best peer at its defaults",
        ("fanout",),
        _faster("fanout"),
    ),
    Target(
        "Burst at least 10x faster than the best peer at its defaults",
        ("burst",),
        _faster("burst"),
    ),
    Target(
        "Fan-out and burst within 1.5x of a minimal client's time",
        ("fanout", "burst"),
        _against_minimal(_time, "s", 1.0, MINIMAL_TIME_RATIO),
    ),
    Target(
        "Tool CPU per write (fan-out and burst) <= 3x the minimal client's",
        ("fanout", "burst"),
        _against_minimal(_cpu_per_write, "ms", 1000.0, CPU_PER_WRITE_RATIO),
    ),
    Target("Steady RSS at scale <= 1/4 of the best peer's", ("memory",), _steady),
    Target("Peak RSS (whole run) <= 1.5x steady", ("memory",), _peak),
    Target(
        "Restart: <= 3 API requests besides the Lease, ready in <= 0.3 s, nothing written",
        ("api-cost",),
        _restart,
    ),
    Target(
        "10x scale point: 100,000 Secrets, 10,000 Deployments, measured and the change rolled",
        ("scale",),
        _scale,
    ),
    Target(
        "Exactly one write per affected workload (fan-out)",
        ("fanout",),
        _every_run("fanout", "change_writes", lambda run: run["workloads"]),
    ),
    Target(
        "Exactly one write per affected workload (burst)",
        ("burst",),
        _every_run("burst", "change_writes", lambda run: run["workloads"]),
    ),
    Target("The fewest rollouts under a flapping Secret", ("flapping",), _fewest_rollouts),
    Target("Reload agent RSS under 30 MB (steady and peak)", ("agent",), _agent_rss),
    Target(
        "Exactly one reload per `..data` swap (reload agent)",
        ("agent",),
        _every_run("agent", "reloads", lambda run: run["swaps"]),
    ),
    Target(
        "Hot reload on a real kubelet: PATCH to app reloaded p50 <= 2 s with the nudge",
        ("agent-node",),
        _node_nudge,
    ),
    Target(
        "Analysis gate, 1,000 workloads in one wave: delay beyond initialDelay + (count - 1) x "
        "interval under one interval for every workload",
        ("analysis",),
        _gate_delay,
    ),
)

#: The column a targets table gains when a row's figures come from a run other than the
#: one the table stands under (a companion run, bench/companions.py).
OTHER_RUN = "From another run"


def table(document: dict[str, Any]) -> list[str]:
    """The targets table: kube-nudge's figure, what it is compared with, met or missed; and,
    when some row's figures come from a companion run rather than ``document``'s own, a
    column naming that run, its commit and control plane beside each such row."""
    figures = Figures(document["results"], document["tools"])
    runs = [companions.runs_of(document, target.reads) for target in TARGETS]
    header = ["Target", "kube-nudge", "Compared with", "Status"]
    if any(runs):
        header.append(OTHER_RUN)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for target, run in zip(TARGETS, runs, strict=True):
        cells = [target.text, *target.check(figures)] + ([run] if any(runs) else [])
        lines.append("| " + " | ".join(cells) + " |")
    return lines
