"""Fan-out: one ConfigMap consumed by many opted-in Deployments, changed once."""

from __future__ import annotations

import asyncio
import time

from bench.objects import configmap, configmap_env, create_all, deployment
from bench.procfs import CpuMeter
from bench.progress import say
from bench.rolling import Rolled, wait_rolled
from bench.scenarios import Context, Metrics
from bench.scenarios.phases import SETTLE, adopt_then_start, wrong_markers
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, WorkloadWatcher
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS

CONFIGMAP = "shared-config"
KEY = "LEVEL"
SETTINGS = ToolSettings(debounce="0")


async def run(ctx: Context) -> Metrics:
    """Create the workloads, let the tool take them in, change the ConfigMap once."""
    namespace = await ctx.namespace()
    count = ctx.sizes.fanout_workloads
    probe = ctx.make_tool(SETTINGS)  # never started: says how the tool marks workloads
    opt_in = probe.opt_in()
    await ctx.kube.create(CONFIGMAPS.path(namespace), configmap(CONFIGMAP, {KEY: "0"}))
    env = [configmap_env(CONFIGMAP, KEY)]
    path = DEPLOYMENTS.path(namespace)
    items = ((path, deployment(f"app-{n:05d}", opt_in, env)) for n in range(count))
    await create_all(ctx.kube, items, count, "deployments")
    async with WorkloadWatcher(ctx.kube, path, probe) as watch:
        tool, metrics = await adopt_then_start(ctx, SETTINGS, watch, count)
        before = watch.markers()
        mark = ctx.audit.mark()
        assert tool.pid is not None
        cpu, sampler = CpuMeter(tool.pid), ctx.sampler()
        sampler.start(tool.pid)
        await ctx.kube.merge_patch(CONFIGMAPS.path(namespace, CONFIGMAP), {"data": {KEY: "1"}})
        t0 = time.perf_counter()
        tool.changed(namespace, [f"app-{n:05d}" for n in range(count)], "1")
        rolled = await wait_rolled(watch, before, count, t0, ctx.sizes.roll_timeout)
        tool_cpu, machine_busy = cpu.read()
        profile = sampler.stop()
        if not rolled.complete:  # stop it at the limit: the counts below are of that moment
            await asyncio.to_thread(tool.stop)
        await asyncio.sleep(SETTLE)
        metrics |= await outcome(ctx, tool, namespace, before, rolled, mark)
    ctx.series["rolled_s"] = rolled.times
    ctx.series["limit_s"] = rolled.limit
    return {"workloads": count, **metrics, **cpu_metrics(tool_cpu, machine_busy, metrics),
            **profile}  # fmt: skip


def cpu_metrics(tool_cpu: float, machine_busy: float, metrics: Metrics) -> Metrics:
    """The tool's CPU while rolling, in all and per workload write, and the machine's load."""
    writes = metrics.get("change_writes") or 0
    return {
        "fanout_tool_cpu_s": round(tool_cpu, 2),
        "tool_cpu_ms_per_write": round(tool_cpu * 1000 / writes, 3) if writes else float("nan"),
        "fanout_machine_busy_pct": round(machine_busy * 100, 1),
    }


async def outcome(
    ctx: Context, tool: Tool, namespace: str, before: dict[Key, str | None], rolled: Rolled,
    mark: int,
) -> Metrics:  # fmt: skip
    """Figures of one change reaching many workloads: times, writes, wrong markers."""
    writes = ctx.audit.writes(tool.writer_agent, mark)
    wrong, unchanged = await wrong_markers(ctx, tool, namespace, before)
    total, state = rolled.total(), "" if rolled.complete else " (projected)"
    say(
        f"  {len(rolled.times)}/{rolled.expected} rolled, all in {total:.2f} s{state}; "
        f"{writes.total} writes, {wrong} markers missing or wrong, {unchanged} unchanged"
    )
    workload_writes = writes.by_resource.get("deployments", 0)
    span = (writes.last or 0.0) - (writes.first or 0.0)
    return {
        **rolled.metrics("fanout"),
        "change_writes": workload_writes,
        "change_writes_failed": writes.failed,
        "change_writes_per_s": round((workload_writes - 1) / span, 1) if span > 0 else float("nan"),
        "wrong_or_missing": wrong,
        "not_rolled": unchanged,
    }
