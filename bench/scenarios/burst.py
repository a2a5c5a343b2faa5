"""Burst: many ConfigMaps, each consumed by one opted-in Deployment, all changed at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from bench.objects import CREATE_CONCURRENCY, configmap, configmap_env, create_all, deployment
from bench.procfs import CpuMeter
from bench.progress import say
from bench.rolling import wait_rolled
from bench.scenarios import Context, Metrics
from bench.scenarios.fanout import cpu_metrics, outcome
from bench.scenarios.phases import SETTLE, adopt_then_start
from bench.tools import Tool, ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge_dev.admin import AdminClient

KEY = "LEVEL"
SETTINGS = ToolSettings(debounce="0")


def pairs(namespace: str, count: int, opt_in: dict[str, str]) -> Iterator[tuple[str, JSON]]:
    """ConfigMap ``config-N`` and Deployment ``app-N`` reading its key, for each N."""
    for n in range(count):
        name = f"config-{n:05d}"
        yield CONFIGMAPS.path(namespace), configmap(name, {KEY: "0"})
        yield DEPLOYMENTS.path(namespace), deployment(f"app-{n:05d}", opt_in,
                                                      [configmap_env(name, KEY)])  # fmt: skip


async def change_all(
    kube: AdminClient, tool: Tool, namespace: str, count: int, value: str
) -> float:
    """PATCH every ConfigMap with CREATE_CONCURRENCY senders, telling ``tool`` of each as
    it is answered; return seconds it took."""
    numbers = iter(range(count))
    started = time.perf_counter()

    async def sender() -> None:
        for n in numbers:
            path = CONFIGMAPS.path(namespace, f"config-{n:05d}")
            await kube.merge_patch(path, {"data": {KEY: value}})
            tool.changed(namespace, [f"app-{n:05d}"], value)

    await asyncio.gather(*(sender() for _ in range(CREATE_CONCURRENCY)))
    return time.perf_counter() - started


async def run(ctx: Context) -> Metrics:
    """Create the pairs, let the tool take them in, change every ConfigMap at once."""
    namespace = await ctx.namespace()
    count = ctx.sizes.burst_workloads
    probe = ctx.make_tool(SETTINGS)
    await create_all(ctx.kube, pairs(namespace, count, probe.opt_in()), 2 * count,
                     "configmaps and deployments")  # fmt: skip
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), probe) as watch:
        tool, metrics = await adopt_then_start(ctx, SETTINGS, watch, count)
        before = watch.markers()
        mark = ctx.audit.mark()
        assert tool.pid is not None
        cpu, sampler = CpuMeter(tool.pid), ctx.sampler()
        sampler.start(tool.pid)
        t0 = time.perf_counter()
        sent = await change_all(ctx.kube, tool, namespace, count, "1")
        say(f"  sent {count} ConfigMap changes in {sent:.2f} s")
        rolled = await wait_rolled(watch, before, count, t0, ctx.sizes.roll_timeout)
        tool_cpu, machine_busy = cpu.read()
        profile = sampler.stop()
        if not rolled.complete:  # stop it at the limit: the counts below are of that moment
            await asyncio.to_thread(tool.stop)
        await asyncio.sleep(SETTLE)
        metrics |= await outcome(ctx, tool, namespace, before, rolled, mark)
    ctx.series["rolled_s"] = rolled.times
    ctx.series["limit_s"] = rolled.limit
    return {"workloads": count, **metrics, "send_s": round(sent, 3),
            **cpu_metrics(tool_cpu, machine_busy, metrics), **profile}  # fmt: skip
