"""API cost: requests the API server serves per config change, and writes on a restart.

Many ConfigMap/Deployment pairs (as in the burst). First a control: with no tool running,
the benchmark itself changes a few ConfigMaps of a second namespace and writes each
Deployment's template once, as an ideal tool would; the API server's
``apiserver_request_total`` is read before and after. Then the tool takes the fleet in,
the same number of ConfigMaps change one at a time (each waited for), and the counter is
read again. The tool's requests per change = (its window - the control window) / changes
+ 1: both windows hold the benchmark's ConfigMap PATCH and the control plane's reaction to
a rollout; the control also holds the one template write an ideal tool makes.
Then the tool is restarted a few times with nothing changed: its writes (audit log),
requests per restart (Leases aside) in all and by verb and resource, and restart to ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bench import apimetrics
from bench.objects import create_all
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.scenarios.burst import KEY, pairs
from bench.scenarios.latency import marker_changed
from bench.scenarios.phases import SETTLE, adopt_then_start, wait_quiet
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS

SETTINGS = ToolSettings(debounce="0")
#: Per-restart request counts are recorded as ``restart_req:VERB resource`` (Leases aside).
RESTART_PREFIX = "restart_req:"
CONTROL = "bench-control"
ROLL_TIMEOUT = 120.0


async def run(ctx: Context) -> Metrics:
    """Control window, measured window, restarts."""
    sizes = ctx.sizes
    count, changes = sizes.api_workloads, min(sizes.api_changes, sizes.api_workloads)
    namespace = await ctx.namespace()
    await ctx.namespace(CONTROL)
    probe = ctx.make_tool(SETTINGS)
    await create_all(ctx.kube, pairs(namespace, count, probe.opt_in()), 2 * count,
                     "configmaps and deployments")  # fmt: skip
    await create_all(ctx.kube, pairs(CONTROL, changes, {}), 2 * changes, "control pairs")
    control = await control_window(ctx, changes)
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), probe) as watch:
        tool, metrics = await adopt_then_start(ctx, SETTINGS, watch, count)
        measured = await tool_window(ctx, tool, watch, namespace, changes)
        metrics |= await restarts(ctx, tool, watch)
    total, reads, writes = apimetrics.split(measured - control)
    say(f"  per change: {total / changes + 1:.1f} requests ({reads / changes:.1f} reads, "
        f"{writes / changes + 1:.1f} writes) beyond the control plane's own")  # fmt: skip
    ctx.series["by_verb"] = {f"{v} {r}": n for (v, r), n in sorted((measured - control).items())}
    return {
        "workloads": count,
        "changes": changes,
        **metrics,
        "requests_per_change": round(total / changes + 1, 2),
        "reads_per_change": round(reads / changes, 2),
        "writes_per_change": round(writes / changes + 1, 2),
    }


async def control_window(ctx: Context, changes: int) -> apimetrics.Requests:
    """What the API server serves when the benchmark plays an ideal tool, ``changes`` times."""
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(CONTROL), _NoTool()) as watch:
        await watch.until(lambda: watch.count(lambda s: s.settled) == changes, 120, "control")
        await asyncio.sleep(SETTLE)
        before = await apimetrics.requests(ctx.kube)
        for n in range(changes):
            await ctx.kube.merge_patch(CONFIGMAPS.path(CONTROL, f"config-{n:05d}"),
                                       {"data": {KEY: "1"}})  # fmt: skip
            written = await ctx.kube.merge_patch(
                DEPLOYMENTS.path(CONTROL, f"app-{n:05d}"),
                {"spec": {"template": {"metadata": {"annotations": {"bench/config": "1"}}}}},
            )
            key, generation = (CONTROL, f"app-{n:05d}"), written["metadata"]["generation"]
            await watch.until(rolled_out(watch, key, generation), ROLL_TIMEOUT, "control rollout")
        await asyncio.sleep(SETTLE)
        after = await apimetrics.requests(ctx.kube)
    return after - before


async def tool_window(
    ctx: Context, tool: Tool, watch: WorkloadWatcher, namespace: str, changes: int
) -> apimetrics.Requests:
    """What the API server serves while the tool handles ``changes`` sequential changes."""
    before = await apimetrics.requests(ctx.kube)
    for n in range(changes):
        key = (namespace, f"app-{n:05d}")
        marker = watch.seen[key].marker
        await ctx.kube.merge_patch(CONFIGMAPS.path(namespace, f"config-{n:05d}"),
                                   {"data": {KEY: "1"}})  # fmt: skip
        await watch.until(
            marker_changed(watch, key, marker), ROLL_TIMEOUT, f"{tool.name} to roll {key[1]}"
        )
    await watch.until(lambda: watch.count(lambda s: s.settled) == len(watch.seen), ROLL_TIMEOUT,
                      "rollouts to settle")  # fmt: skip
    await wait_quiet(tool)
    after = await apimetrics.requests(ctx.kube)
    return after - before


async def restarts(ctx: Context, tool: Tool, watch: WorkloadWatcher) -> Metrics:
    """Restart the tool a few times with nothing changed; count its writes and requests."""
    before = watch.markers()
    mark = ctx.audit.mark()
    requests_before = await apimetrics.requests(ctx.kube)
    ready_times, bad_exits = [], 0
    for n in range(1, ctx.sizes.restarts + 1):
        code = await asyncio.to_thread(tool.stop)
        bad_exits += code not in (0, None, -15)
        tool.start(ctx.cluster.kubeconfig)
        ready_times.append(await tool.wait_ready(300))
        await asyncio.sleep(ctx.sizes.restart_pause)
        say(f"  restart {n}: ready again in {ready_times[-1]:.2f} s")
    await asyncio.sleep(1.0)
    writes = ctx.audit.writes(tool.writer_agent, mark)
    delta = await apimetrics.requests(ctx.kube) - requests_before
    total, _, _ = apimetrics.split(delta)
    by_kind = {f"{RESTART_PREFIX}{verb} {resource}": round(n / ctx.sizes.restarts, 1)
               for (verb, resource), n in sorted(delta.items())}  # fmt: skip
    changed = sum(1 for key, marker in watch.markers().items() if before.get(key) != marker)
    say(f"  restarts: {writes.total} writes {writes.by_resource}, {changed} markers changed, "
        f"{total / ctx.sizes.restarts:.0f} requests per restart")  # fmt: skip
    return {
        "restart_writes": writes.total,
        "restart_markers_changed": changed,
        "restart_bad_exits": bad_exits,
        "restart_requests": round(total / ctx.sizes.restarts, 1),
        "restart_ready_s": round(max(ready_times), 3),
        "restart_ready_median_s": round(sorted(ready_times)[len(ready_times) // 2], 3),
        **by_kind,
    }


def rolled_out(watch: WorkloadWatcher, key: Key, generation: int) -> Callable[[], bool]:
    """A condition: the workload controller has handled ``generation`` of ``key``."""
    return lambda: watch.seen[key].generation >= generation and watch.seen[key].settled


class _NoTool:
    """Stands in for a tool in the control window's watch: no marker, nothing to adopt."""

    def marker(self, workload: JSON) -> str | None:
        """No marker."""
        return None

    def adopted(self, workload: JSON) -> bool:
        """Nothing to adopt."""
        return True
