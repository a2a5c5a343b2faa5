"""Reaction latency: one ConfigMap, one opted-in Deployment, sequential changes.

kube-nudge runs with ``--debounce 0`` (its window is a deliberate delay; the peers have
none) and, in ``latency-debounce``, at its defaults with no flag at all (whatever its
default debounce window is): what a user gets. Its default rollout budget
(``--max-rollouts``) allows few rollouts of one workload in a row, so at the defaults each
change is of its own ConfigMap/Deployment pair, changed once.

t0 is when the PATCH of the ConfigMap returned; t1 is when a watch on the Deployment,
open across all changes, delivered the event whose pod-template marker changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bench.objects import configmap, configmap_env, create_all, deployment
from bench.procfs import quiet
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.scenarios.burst import KEY as PAIR_KEY
from bench.scenarios.burst import pairs
from bench.stats import latency_summary
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, WorkloadWatcher
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS

CONFIGMAP = "app-config"
WORKLOAD = "app"
KEY = "LEVEL"
FAST = ToolSettings(debounce="0", max_rollouts="1000/1m")
DEFAULTS = ToolSettings()  # no flag: kube-nudge's default debounce and rollout budget


async def run_fast(ctx: Context) -> Metrics:
    """``--debounce 0``, ``latency_changes`` changes."""
    return await measure(ctx, FAST, ctx.sizes.latency_changes)


async def run_debounced(ctx: Context) -> Metrics:
    """kube-nudge at its defaults: ``debounce_changes`` pairs, each changed once."""
    namespace = await ctx.namespace()
    tool = await ctx.tool(DEFAULTS)
    count = ctx.sizes.debounce_changes
    await create_all(ctx.kube, pairs(namespace, count, tool.opt_in()), 2 * count, "pairs")
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), tool) as watch:
        await _start(ctx, tool, watch, [(namespace, f"app-{n:05d}") for n in range(count)])
        latencies = []
        for n in range(count):
            key, patch = (namespace, f"app-{n:05d}"), {"data": {PAIR_KEY: "1"}}
            before = watch.seen[key].marker
            await ctx.kube.merge_patch(CONFIGMAPS.path(namespace, f"config-{n:05d}"), patch)
            t0 = time.perf_counter()
            await watch.until(marker_changed(watch, key, before), 60, f"change {n + 1}")
            latencies.append(watch.seen[key].marker_at - t0)
    ctx.series["latency_s"] = latencies
    summary = latency_summary(latencies)
    say(f"  defaults: p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms")
    return summary


async def _start(ctx: Context, tool: Tool, watch: WorkloadWatcher, keys: list[Key]) -> float:
    """Start ``tool``, wait until it took in ``keys`` and is quiet; seconds to ready."""
    tool.start(ctx.cluster.kubeconfig)
    ready = await tool.wait_ready(120)
    await watch.until(lambda: all(k in watch.seen and watch.seen[k].adopted for k in keys), 60,
                      "adoption")  # fmt: skip
    assert tool.pid is not None
    await quiet(tool.pid)
    say(f"  {tool.name} ready in {ready:.2f} s and took in {len(keys)} workload(s)")
    return ready


async def measure(ctx: Context, settings: ToolSettings, changes: int) -> Metrics:
    """Adopt one workload, then time ``changes`` sequential changes of its consumed key."""
    namespace = await ctx.namespace()
    tool = await ctx.tool(settings)
    kube = ctx.kube
    await kube.create(CONFIGMAPS.path(namespace), configmap(CONFIGMAP, {KEY: "0", "OTHER": "x"}))
    env = [configmap_env(CONFIGMAP, KEY)]
    await kube.create(DEPLOYMENTS.path(namespace), deployment(WORKLOAD, tool.opt_in(), env))
    key = (namespace, WORKLOAD)
    async with WorkloadWatcher(kube, DEPLOYMENTS.path(namespace), tool) as watch:
        ready = await _start(ctx, tool, watch, [key])
        latencies, from_send, round_trips = [], [], []
        for change in range(1, changes + 1):
            before = watch.seen[key].marker
            patch = {"data": {KEY: str(change)}}
            sent = time.perf_counter()
            await kube.merge_patch(CONFIGMAPS.path(namespace, CONFIGMAP), patch)
            t0 = time.perf_counter()
            await watch.until(marker_changed(watch, key, before), 60, f"change {change}")
            latencies.append(watch.seen[key].marker_at - t0)
            from_send.append(watch.seen[key].marker_at - sent)
            round_trips.append(t0 - sent)
            if change % max(changes // 4, 1) == 0:
                say(f"  {change}/{changes} changes, last {latencies[-1] * 1000:.1f} ms")
    ctx.series["latency_s"] = latencies
    summary = latency_summary(latencies)
    say(f"  p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, max {summary['max_ms']} ms")
    return {
        **summary,
        "p99_from_send_ms": latency_summary(from_send)["p99_ms"],
        "patch_p50_ms": latency_summary(round_trips)["p50_ms"],
        "ready_s": round(ready, 3),
    }


def marker_changed(watch: WorkloadWatcher, key: Key, before: str | None) -> Callable[[], bool]:
    """A condition: the workload's marker is no longer ``before``."""
    return lambda: watch.seen[key].marker != before
