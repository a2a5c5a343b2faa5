"""Turn a results document into its JSON file and the ``BENCHMARKS.md`` page.

Per scenario one table: a row per figure, a column per tool, each cell the median over
repetitions with the min-max beside it and the ratio to the best tool in that row.

``python -m bench.report [RESULTS.json [OUT.md]]`` regenerates a page from saved results.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import companions, plots, targets
from bench.config import ROOT, Output, outputs
from bench.method import BUILDING, method, scenario_intro


@dataclass(frozen=True, slots=True)
class Row:
    """One figure of a scenario's table."""

    metric: str
    label: str
    unit: str = ""
    better: str | None = None  # "lower" or "higher": the ratio column; None: no ratio
    projected: str | None = None  # the 0/1 metric saying a run's value was projected


_ROLL = (
    Row("fanout_s", "all workloads rolled, from the change", "s", "lower", "fanout_projected"),
    Row("fanout_first_ms", "first workload rolled", "ms", "lower"),
    Row("fanout_half_s", "half of the workloads rolled", "s", "lower"),
    Row("change_writes", "workload writes for the change"),
    Row("change_writes_per_s", "write rate", "/s", "higher"),
    Row("wrong_or_missing", "markers missing or wrong afterwards"),
    Row("not_rolled", "workloads not rolled (stopped at the limit)"),
    Row("fanout_tool_cpu_s", "tool CPU time while rolling", "s", "lower"),
    Row("tool_cpu_ms_per_write", "tool CPU per workload write", "ms", "lower"),
    Row("adopt_s", "set-up: took every workload in (throttle lifted)", "s", "lower"),
    Row("adopt_writes", "set-up: writes to take them in"),
)
ROWS: dict[str, tuple[Row, ...]] = {
    "latency": (
        Row("p50_ms", "reaction latency p50", "ms", "lower"),
        Row("p99_ms", "reaction latency p99", "ms", "lower"),
        Row("max_ms", "reaction latency max", "ms", "lower"),
        Row("p99_from_send_ms", "p99 counted from sending the PATCH", "ms", "lower"),
        Row("patch_p50_ms", "the ConfigMap PATCH's own round trip, p50", "ms"),
    ),
    "latency-debounce": (
        Row("p50_ms", "reaction latency p50, kube-nudge at its defaults", "ms"),
        Row("p99_ms", "reaction latency p99, kube-nudge at its defaults", "ms"),
        Row("max_ms", "reaction latency max, kube-nudge at its defaults", "ms"),
    ),
    "writers": tuple(
        row
        for writer, command in (("kubectl", "`kubectl apply -f`"), ("helm", "`helm upgrade`"))
        for row in (
            Row(f"{writer}_gap_p50_ms", f"{command}: gap between its two writes, p50", "ms"),
            Row(f"{writer}_gap_max_ms", f"{command}: gap between its two writes, max", "ms"),
            Row(
                f"{writer}_rollouts_per_command",
                f"{command}: rollouts per command (want 1)",
                "",
                "lower",
            ),
            Row(
                f"{writer}_last_rollout_p50_ms",
                f"{command}: later write to the rollout carrying both, p50",
                "ms",
                "lower",
            ),
        )
    ),
    "fanout": _ROLL,
    "burst": (*_ROLL, Row("send_s", "the benchmark sending every change", "s")),
    "memory": (
        Row("ready_s", "process start to ready", "s", "lower"),
        Row("sync_cpu_s", "CPU time from start to ready", "s", "lower"),
        Row("peak_rss_sync_mib", "peak RSS over the initial sync (VmHWM at ready)", "MiB", "lower"),
        Row("steady_rss_mib", "steady RSS (VmRSS), after the wait", "MiB", "lower"),
        Row("peak_rss_total_mib", "peak RSS by then (VmHWM)", "MiB", "lower"),
        Row("peak_over_steady", "peak over initial sync / steady", "x"),
    ),
    "api-cost": (
        Row(
            "requests_per_change",
            "API requests per change (beyond the control plane's)",
            "",
            "lower",
        ),
        Row("reads_per_change", "of which reads (GET, LIST)", "", "lower"),
        Row("writes_per_change", "of which writes (incl. Events)", "", "lower"),
        Row("restart_writes", "writes during restarts with nothing changed"),
        Row("restart_markers_changed", "markers changed by those restarts"),
        Row("restart_requests", "API requests per restart", "", "lower"),
        Row("restart_ready_s", "slowest restart to ready", "s", "lower"),
        Row("restart_ready_median_s", "median restart to ready", "s", "lower"),
    ),
    "scale": (
        Row("ready_s", "process start to ready", "s"),
        Row("sync_cpu_s", "CPU time from start to ready", "s"),
        Row("adopt_s", "start to every Deployment taken in", "s"),
        Row("peak_rss_sync_mib", "peak RSS over the initial sync (VmHWM at ready)", "MiB"),
        Row("steady_rss_mib", "steady RSS (VmRSS), once quiet after taking them in", "MiB"),
        Row("peak_rss_total_mib", "peak RSS by then (VmHWM)", "MiB"),
        Row("change_first_ms", "one change: first Deployment rolled", "ms"),
        Row("change_ms", "one change: every Deployment of the namespace rolled", "ms"),
        Row("change_rolled", "one change: Deployments rolled"),
        Row("create_s", "set-up: creating the objects", "s"),
    ),
    "flapping": (
        Row("flap_changes", "changes to the Secret"),
        Row("rollouts", "rollouts (new ReplicaSets)", "", "lower"),
        Row("rollouts_after_stop", "of which after the last change"),
        Row("template_writes", "writes to the Deployment", "", "lower"),
        Row("last_rollout_after_stop_s", "last rollout, after the last change", "s"),
    ),
    "agent": (
        Row("default_p50_ms", "swap to reload p50, agent defaults (inotify, debounce 20 ms)", "ms"),
        Row("default_p99_ms", "swap to reload p99, agent defaults", "ms"),
        Row("default_max_ms", "swap to reload max, agent defaults", "ms"),
        Row("polling_p50_ms", "swap to reload p50, `--watch-mode poll` (poll 1 s)", "ms"),
        Row("polling_p99_ms", "swap to reload p99, `--watch-mode poll`", "ms"),
        Row("polling_max_ms", "swap to reload max, `--watch-mode poll`", "ms"),
        Row("swaps", "`..data` swaps (the two settings)"),
        Row("reloads", "reload requests received"),
        Row("agent_reloads", "reloads the agents counted (`kube_nudge_agent_reloads_total`)"),
        Row("reload_failures", "reload failures the agents counted"),
        Row("ready_s", "process start to ready, defaults", "s"),
        Row("start_rss_mib", "RSS at ready (VmRSS), defaults", "MiB"),
        Row("idle_rss_mib", "RSS after idling (VmRSS), defaults", "MiB"),
        Row("rss_mib", "RSS after the swaps and scrapes (VmRSS), defaults", "MiB"),
        Row("peak_rss_mib", "peak RSS by then (VmHWM), defaults", "MiB"),
        Row("peak_rss_any_mib", "peak RSS of either agent (VmHWM)", "MiB"),
        Row("default_idle_cpu_pct", "agent CPU idle, defaults", "% of a core"),
        Row("polling_idle_cpu_pct", "agent CPU idle, `--watch-mode poll`", "% of a core"),
        Row("default_cpu_pct", "agent CPU over the swaps, defaults", "% of a core"),
        Row("polling_cpu_pct", "agent CPU over the swaps, `--watch-mode poll`", "% of a core"),
    ),
    "analysis": (
        Row("analyses_passed", "analyses Successful (want every workload)"),
        Row("delay_p50_ms", "gate delay beyond initialDelay + (count - 1) x interval, p50", "ms"),
        Row("delay_p99_ms", "gate delay beyond the schedule, p99", "ms"),
        Row("delay_max_ms", "gate delay beyond the schedule, max", "ms"),
        Row("start_lag_p99_ms", "of which: rollout complete to the analysis's start, p99", "ms"),
        Row("late_p99_ms", "of which: last measurement behind its schedule, p99", "ms"),
        Row(
            "verdict_p99_ms",
            "rollout complete to the verdict on a watch, beyond the schedule, p99",
            "ms",
        ),
        Row(
            "verdict_max_ms",
            "rollout complete to the verdict on a watch, beyond the schedule, max",
            "ms",
        ),
        Row("queries", "instant queries Prometheus answered (want workloads x count)"),
        Row("qps_mean", "queries per second during the analyses, mean", "/s"),
        Row("qps_peak", "queries per second during the analyses, highest over 1 s", "/s"),
        Row("cpu_s", "kube-nudge CPU time during the analyses", "s"),
        Row("cpu_pct", "kube-nudge CPU during the analyses, mean", "% of a core"),
        Row("cpu_peak_pct", "kube-nudge CPU during the analyses, highest over 1 s", "% of a core"),
        Row("rss_before_mib", "kube-nudge RSS before the change (VmRSS)", "MiB"),
        Row("rss_peak_mib", "kube-nudge RSS during the analyses, highest (VmRSS)", "MiB"),
        Row("hwm_mib", "kube-nudge peak RSS by the last verdict (VmHWM)", "MiB"),
        Row("window_s", "the analyses: first start to last verdict", "s"),
        Row("rolled_s", "every workload rolled, from the change", "s"),
        Row("completed_s", "every rollout complete, from the change", "s"),
        Row("machine_busy_pct", "the machine's CPUs busy during the analyses", "%"),
    ),
    "agent-node": (
        Row("nudge_p50_ms", "PATCH to app reloaded p50, with the nudge (strategy hot)", "ms"),
        Row("nudge_p99_ms", "PATCH to app reloaded p99, with the nudge", "ms"),
        Row("nudge_min_ms", "PATCH to app reloaded min, with the nudge", "ms"),
        Row("nudge_max_ms", "PATCH to app reloaded max, with the nudge", "ms"),
        Row("nudge_samples", "samples with the nudge, per run"),
        Row("nudge_agent_p50_ms", "PATCH to the agent's `loaded-at` p50, with the nudge", "ms"),
        Row(
            "debounced_p50_ms",
            "PATCH to app reloaded p50, nudge at kube-nudge's defaults",
            "ms",
        ),
        Row("debounced_p99_ms", "PATCH to app reloaded p99, nudge at kube-nudge's defaults", "ms"),
        Row("debounced_samples", "samples at kube-nudge's defaults, per run"),
        Row("sync_p50_ms", "PATCH to app reloaded p50, no nudge (the kubelet's own sync)", "ms"),
        Row("sync_p99_ms", "PATCH to app reloaded p99, no nudge", "ms"),
        Row("sync_min_ms", "PATCH to app reloaded min, no nudge", "ms"),
        Row("sync_max_ms", "PATCH to app reloaded max, no nudge", "ms"),
        Row("sync_samples", "samples without the nudge, per run"),
        Row("sync_missed", "apps not reloaded within 150 s without the nudge"),
        Row("sync_agent_p50_ms", "PATCH to the agent's `loaded-at` p50, no nudge", "ms"),
        Row("hot_changes", "hot changes with the nudge (both settings), per run"),
        Row("rollouts", "workloads rolled (want 0)"),
        Row("restarts", "container restarts (want 0)"),
    ),
}
TITLES = {
    "latency": "Reaction latency",
    "latency-debounce": "Reaction latency at kube-nudge's defaults",
    "writers": "Coalescing at the defaults: one `kubectl apply -f`, one `helm upgrade`",
    "fanout": "Fan-out: one ConfigMap, many workloads",
    "burst": "Burst: many ConfigMaps changed at once",
    "memory": "Memory at scale",
    "api-cost": "API cost",
    "scale": "Scale: kube-nudge on a large cluster",
    "flapping": "Flapping Secret",
    "agent": "Reload agent: `..data` swap to reload, and its memory",
    "agent-node": "Hot reload on the real node: ConfigMap PATCH to the app reloaded",
    "analysis": "Analysis gate: one wave of workloads judged on metrics",
}


def fmt(value: float | None, unit: str = "") -> str:
    """A figure with thousands separators and a unit; n/a for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if float(value).is_integer():
        text = f"{int(value):,}"
    else:
        digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
        text = f"{value:,.{digits}f}"
    return f"{text} {unit}" if unit and unit != "x" else text + ("x" if unit == "x" else "")


def _medians(row: Row, scenario: str, results: dict[str, Any]) -> dict[str, float]:
    found = {}
    for tool, scenarios in results.items():
        summary = (scenarios.get(scenario) or {}).get("summary") or {}
        median = (summary.get(row.metric) or {}).get("median")
        if isinstance(median, int | float) and not math.isnan(median):
            found[tool] = float(median)
    return found


def projected(row: Row, data: dict[str, Any]) -> bool:
    """Some run's value of this row was projected (a tool stopped at the roll limit)."""
    return bool(row.projected) and any(run.get(row.projected) for run in data.get("runs", []))


def cell(
    row: Row, data: dict[str, Any], best: float | None, repeat: int, best_projected: bool = False
) -> str:
    """One table cell: median (min-max), the ratio to the best, a projection mark; a ratio
    that rests on a projected time (this cell's or the best's) is marked ≈ too."""
    summary = data["summary"].get(row.metric)
    if summary is None or summary.get("median") is None:
        return "n/a"
    median = summary["median"]
    text = fmt(median, "x" if row.unit == "x" else "")
    if math.isnan(median):
        return text
    mine = projected(row, data)
    if mine:
        text = f"≈ {text}"
    if repeat > 1 and summary["min"] != summary["max"]:
        text += f" ({fmt(summary['min'])}-{fmt(summary['max'])})"
    if best is not None and row.better is not None:
        text += _ratio(median, best, row.better, approximate=mine or best_projected)
    if mine:
        rolled = [run.get("fanout_rolled") for run in data["runs"] if run.get(row.projected)]
        text += f" (projected; {fmt(min(r for r in rolled if r is not None))} rolled by the limit)"
    return text


def _ratio(median: float, best: float, better: str, *, approximate: bool = False) -> str:
    """`` · best`` or `` · 2.5x`` (how many times worse than the best; `` · ≈2.5x`` when
    either side is projected); "" if undefined."""
    if median == best:
        return " · best"
    if best == 0 or median == 0:
        return ""
    ratio = median / best if better == "lower" else best / median
    return f" · {'≈' if approximate else ''}{ratio:,.1f}x"


#: Figures whose names carry what they count (api-cost: ``restart_req:LIST secrets``).
BY_KIND = {"api-cost": ("restart_req:", "requests per restart: {}")}


def _by_kind_rows(scenario: str, results: dict[str, Any]) -> list[Row]:
    """A row per ``BY_KIND`` figure any tool recorded, in name order."""
    if scenario not in BY_KIND:
        return []
    prefix, label = BY_KIND[scenario]
    names = {name for scenarios in results.values()
             for name in ((scenarios.get(scenario) or {}).get("summary") or {})
             if name.startswith(prefix)}  # fmt: skip
    return [
        Row(name, label.format(name.removeprefix(prefix)), "", "lower") for name in sorted(names)
    ]


def table(scenario: str, results: dict[str, Any], repeat: int) -> list[str]:
    """The markdown table of one scenario: a row per figure, a column per tool that ran it."""
    tools = [t for t, s in results.items() if scenario in s and "summary" in s[scenario]]
    if not tools:
        return []
    lines = ["| Figure | " + " | ".join(tools) + " |", "|---|" + "---:|" * len(tools)]
    for row in (*ROWS[scenario], *_by_kind_rows(scenario, results)):
        medians = _medians(row, scenario, results)
        if not any(t in medians for t in tools):
            continue
        best = None
        if row.better is not None and medians:
            best = min(medians.values()) if row.better == "lower" else max(medians.values())
        best_projected = any(
            projected(row, results[t][scenario]) for t, m in medians.items() if m == best
        )
        cells = [cell(row, results[t][scenario], best, repeat, best_projected) for t in tools]
        unit = f" ({row.unit})" if row.unit and row.unit != "x" else ""
        lines.append(f"| {row.label}{unit} | " + " | ".join(cells) + " |")
    return lines


def failures(results: dict[str, Any]) -> list[str]:
    """Runs that raised instead of producing metrics."""
    found = []
    for tool, scenarios in results.items():
        for name, scenario in scenarios.items():
            found += [f"{tool} {name}: {err}" for err in scenario.get("errors", [])]
    return found


def _times(n: int) -> str:
    return f"{n} repetition" + ("" if n == 1 else "s")


def _skipped(scenario: str, results: dict[str, Any]) -> list[str]:
    """ "Not run for A, B: why." lines, tools grouped by reason."""
    reasons: dict[str, list[str]] = {}
    for tool, scenarios in results.items():
        if "skipped" in scenarios.get(scenario, {}):
            reasons.setdefault(scenarios[scenario]["skipped"], []).append(tool)
    return [f"Not run for {', '.join(tools)}: {why}." for why, tools in reasons.items()] + (
        [""] if reasons else []
    )


def _link(plot: Path, page: Path) -> str:
    return os.path.relpath(plot, page.parent).replace(os.sep, "/")


def _tools(document: dict[str, Any]) -> list[str]:
    lines = [
        "| Tool | Version | Flags beyond its defaults | A rollout shows as |",
        "|---|---|---|---|",
    ]
    for label, info in document["tools"].items():
        flags = " ".join(info["args"]) or "none"
        note = f" ({info['note']})" if info.get("note") else ""
        own = info["kind"] in (targets.KUBE_NUDGE, targets.MINIMAL) and info.get("commit")
        version = f"{info['version']} at {info['commit']}" if own else info["version"]
        lines.append(f"| {label} | {version} | `{flags}`{note} "
                     f"| {info.get('marker', '')} |")  # fmt: skip
    return lines


def provenance(document: dict[str, Any]) -> list[str]:
    """A warning block when the measured tree was not a commit: dirty (``BENCH_ALLOW_DIRTY``)
    or changed during the run. Results from before ``tree`` was recorded are judged by their
    commit's ``+dirty`` mark."""
    tree, machine = document.get("tree") or {}, document["machine"]
    commit = tree.get("commit") or str(machine.get("git_commit", "unknown")).split("+")[0]
    dirty, end = list(tree.get("dirty") or []), tree.get("end")
    legacy = not tree and ("+dirty" in f"{machine.get('git_commit')}{machine.get('git_commit_end')}"
                           or machine.get("git_commit_end"))  # fmt: skip
    if not (dirty or end or legacy):
        return []
    if dirty:
        what = f"commit {commit} with uncommitted changes: " + ", ".join(f"`{d}`" for d in dirty)
    elif end:
        what = f"commit {commit}, and the tree changed during the run"
    else:
        what = (f"commit {machine.get('git_commit')}, changed to "
                f"{machine.get('git_commit_end') or 'a dirty tree'} during the run")  # fmt: skip
    if end and dirty:
        what += f"; at the end: {end['commit']} " + ", ".join(f"`{d}`" for d in end["dirty"])
    return [
        f"> **Measured on a dirty tree**: {what}. These figures belong to no commit; measure "
        "them again on a committed tree before quoting them.",
        "",
    ]


def markdown(document: dict[str, Any], out: Output) -> str:
    """The whole BENCHMARKS.md page (the latest one with its newer companion runs)."""
    if out.data.resolve() == outputs("latest").data.resolve():
        document = companions.with_companions(document, out.data.parent)
    machine, sizes, results = document["machine"], document["sizes"], document["results"]
    repeat = sizes["repeat"]
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `make bench` (bench/report.py); edits are overwritten. -->",
        "",
        *provenance(document),
        f"Run {document['generated']} ({document['mode']} sizes) of kube-nudge at commit "
        f"{str(machine['git_commit']).split('+')[0]} on Kubernetes "
        f"{machine.get('kubernetes', 'unknown')}, {document['duration_min']:.1f} min in all, tools "
        + ", ".join(f"{label} {info['version']}" for label, info in document["tools"].items())
        + ". Every scenario ran once per tool and repetition, each time on a fresh local "
        "control plane, with the tool as a subprocess (tools take turns within a repetition). "
        f"Each cell is the median over {_times(repeat)} (memory: "
        f"{_times(sizes['memory_repeat'])}) with the min-max beside it, then how many times "
        "the best tool in that row it is.",
        "",
    ]
    if document.get("peers_missing"):
        missing = ", ".join(document["peers_missing"])
        lines += [
            f"**Peers not given** (`BENCH_PEERS`): {missing}; this run compares no peer "
            "with kube-nudge. See *The peers* below.",
            "",
        ]
    errors = failures(results)
    if errors:
        lines += ["**Failed runs:**", "", *[f"- {e}" for e in errors], ""]
    lines += ["## kube-nudge's targets", "", *targets.table(document), ""]
    for number, scenario in enumerate(
        (s for s in ROWS if any(s in r for r in results.values())), start=1
    ):
        companion = document.get("companions", {}).get(scenario)
        lines += [f"## {number}. {TITLES[scenario]}", ""]
        if companion:
            lines += [companions.intro(scenario, companion), ""]
        intro_sizes = companion["sizes"] if companion else sizes
        lines += [scenario_intro(scenario, intro_sizes), ""]
        lines += [*table(scenario, results, intro_sizes["repeat"]), ""]
        lines += _skipped(scenario, results)
        for name, title in plots.FOR_SCENARIO.get(scenario, ()):
            prefix = f"{scenario}-" if companion else out.prefix
            drawn = companion["plots"] if companion else document.get("plots", [])
            if f"{prefix}{name}" in drawn or (not companion and name in drawn):
                plot = out.plots / f"{prefix}{name}.png"
                lines += [f"![{title}]({_link(plot, out.page)})", ""]
    lines += ["## Tools", "", *_tools(document), ""]
    if document.get("note"):
        lines += [f"Note: {document['note']}", ""]
    lines += [
        "## Machine",
        "",
        f"- {machine['nproc']} CPUs ({machine['cpu_model']}), {machine['memory_gib']} GiB "
        f"memory, Linux {machine['kernel']}",
        f"- Python {machine['python']}, kube-nudge {machine['kube_nudge']} "
        f"(commit {machine['git_commit']}"
        + (
            f", **changed to {machine['git_commit_end']} during the run**"
            if machine.get("git_commit_end")
            else ""
        )
        + ")",
        f"- Kubernetes {machine['kubernetes']}, etcd {machine['etcd']}, kwok {machine['kwok']}",
        "- Everything (etcd, apiserver, controller-manager, scheduler, kwok, the tool and the "
        "benchmark driver) shares these CPUs, so figures include contention.",
        "",
        "## Reproduce",
        "",
        "```sh",
        document["command"],
        "```",
        "",
        "`BENCH_PEERS=reloader=PATH@VERSION,wave=PATH@VERSION` adds the peers "
        "(without it kube-nudge runs alone); `BENCH_QUICK=1` is a small smoke run (results "
        "in bench/results/quick.*); `BENCH_REPEAT=N` sets the repetitions, "
        "`BENCH_MEMORY_REPEAT=N` those of the memory scenario alone, "
        "`BENCH_SCENARIOS=latency,fanout` picks scenarios, `BENCH_TOOLS=kube-nudge,wave` "
        "picks tools, `BENCH_NOTE='...'` adds a note under *Tools* (never how a peer was "
        "built), `BENCH_ROLL_TIMEOUT=S` sets how long a fan-out or burst may take before "
        "the rest is projected, `BENCH_AGENT_SWAPS=N` sets the reload agent's swaps per setting "
        "(`BENCH_SCENARIOS=agent` alone starts no cluster), `BENCH_NODE_PODS=N` the real "
        "node's pods in `agent-node` (it needs root and the host packages), "
        "`BENCH_TOOL_ARGS='--workers 64'` adds kube-nudge flags, "
        "`BENCH_SCENARIOS=scale` runs the scale scenario (never by default: at its full size, "
        "100,000 Secrets and 10,000 Deployments over 1,000 namespaces, it takes well over 10 "
        "minutes; `BENCH_SCALE_SECRETS=N`, `BENCH_SCALE_WORKLOADS=N`, "
        "`BENCH_SCALE_NAMESPACES=N` size it down), `BENCH_ALLOW_DIRTY=1` runs on a tree that "
        "differs from its commit (refused otherwise; the results and this page then say so), and "
        "`BENCH_OUTPUT=name` writes bench/results/name.* (`BENCH_OUTPUT=/some/dir`: that "
        "directory) instead of latest.json, its plots and this page.",
        "",
        *BUILDING,
        "",
        *method(sizes),
    ]
    return "\n".join(lines) + "\n"


def _clean(value: Any) -> Any:
    """NaN → null, so the JSON is standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write(document: dict[str, Any], out: Output) -> None:
    """Save the results, draw the plots, write the page."""
    out.data.parent.mkdir(parents=True, exist_ok=True)
    out.data.write_text(json.dumps(_clean(document), indent=2) + "\n")  # first: it is the data
    out.plots.mkdir(parents=True, exist_ok=True)
    document["plots"] = plots.draw(document["results"], out.plots, out.prefix)
    out.data.write_text(json.dumps(_clean(document), indent=2) + "\n")
    out.page.write_text(markdown(document, out))


def main(argv: list[str]) -> int:
    """Regenerate a page (and its plots) from saved results: ``[RESULTS.json [OUT.md]]``."""
    source = Path(argv[0]) if argv else ROOT / "bench" / "results" / "latest.json"
    document = json.loads(source.read_text())
    if "tools" not in document:
        print(f"{source} is from before peers were compared; `make bench` rewrites it",
              file=sys.stderr)  # fmt: skip
        return 1
    document = companions.load(source)
    out = outputs("latest")
    if argv:
        in_dir = source.name == "results.json"  # BENCH_OUTPUT=/some/dir
        page = source.parent / "BENCHMARKS.md" if in_dir else source.with_suffix(".md")
        prefix = "" if in_dir else f"{source.stem}-"
        out = Output(source, Path(argv[1]) if len(argv) > 1 else page, source.parent, prefix,
                     out.logs)  # fmt: skip
    out.plots.mkdir(parents=True, exist_ok=True)
    document["plots"] = plots.draw(document["results"], out.plots, out.prefix)
    out.page.write_text(markdown(document, out))
    print(f"wrote {out.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
