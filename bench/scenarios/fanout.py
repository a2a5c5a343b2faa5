"""Fan-out: one ConfigMap consumed by many opted-in Deployments, changed once; then a
restart storm, which must write nothing because nothing changed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from bench.objects import configmap, configmap_env, create_all, deployment
from bench.procfs import CpuMeter, quiet
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, Seen, WorkloadWatcher
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS

CONFIGMAP = "shared-config"
KEY = "LEVEL"
SETTINGS = ToolSettings(debounce="0")
SETTLE = 3.0  # seconds to wait before counting writes, so late or duplicate ones show
TIMEOUT = 600.0


async def run(ctx: Context) -> Metrics:
    """Create the workloads, let the tool adopt them, change the ConfigMap, restart."""
    namespace = await ctx.namespace()
    tool = await ctx.tool(SETTINGS)
    count = ctx.sizes.fanout_workloads
    await create_workloads(ctx, tool, namespace, count)
    metrics: Metrics = {"workloads": count}
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), tool) as watch:
        await watch.until(lambda: _all(watch, count, lambda s: s.settled), TIMEOUT, "rollout")
        metrics |= await adopt(ctx, tool, watch, count)
        await wait_quiet(tool)
        metrics |= await change_once(ctx, tool, watch, namespace, count)
        await wait_quiet(tool)
        metrics |= await restart_storm(ctx, tool, watch)
    return metrics


async def create_workloads(ctx: Context, tool: Tool, namespace: str, count: int) -> None:
    """One ConfigMap and ``count`` Deployments consuming one of its keys."""
    await ctx.kube.create(CONFIGMAPS.path(namespace), configmap(CONFIGMAP, {KEY: "0"}))
    env = [configmap_env(CONFIGMAP, KEY)]
    path = DEPLOYMENTS.path(namespace)
    items = ((path, deployment(f"app-{n:05d}", tool.opt_in(), env)) for n in range(count))
    await create_all(ctx.kube, items, count, "deployments")


async def adopt(ctx: Context, tool: Tool, watch: WorkloadWatcher, count: int) -> Metrics:
    """Start the tool and wait until it has adopted every workload."""
    mark = ctx.audit.mark()
    started = time.perf_counter()
    tool.start(ctx.cluster.kubeconfig)
    ready = await tool.wait_ready(TIMEOUT)
    await watch.until(lambda: _all(watch, count, lambda s: s.adopted), TIMEOUT, "adoption")
    adopted = max(seen.adopted_at for seen in watch.seen.values()) - started
    await asyncio.sleep(SETTLE)
    writes = ctx.audit.writes(tool.writer_agent, mark)
    say(f"  ready in {ready:.2f} s, adopted {count} in {adopted:.1f} s "
        f"({writes.by_resource.get('deployments', 0)} writes)")  # fmt: skip
    return {
        "ready_s": round(ready, 3),
        "adopt_s": round(adopted, 3),
        "adopt_writes": writes.by_resource.get("deployments", 0),
    }


async def wait_quiet(tool: Tool) -> None:
    """Let the tool and the cluster finish background work before the next phase."""
    assert tool.pid is not None
    waited, busy = await quiet(tool.pid)
    say(f"  quiet after {waited:.0f} s (machine {busy:.0%} busy)")


async def change_once(
    ctx: Context, tool: Tool, watch: WorkloadWatcher, namespace: str, count: int
) -> Metrics:
    """Change the ConfigMap; time until every workload carries a new marker."""
    before = watch.markers()
    mark = ctx.audit.mark()
    assert tool.pid is not None
    cpu = CpuMeter(tool.pid)
    await ctx.kube.merge_patch(CONFIGMAPS.path(namespace, CONFIGMAP), {"data": {KEY: "1"}})
    t0 = time.perf_counter()
    await watch.until(lambda: _rolled(watch, before) == count, TIMEOUT, "fan-out")
    tool_cpu, machine_busy = cpu.read()
    times = sorted(seen.marker_at - t0 for seen in watch.seen.values())
    await asyncio.sleep(SETTLE)
    writes = ctx.audit.writes(tool.writer_agent, mark)
    rate = _rate(writes.total, writes.first, writes.last)
    wrong = await wrong_markers(ctx, tool, namespace)
    say(f"  fan-out to {count} in {times[-1]:.2f} s (first {times[0] * 1000:.0f} ms), "
        f"{writes.total} writes ({rate:.0f}/s), {wrong} wrong or missing; {tool.name} used "
        f"{tool_cpu:.1f} CPU s, machine {machine_busy:.0%} busy")  # fmt: skip
    return {
        "fanout_s": round(times[-1], 3),
        "fanout_first_ms": round(times[0] * 1000, 1),
        "fanout_half_s": round(times[len(times) // 2], 3),
        "change_writes": writes.total,
        "change_writes_failed": writes.failed,
        "change_writes_per_s": round(rate, 1),
        "wrong_or_missing": wrong,
        "fanout_tool_cpu_s": round(tool_cpu, 2),
        "fanout_machine_busy_pct": round(machine_busy * 100, 1),
    }


async def wrong_markers(ctx: Context, tool: Tool, namespace: str) -> int:
    """Workloads whose marker is missing, or differs from what the tool says it should be."""
    objects = []
    async for items, _ in ctx.kube.list_pages(DEPLOYMENTS.path(namespace)):
        objects.extend(items)
    expected = await tool.expected_markers(ctx.kube, objects)
    markers = [tool.marker(obj) for obj in objects]
    known = {m for m in markers if m is not None}
    wrong = 0
    for marker, want in zip(markers, expected, strict=True):
        if marker is None or (want is not None and marker != want):
            wrong += 1
    if all(want is None for want in expected) and len(known) > 1:
        wrong += len(markers)  # same config everywhere, yet different markers
    return wrong


async def restart_storm(ctx: Context, tool: Tool, watch: WorkloadWatcher) -> Metrics:
    """Restart the tool a few times with nothing changed; count its writes meanwhile."""
    before = watch.markers()
    mark = ctx.audit.mark()
    ready_times, bad_exits = [], 0
    for n in range(1, ctx.sizes.restarts + 1):
        code = await asyncio.to_thread(tool.stop)
        bad_exits += code != 0
        tool.start(ctx.cluster.kubeconfig)
        ready_times.append(await tool.wait_ready(TIMEOUT))
        await asyncio.sleep(ctx.sizes.restart_pause)
        say(f"  restart {n}: ready again in {ready_times[-1]:.2f} s")
    await asyncio.sleep(1.0)
    writes = ctx.audit.writes(tool.writer_agent, mark)
    changed = sum(1 for key, marker in watch.markers().items() if before.get(key) != marker)
    say(f"  restart storm: {writes.total} writes {writes.by_resource}, {changed} markers changed")
    return {
        "restart_writes": writes.total,
        "restart_markers_changed": changed,
        "restart_bad_exits": bad_exits,
        "restart_ready_s": round(max(ready_times), 3),
    }


def _all(watch: WorkloadWatcher, count: int, condition: Callable[[Seen], bool]) -> bool:
    return len(watch.seen) == count and watch.count(condition) == count


def _rolled(watch: WorkloadWatcher, before: dict[Key, str | None]) -> int:
    return sum(
        1
        for key, seen in watch.seen.items()
        if seen.marker is not None and seen.marker != before.get(key)
    )


def _rate(total: int, first: float | None, last: float | None) -> float:
    if first is None or last is None or last <= first:
        return float("nan")
    return (total - 1) / (last - first)
