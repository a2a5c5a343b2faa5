"""``make bench``: every scenario for kube-nudge and each peer given, then results and the page.

Per scenario and repetition the tools take turns, each on a fresh local cluster; a scenario
in ``LOCAL`` (the reload agent's) starts no cluster.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import re
import shlex
import sys
import time
import traceback
from dataclasses import asdict
from typing import Any

from bench import docfigures, report
from bench.config import ROOT, BenchConfig, Output, from_env, note_env
from bench.gitstate import refusal, tree_state
from bench.lineup import Entry, lineup
from bench.objects import bench_client
from bench.peers import PEERS
from bench.peers.given import redacted
from bench.procfs import machine
from bench.progress import say
from bench.scenarios import (
    Context,
    LocalContext,
    LocalScenario,
    Metrics,
    Scenario,
    agent,
    agent_node,
    analysis,
    api_cost,
    burst,
    fanout,
    flapping,
    latency,
    memory,
    scale,
    writers,
)
from bench.stats import spread
from bench.tools import Tool, ToolSettings
from kube_nudge_dev.cluster import LocalCluster

SCENARIOS: dict[str, Scenario] = {
    "latency": latency.run_fast,
    "latency-debounce": latency.run_debounced,
    "writers": writers.run,
    "fanout": fanout.run,
    "burst": burst.run,
    "memory": memory.run,
    "api-cost": api_cost.run,
    "flapping": flapping.run,
    "agent-node": agent_node.run,  # joins the real node (root, containerd: docs/contributing.md)
    "analysis": analysis.run,  # kube-nudge alone: the peers gate nothing on metrics
    "scale": scale.run,  # only when named in BENCH_SCENARIOS (config.EXTRA_SCENARIOS)
}
#: Scenarios that need no cluster: the reload agent runs beside the app, not against the API.
LOCAL: dict[str, LocalScenario] = {"agent": agent.run}
Run = tuple[Metrics, dict[str, Any]]


def run_once(config: BenchConfig, entry: Entry, scenario: str, label: str) -> Run:
    """One repetition of one scenario for one tool, in a fresh cluster (none for ``LOCAL``)."""
    if scenario in LOCAL:
        ctx = LocalContext(config.sizes, config.out().logs, f"{_slug(entry.label)}-{label}")
        return LOCAL[scenario](ctx), ctx.series
    with LocalCluster() as cluster:
        say(f"  cluster up in {cluster.startup_seconds:.1f} s")
        return asyncio.run(_in_cluster(config, cluster, entry, scenario, label))


async def _in_cluster(
    config: BenchConfig, cluster: LocalCluster, entry: Entry, scenario: str, label: str
) -> Run:
    kube = bench_client(cluster.kubeconfig)
    made: list[Tool] = []
    logs = config.out().logs

    def factory(settings: ToolSettings) -> Tool:
        log_path = logs / f"{_slug(entry.label)}-{label}-{len(made)}.log"
        log_path.unlink(missing_ok=True)
        made.append(entry.tool(log_path, settings))
        return made[-1]

    ctx = Context(cluster, kube, config.sizes, factory, profile=config.profile)
    try:
        metrics = await SCENARIOS[scenario](ctx)
        return metrics, ctx.series
    finally:
        for instance in made:
            await asyncio.to_thread(instance.stop)
        await kube.aclose()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def run_scenario(config: BenchConfig, entries: list[Entry], scenario: str) -> dict[str, Any]:
    """Every repetition of a scenario for every tool, tools taking turns; with spreads."""
    repeat = config.sizes.memory_repeat if scenario == "memory" else config.sizes.repeat
    found: dict[str, Any] = {}
    for entry in entries:
        reason = entry.why_not(scenario)
        empty: dict[str, Any] = {"runs": [], "series": [], "errors": []}
        found[entry.label] = {"skipped": reason} if reason else empty
    for rep in range(1, repeat + 1):
        for entry in entries:
            data = found[entry.label]
            if "skipped" in data:
                continue
            say(f"{entry.label} / {scenario}: run {rep}/{repeat}")
            started = time.monotonic()
            try:
                metrics, series = run_once(config, entry, scenario, f"{scenario}-{rep}")
                data["runs"].append(metrics)
                data["series"].append(series)
            except Exception as exc:
                traceback.print_exc()
                data["errors"].append(f"run {rep}: {type(exc).__name__}: {exc}")
                say(f"  FAILED: {data['errors'][-1]}")
            say(f"  run took {time.monotonic() - started:.0f} s")
    for data in found.values():
        if "runs" in data:
            names = sorted({name for run in data["runs"] for name in run})
            data["summary"] = {
                name: spread([run[name] for run in data["runs"] if name in run]) for name in names
            }
    return found


def command() -> str:
    """The command that reproduces this run (the BENCH_* variables it had, then make); the
    peers' paths and build commits left out (``NAME=PATH@VERSION``)."""
    shown = {k: v for k, v in os.environ.items() if k.startswith("BENCH_")}
    if "BENCH_PEERS" in shown:
        shown["BENCH_PEERS"] = redacted(shown["BENCH_PEERS"])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items()))
    return f"{env} make bench".strip()


def main() -> int:
    """Run, save, report; exit 1 if any run failed, 2 on bad settings."""
    try:
        config = from_env(tuple(PEERS))
        entries = lineup(config)
    except ValueError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    tree = tree_state(ROOT)
    if tree.dirty and not config.allow_dirty:
        print(f"bench: {refusal(tree)}", file=sys.stderr)
        return 2
    if tree.dirty:
        say(f"WARNING: measuring a dirty tree ({tree.label()}): {', '.join(tree.dirty)}")
    out: Output = config.out()
    started = time.monotonic()
    facts = machine(ROOT)
    missing = [name for name in PEERS if name not in {p.name for p in config.peers}]
    say(f"{'quick' if config.quick else 'full'} run: tools {', '.join(e.label for e in entries)};"
        f" scenarios {', '.join(config.scenarios)}; sizes {asdict(config.sizes)}")  # fmt: skip
    if missing:
        say(f"peers not given (BENCH_PEERS): {', '.join(missing)}; running without them")
    results: dict[str, dict[str, Any]] = {e.label: {} for e in entries}
    for scenario in config.scenarios:
        for label, data in run_scenario(config, entries, scenario).items():
            results[label][scenario] = data
    tools = {e.label: e.describe() for e in entries}
    recorded = tree.record()
    document: dict[str, Any] = {
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if config.quick else "full",
        "duration_min": round((time.monotonic() - started) / 60, 1),
        "command": command(),
        "tool_args": list(config.tool_args),
        "machine": facts,
        "sizes": asdict(config.sizes),
        "tools": tools,
        "peers_missing": missing,
        "note": note_env(),
        "tree": recorded,
        "results": results,
    }
    end = tree_state(ROOT)
    if end != tree:
        say(f"WARNING: the checkout changed during the run: {tree.label()} -> {end.label()}")
        recorded["end"] = end.record()
        facts["git_commit_end"] = machine(ROOT)["git_commit"]
    report.write(document, out)
    try:
        for path in docfigures.update():
            say(f"wrote the benchmark figures of {path.relative_to(ROOT)}")
    except docfigures.DirtySource as refused:  # BENCH_ALLOW_DIRTY: the pages keep their figures
        say(f"left every page's figures as they were: {refused}")
    for scenario in config.scenarios:
        print("\n".join(report.table(scenario, results, config.sizes.repeat)), flush=True)
    say(f"wrote {out.data}, {out.page} and plots in {out.plots}")
    failed = report.failures(results)
    for failure in failed:
        say(f"FAILED {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
