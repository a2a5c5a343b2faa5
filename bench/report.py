"""Turn a results document into ``latest.json`` and the ``BENCHMARKS.md`` page.

``python -m bench.report [RESULTS.json [OUT.md]]`` regenerates the page from saved results.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True, slots=True)
class Row:
    """One metric shown in the table; ``limit`` makes it a target."""

    scenario: str
    metric: str
    label: str
    unit: str
    limit: float | str | None = None  # a number, or the name of a metric it must equal
    exact: bool = False  # every run must equal ``limit``; else the median must be below it


ROWS = (
    Row("latency", "p50_ms", "reaction latency p50", "ms"),
    Row("latency", "p99_ms", "reaction latency p99", "ms", 100.0),
    Row("latency", "max_ms", "reaction latency max", "ms"),
    Row("latency", "p99_from_send_ms", "p99 counted from sending the PATCH instead", "ms"),
    Row("latency", "patch_p50_ms", "the PATCH's own round trip, p50", "ms"),
    Row("latency-debounce", "p50_ms", "reaction latency p50, default debounce 2 s", "ms"),
    Row("latency-debounce", "p99_ms", "reaction latency p99, default debounce 2 s", "ms"),
    Row("latency-debounce", "max_ms", "reaction latency max, default debounce 2 s", "ms"),
    Row("fanout", "fanout_s", "all workloads rolled after the change", "s", 10.0),
    Row("fanout", "fanout_first_ms", "first workload rolled", "ms"),
    Row("fanout", "fanout_half_s", "half of the workloads rolled", "s"),
    Row("fanout", "change_writes", "workload writes for the change", "", "workloads", True),
    Row("fanout", "change_writes_per_s", "write rate during the fan-out", "/s"),
    Row("fanout", "fanout_tool_cpu_s", "tool CPU time during the fan-out", "s"),
    Row("fanout", "fanout_machine_busy_pct", "machine CPU busy during the fan-out", "%"),
    Row("fanout", "wrong_or_missing", "final hash missing or wrong", "", 0.0, True),
    Row("fanout", "adopt_s", "adoption of all workloads (from process start)", "s"),
    Row("fanout", "adopt_writes", "workload writes for adoption", "", "workloads", True),
    Row("fanout", "restart_writes", "writes during the restart storm", "", 0.0, True),
    Row("fanout", "restart_ready_s", "slowest restart to ready", "s"),
    Row("memory", "ready_s", "process start to /readyz 200", "s"),
    Row("memory", "sync_cpu_s", "tool CPU time from start to ready", "s"),
    Row("memory", "peak_rss_sync_mib", "peak RSS over initial sync (VmHWM)", "MiB", 150.0),
    Row("memory", "steady_rss_mib", "steady RSS (VmRSS) after ready", "MiB", 150.0),
    Row("memory", "peak_rss_total_mib", "peak RSS incl. adopting every workload", "MiB"),
    Row("memory", "adopt_s", "adoption of all workloads (from process start)", "s"),
)


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


def _limit(row: Row, runs: list[dict[str, float]]) -> float | None:
    if isinstance(row.limit, str):
        values = {run.get(row.limit) for run in runs if row.limit in run}
        return values.pop() if len(values) == 1 else None
    return row.limit


def verdict(row: Row, summary: dict[str, Any], runs: list[dict[str, float]]) -> tuple[str, str]:
    """(target text, status text) for a row, honest about spread over runs."""
    limit = _limit(row, runs)
    if row.limit is None or limit is None or not summary.get("values"):
        return "", ""
    values = summary["values"]
    if row.exact:
        missed = [v for v in values if v != limit]
        return f"= {_fmt(limit)}", "met" if not missed else f"**missed** ({len(missed)} runs)"
    target = f"< {_fmt(limit)} {row.unit}"
    if summary["median"] >= limit:
        return target, "**missed**"
    if summary["max"] >= limit:
        return target, f"met (median); worst run {_fmt(summary['max'])} missed"
    return target, "met"


def table(results: dict[str, Any]) -> list[str]:
    """The markdown results table (one row per tool and metric)."""
    lines = [
        "| Tool | Scenario | Metric | Median | Min - max | Target | Status |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for tool, scenarios in results.items():
        for row in ROWS:
            scenario = scenarios.get(row.scenario)
            if scenario is None or row.metric not in scenario["summary"]:
                continue
            summary = scenario["summary"][row.metric]
            target, status = verdict(row, summary, scenario["runs"])
            unit = f" {row.unit}" if row.unit else ""
            lines.append(
                f"| {tool} | {row.scenario} | {row.label} | {_fmt(summary['median'])}{unit} "
                f"| {_fmt(summary['min'])} - {_fmt(summary['max'])} | {target} | {status} |"
            )
    return lines


def failures(results: dict[str, Any]) -> list[str]:
    """Runs that raised instead of producing metrics."""
    found = []
    for tool, scenarios in results.items():
        for name, scenario in scenarios.items():
            found += [f"{tool} {name}: {err}" for err in scenario.get("errors", [])]
    return found


def markdown(document: dict[str, Any]) -> str:
    """The whole BENCHMARKS.md page."""
    machine, sizes = document["machine"], document["sizes"]
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `make bench` (bench/report.py); edits are overwritten. -->",
        "",
        f"Run {document['generated']} ({document['mode']} sizes), "
        f"{document['duration_min']:.1f} min in all. Every scenario ran in a fresh local "
        "control plane with the tool as a subprocess; each figure is the median over "
        f"repetitions (latency, fan-out: {sizes['repeat']}; memory: {sizes['memory_repeat']}), "
        "with the spread over repetitions beside it.",
        "",
        *table(document["results"]),
        "",
    ]
    if document.get("tool_args"):
        lines += [f"Extra tool flags: `{' '.join(document['tool_args'])}`.", ""]
    errors = failures(document["results"])
    if errors:
        lines += ["**Failed runs:**", "", *[f"- {e}" for e in errors], ""]
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
        "`BENCH_QUICK=1 make bench` is a small smoke run (results in bench/results/quick.*); "
        "`BENCH_REPEAT=N` sets the repetitions, `BENCH_MEMORY_REPEAT=N` those of the memory "
        "scenario alone, `BENCH_SCENARIOS=latency,fanout` picks scenarios, "
        "`BENCH_TOOL_ARGS='--workers 64'` adds tool flags, and `BENCH_OUTPUT=name` writes "
        "bench/results/name.* instead of latest.json and this page.",
        "",
        *_method(sizes),
    ]
    return "\n".join(lines) + "\n"


def _method(sizes: dict[str, Any]) -> list[str]:
    return [
        "## What is measured",
        "",
        f"- **latency**: 1 ConfigMap, 1 opted-in Deployment (0 replicas) reading one key via "
        f"`configMapKeyRef`; `--debounce 0 --max-rollouts 1000/1m`. After adoption, "
        f"{sizes['latency_changes']} sequential changes of that key. Latency = from the PATCH "
        "response to the arrival, on a watch opened beforehand, of the Deployment event whose "
        "pod-template `kube-nudge.io/config-hash` changed.",
        f"- **latency-debounce**: the same with the default debounce (2 s), "
        f"{sizes['debounce_changes']} changes.",
        f"- **fanout**: 1 ConfigMap consumed by {sizes['fanout_workloads']:,} opted-in "
        "Deployments, `--debounce 0`. After all are adopted, one change; time from the PATCH "
        "response until every template carries a new hash (one collection watch). Writes are "
        "counted from the apiserver audit log (user agent `kube-nudge/`, Events are not "
        "audited); final hashes are checked against the hash recomputed from the API. Then "
        f"the restart storm: {sizes['restarts']} x (SIGTERM, start, ready, "
        f"{sizes['restart_pause']:g} s), counting every write by kube-nudge.",
        f"- **memory**: {sizes['memory_secrets']:,} Secrets of "
        f"{sizes['secret_bytes'] // 1024} KiB random data and {sizes['memory_workloads']:,} "
        f"opted-in Deployments (each reads one Secret) over {sizes['memory_namespaces']} "
        "namespaces. Process start to `/readyz` 200; VmHWM of the process when it turns "
        f"ready; VmRSS {sizes['steady_after']:g} s later.",
        "",
    ]


def _clean(value: Any) -> Any:
    """NaN → null, so the JSON is standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def write(document: dict[str, Any], json_path: Path, md_path: Path) -> None:
    """Save the results and the page."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(_clean(document), indent=2) + "\n")
    md_path.write_text(markdown(document))


def main(argv: list[str]) -> int:
    """Regenerate a page from saved results."""
    source = Path(argv[0]) if argv else RESULTS / "latest.json"
    target = Path(argv[1]) if len(argv) > 1 else ROOT / "BENCHMARKS.md"
    target.write_text(markdown(json.loads(source.read_text())))
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
