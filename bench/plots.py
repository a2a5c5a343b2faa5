"""PNG plots of a run (matplotlib, Agg backend: no display needed).

Each plot takes one repetition per tool (the median one for its headline figure), since the
tables already give the spread: latency distribution, fan-out and burst progress over time,
RSS over the initial sync, and cumulative rollouts under a flapping Secret.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

#: Plots by scenario: (file name, title) as linked from the page.
FOR_SCENARIO: dict[str, tuple[tuple[str, str], ...]] = {
    "latency": (("latency", "Reaction latency distribution"),),
    "fanout": (("fanout", "Fan-out progress over time"),),
    "burst": (("burst", "Burst progress over time"),),
    "memory": (("memory", "RSS over the initial sync"),),
    "flapping": (("flapping", "Rollouts under a flapping Secret"),),
    "agent": (("agent", "Reload agent: swap to reload latency distribution"),),
    "agent-node": (("agent-node", "Real node: PATCH to app reloaded, with and without the nudge"),),
    "analysis": (("analysis", "Analysis gate: delay beyond the schedule, per workload"),),
}
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
STYLES: tuple[Any, ...] = ("-", "--", "-.", (0, (1, 1)), (0, (5, 1, 1, 1, 1, 1)))


def _runs(results: dict[str, Any], scenario: str) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """(metrics, series) of every run, per tool that ran ``scenario``."""
    found = {}
    for tool, scenarios in results.items():
        data = scenarios.get(scenario) or {}
        runs, series = data.get("runs") or [], data.get("series") or []
        if runs and series:
            found[tool] = list(zip(runs, series, strict=False))
    return found


def _median_run(runs: list[tuple[dict[str, Any], Any]], metric: str) -> tuple[dict[str, Any], Any]:
    """The run whose ``metric`` is the median (the first run if it has none)."""
    valued: list[tuple[float, tuple[dict[str, Any], Any]]] = [
        (float(m[metric]), (m, s))
        for m, s in runs
        if isinstance(m.get(metric), int | float) and not math.isnan(m[metric])
    ]
    if not valued:
        return runs[0]
    middle = statistics.median_low(v for v, _ in valued)
    return next(run for v, run in valued if v == middle)


def _color(results: dict[str, Any], tool: str) -> str:
    return COLORS[list(results).index(tool) % len(COLORS)]


def _style(results: dict[str, Any], tool: str) -> Any:
    """Solid, dashed, dash-dot, ...: lines that coincide stay visible."""
    return STYLES[list(results).index(tool) % len(STYLES)]


def _axes() -> tuple[Figure, Axes]:
    figure, ax = plt.subplots(figsize=(8, 4.5))
    return figure, ax


def _log_x(ax: Axes) -> None:
    """A log time axis labelled 0.01, 0.1, 1, 10 (no crowded minor labels)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    low, high = ax.get_xlim()
    if high / max(low, 1e-9) < 100:  # under two decades: label 2 and 5 too
        ax.xaxis.set_minor_formatter(FuncFormatter(_two_and_five))
    else:
        ax.xaxis.set_minor_formatter(NullFormatter())


def _two_and_five(value: float, _: object) -> str:
    return f"{value:g}" if f"{value:e}"[0] in "25" else ""


def _finish(figure: Figure, ax: Axes, path: Path, title: str) -> None:
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def latency(results: dict[str, Any], path: Path) -> bool:
    """Cumulative distribution of reaction latencies (all repetitions), log scale."""
    runs = _runs(results, "latency")
    debounced = _runs(results, "latency-debounce")
    if not runs:
        return False
    figure, ax = _axes()
    for tool, tool_runs in runs.items():
        samples = sorted(s * 1000 for _, series in tool_runs for s in series.get("latency_s", []))
        _ecdf(ax, samples, tool, _color(results, tool), _style(results, tool))
    for tool, tool_runs in debounced.items():
        samples = sorted(s * 1000 for _, series in tool_runs for s in series.get("latency_s", []))
        _ecdf(ax, samples, f"{tool}, at its defaults", _color(results, tool), ":")
    _log_x(ax)
    ax.set_xlabel("reaction latency, ms (log scale)")
    ax.set_ylabel("share of changes")
    _finish(figure, ax, path, "Reaction latency: share of changes rolled within x ms")
    return True


def _ecdf(ax: Axes, samples: list[float], label: str, color: str, style: Any) -> None:
    if samples:
        shares = [i / len(samples) for i in range(len(samples) + 1)]
        xs = [samples[0], *samples]
        ax.step(xs, shares, where="post", label=label, color=color, linestyle=style)


def progress(results: dict[str, Any], scenario: str, path: Path) -> bool:
    """Workloads rolled over time since the change (median run per tool), log time."""
    runs = _runs(results, scenario)
    if not runs:
        return False
    figure, ax = _axes()
    limit = None
    for tool, tool_runs in runs.items():
        metrics, series = _median_run(tool_runs, "fanout_s")
        times = series.get("rolled_s") or []
        if not times:
            continue
        total = int(metrics.get("workloads", len(times)))
        counts = list(range(1, len(times) + 1))
        label = tool + (" (stopped at the limit)" if metrics.get("fanout_projected") else "")
        ax.step(
            times,
            counts,
            where="post",
            label=label,
            color=_color(results, tool),
            linestyle=_style(results, tool),
        )
        if metrics.get("fanout_projected"):
            limit = max(limit or 0.0, float(series.get("limit_s") or times[-1]))
        ax.axhline(total, color="grey", linewidth=0.5)
    if limit is not None:
        ax.axvline(limit, color="grey", linestyle="--", linewidth=0.8)
    _log_x(ax)
    ax.set_xlabel("seconds since the change (log scale)")
    ax.set_ylabel("workloads rolled")
    what = "Fan-out: one ConfigMap" if scenario == "fanout" else "Burst: every ConfigMap"
    _finish(figure, ax, path, f"{what} changed, workloads rolled over time")
    return True


def memory(results: dict[str, Any], path: Path) -> bool:
    """RSS from process start through ready and the steady wait (median run per tool)."""
    runs = _runs(results, "memory")
    if not runs:
        return False
    figure, ax = _axes()
    for tool, tool_runs in runs.items():
        _, series = _median_run(tool_runs, "steady_rss_mib")
        samples = series.get("rss_mib") or []
        if not samples:
            continue
        color = _color(results, tool)
        ax.plot(
            [t for t, _ in samples],
            [m for _, m in samples],
            label=tool,
            color=color,
            linestyle=_style(results, tool),
        )
        ready = series.get("ready_s")
        if isinstance(ready, int | float):
            at = min(samples, key=lambda sample: abs(sample[0] - ready))
            ax.plot([at[0]], [at[1]], marker="o", color=color)
    ax.set_xlabel("seconds since the process started (dot: ready)")
    ax.set_ylabel("RSS, MiB")
    ax.set_ylim(bottom=0)
    _finish(figure, ax, path, "Memory: RSS over the initial sync and after")
    return True


def flapping(results: dict[str, Any], path: Path) -> bool:
    """Cumulative rollouts while a Secret is rewritten every 200 ms (median run per tool)."""
    runs = _runs(results, "flapping")
    if not runs:
        return False
    figure, ax = _axes()
    flap = 0.0
    for tool, tool_runs in runs.items():
        _, series = _median_run(tool_runs, "rollouts")
        times = series.get("rollouts_s") or []
        flap = max(flap, float(series.get("flap_s") or 0.0))
        end = max([*times, flap]) + 5.0
        ax.step(
            [0.0, *times, end],
            [0, *range(1, len(times) + 1), len(times)],
            where="post",
            label=f"{tool} ({len(times)})",
            color=_color(results, tool),
            linestyle=_style(results, tool),
        )
    if flap:
        ax.axvspan(0.0, flap, color="grey", alpha=0.12, label="Secret rewritten every 200 ms")
    ax.set_xlabel("seconds since the first change")
    ax.set_ylabel("rollouts so far")
    _finish(figure, ax, path, "Flapping Secret: rollouts each tool causes")
    return True


def agent(results: dict[str, Any], path: Path) -> bool:
    """Cumulative distribution of swap-to-reload latencies per agent setting (all
    repetitions), log scale."""
    runs = _runs(results, "agent")
    if not runs:
        return False
    figure, ax = _axes()
    for tool_runs in runs.values():
        found: dict[str, list[float]] = {}
        for _, series in tool_runs:
            for setting in series.get("settings", []):
                label = " ".join(setting["flags"]) or "defaults (inotify, debounce 20ms)"
                found.setdefault(label, []).extend(s * 1000 for s in setting["latency_s"])
        for n, (label, samples) in enumerate(found.items()):
            _ecdf(ax, sorted(samples), label, COLORS[n % len(COLORS)], STYLES[n % len(STYLES)])
    _log_x(ax)
    ax.set_xlabel("from the ..data swap to the reload request, ms (log scale)")
    ax.set_ylabel("share of swaps")
    _finish(figure, ax, path, "Reload agent: share of swaps reloaded within x ms")
    return True


def agent_node(results: dict[str, Any], path: Path) -> bool:
    """Cumulative distribution of PATCH-to-reload latencies on the real node, with the
    controller's nudge and without (all repetitions), log scale."""
    runs = _runs(results, "agent-node")
    if not runs:
        return False
    figure, ax = _axes()
    for tool_runs in runs.values():
        for n, (key, label) in enumerate((
            ("nudge_s", "with the nudge (strategy hot, --debounce 0)"),
            ("debounced_s", "with the nudge, kube-nudge's defaults"),
            ("sync_s", "no nudge (the kubelet's sync, 1 m)"),
        )):  # fmt: skip
            samples = sorted(s * 1000 for _, series in tool_runs for s in series.get(key, []))
            if samples:
                _ecdf(ax, samples, label, COLORS[n], STYLES[n])
    _log_x(ax)
    ax.set_xlabel("from the ConfigMap PATCH to the app's `loaded` line, ms (log scale)")
    ax.set_ylabel("share of changes")
    _finish(figure, ax, path, "Real kubelet: share of apps reloaded within x ms of the PATCH")
    return True


def analysis(results: dict[str, Any], path: Path) -> bool:
    """Cumulative distribution of the delay the analysis gate added per workload (every
    repetition), against one interval of its template."""
    runs = _runs(results, "analysis")
    if not runs:
        return False
    figure, ax = _axes()
    interval = None
    for tool, tool_runs in runs.items():
        samples = sorted(s * 1000 for _, series in tool_runs for s in series.get("delay_s", []))
        runs_of = f"{len(tool_runs)} run" + ("" if len(tool_runs) == 1 else "s")
        _ecdf(ax, samples, f"{tool} ({runs_of})", _color(results, tool), _style(results, tool))
        interval = max((m.get("interval_ms") or 0.0 for m, _ in tool_runs), default=None)
    if interval:
        ax.axvline(interval, color="grey", linestyle="--", linewidth=0.8,
                   label=f"one interval ({interval / 1000:g} s): the target")  # fmt: skip
    ax.set_xlabel("from the rollout completing to the last measurement, less the schedule, ms")
    ax.set_ylabel("share of workloads")
    _finish(figure, ax, path, "Analysis gate: share of workloads judged within x ms of schedule")
    return True


def draw(results: dict[str, Any], directory: Path, prefix: str) -> list[str]:
    """Draw every plot the results allow into ``directory``; return the names drawn."""
    drawn = []
    names = ("latency", "fanout", "burst", "memory", "flapping", "agent", "agent-node", "analysis")
    for name in names:
        path = directory / f"{prefix}{name}.png"
        if name in ("fanout", "burst"):
            made = progress(results, name, path)
        else:
            draw_one = {"latency": latency, "memory": memory, "flapping": flapping,
                        "agent": agent, "agent-node": agent_node,
                        "analysis": analysis}  # fmt: skip
            made = draw_one[name](results, path)
        if made:
            drawn.append(name)
    return drawn
