"""``make bench``: run every scenario for every tool, write results and BENCHMARKS.md."""

from __future__ import annotations

import asyncio
import datetime
import os
import shlex
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import report
from bench.config import BenchConfig, from_env
from bench.objects import bench_client
from bench.procfs import machine
from bench.progress import say
from bench.scenarios import Context, Metrics, Scenario, fanout, latency, memory
from bench.stats import spread
from bench.tools import Tool, ToolSettings, make_tool
from kube_nudge_dev.cluster import LocalCluster

SCENARIOS: dict[str, Scenario] = {
    "latency": latency.run_fast,
    "latency-debounce": latency.run_debounced,
    "fanout": fanout.run,
    "memory": memory.run,
}
LOGS = report.RESULTS / "logs"


def run_once(config: BenchConfig, tool: str, scenario: str, label: str) -> Metrics:
    """One repetition of one scenario in a fresh cluster."""
    with LocalCluster() as cluster:
        say(f"  cluster up in {cluster.startup_seconds:.1f} s")
        return asyncio.run(_in_cluster(config, cluster, tool, scenario, label))


async def _in_cluster(
    config: BenchConfig, cluster: LocalCluster, tool: str, scenario: str, label: str
) -> Metrics:
    kube = bench_client(cluster.kubeconfig)
    made: list[Tool] = []

    def factory(settings: ToolSettings) -> Tool:
        settings = replace(settings, extra_args=settings.extra_args + config.tool_args)
        made.append(make_tool(tool, LOGS, f"{label}-{len(made)}", settings))
        return made[-1]

    ctx = Context(cluster, kube, config.sizes, factory)
    try:
        return await SCENARIOS[scenario](ctx)
    finally:
        for instance in made:
            await asyncio.to_thread(instance.stop)
        await kube.aclose()


def run_scenario(config: BenchConfig, tool: str, scenario: str) -> dict[str, Any]:
    """Every repetition of a scenario, with the spread of each metric."""
    sizes = config.sizes
    repeat = sizes.memory_repeat if scenario == "memory" else sizes.repeat
    runs: list[Metrics] = []
    errors: list[str] = []
    for rep in range(1, repeat + 1):
        say(f"{tool} / {scenario}: run {rep}/{repeat}")
        started = time.monotonic()
        try:
            runs.append(run_once(config, tool, scenario, f"{scenario}-{rep}"))
        except Exception as exc:
            traceback.print_exc()
            errors.append(f"run {rep}: {type(exc).__name__}: {exc}")
            say(f"  FAILED: {errors[-1]}")
        say(f"  run took {time.monotonic() - started:.0f} s")
    metrics = sorted({name for run in runs for name in run})
    summary = {name: spread([run[name] for run in runs if name in run]) for name in metrics}
    return {"runs": runs, "summary": summary, "errors": errors}


def command() -> str:
    """The command that reproduces this run (the BENCH_* variables it had, then make)."""
    env = " ".join(
        f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("BENCH_")
    )
    return f"{env} make bench".strip()


def outputs(config: BenchConfig) -> tuple[Path, Path]:
    """Where results go: latest.json + BENCHMARKS.md for a full run, else results/NAME.*"""
    name = config.output or ("quick" if config.quick else "latest")
    if name == "latest":
        return report.RESULTS / "latest.json", report.ROOT / "BENCHMARKS.md"
    return report.RESULTS / f"{name}.json", report.RESULTS / f"{name}.md"


def main() -> int:
    """Run, save, report; exit 1 if any run failed."""
    config = from_env()
    started = time.monotonic()
    facts = machine(report.ROOT)
    say(f"{'quick' if config.quick else 'full'} run: tools {', '.join(config.tools)}; "
        f"scenarios {', '.join(config.scenarios)}; sizes {asdict(config.sizes)}")  # fmt: skip
    results: dict[str, dict[str, Any]] = {}
    for tool in config.tools:
        for scenario in config.scenarios:
            results.setdefault(tool, {})[scenario] = run_scenario(config, tool, scenario)
    document = {
        "generated": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if config.quick else "full",
        "duration_min": round((time.monotonic() - started) / 60, 1),
        "command": command(),
        "tool_args": list(config.tool_args),
        "machine": facts,
        "sizes": asdict(config.sizes),
        "results": results,
    }
    end_commit = machine(report.ROOT)["git_commit"]
    if end_commit != facts["git_commit"]:
        say(f"WARNING: the checkout changed during the run: {facts['git_commit']} -> {end_commit}")
        facts["git_commit_end"] = end_commit
    data, page = outputs(config)
    report.write(document, data, page)
    print("\n".join(report.table(results)), flush=True)
    say(f"wrote {data} and {page}")
    failed = report.failures(results)
    for failure in failed:
        say(f"FAILED {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
