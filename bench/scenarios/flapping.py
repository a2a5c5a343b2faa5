"""Flapping Secret: one Secret rewritten every 200 ms for a minute, one Deployment reading it.

Every tool runs at its defaults (kube-nudge: its default debounce, at most 3 rollouts per 5 min).
Rollouts are counted from the Deployment's ``deployment.kubernetes.io/revision`` (one per
new ReplicaSet), from after the tool took the workload in until no rollout came for
``QUIET_FOR`` seconds after the last write (at most ``SETTLE_MAX``).
"""

from __future__ import annotations

import asyncio
import base64
import time

from bench.objects import deployment, random_secret, secret_env
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.scenarios.phases import wait_quiet
from bench.tools import ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.resources import DEPLOYMENTS, SECRETS

SECRET = "flapping"  # noqa: S105 - a Secret's name
WORKLOAD = "app"
SETTINGS = ToolSettings()
QUIET_FOR = 5.0
SETTLE_MAX = 60.0


async def run(ctx: Context) -> Metrics:
    """Take the workload in, flap the Secret, count rollouts and template writes."""
    namespace = await ctx.namespace()
    tool = await ctx.tool(SETTINGS)
    await ctx.kube.create(SECRETS.path(namespace), random_secret(SECRET, 32))
    env = [secret_env(SECRET, "blob")]
    await ctx.kube.create(DEPLOYMENTS.path(namespace), deployment(WORKLOAD, tool.opt_in(), env))
    key = (namespace, WORKLOAD)
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), tool) as watch:
        tool.start(ctx.cluster.kubeconfig)
        await tool.wait_ready(120)
        await watch.until(lambda: key in watch.seen and watch.seen[key].adopted, 60, "adoption")
        await watch.until(lambda: watch.seen[key].settled, 60, "the adoption rollout")
        await wait_quiet(tool)
        first = watch.seen[key].revision
        mark = ctx.audit.mark()
        t0 = time.perf_counter()
        changes = await flap(ctx, namespace, t0)
        stopped = time.perf_counter()
        await settle(watch, stopped)
        writes = ctx.audit.writes(tool.writer_agent, mark).by_resource.get("deployments", 0)
        rollouts = watch.seen[key].revision - first
        times = [t - t0 for t, k, _ in watch.rollouts if k == key and t >= t0]
    after_stop = sum(1 for t in times if t > stopped - t0)
    say(f"  {changes} changes in {stopped - t0:.1f} s: {rollouts} rollouts "
        f"({after_stop} after the last change), {writes} template writes")  # fmt: skip
    ctx.series["rollouts_s"] = [round(t, 3) for t in times]
    ctx.series["flap_s"] = round(stopped - t0, 3)
    return {
        "flap_changes": changes,
        "rollouts": rollouts,
        "rollouts_after_stop": after_stop,
        "template_writes": writes,
        "last_rollout_after_stop_s": round(max(times) - (stopped - t0), 2) if after_stop else 0.0,
    }


async def flap(ctx: Context, namespace: str, t0: float) -> int:
    """Rewrite the Secret every ``flap_interval`` s for ``flap_seconds``; return how often."""
    interval = ctx.sizes.flap_interval
    changes = round(ctx.sizes.flap_seconds / interval)
    path = SECRETS.path(namespace, SECRET)
    for n in range(1, changes + 1):
        await asyncio.sleep(max(t0 + n * interval - time.perf_counter(), 0.0))
        value = base64.b64encode(f"value-{n}".encode()).decode()
        await ctx.kube.merge_patch(path, {"data": {"blob": value}})
    return changes


async def settle(watch: WorkloadWatcher, stopped: float) -> None:
    """Until no rollout arrived for QUIET_FOR s, at most SETTLE_MAX s after ``stopped``."""
    while time.perf_counter() - stopped < SETTLE_MAX:
        last = max((t for t, _, _ in watch.rollouts), default=0.0)
        if time.perf_counter() - max(last, stopped) >= QUIET_FOR:
            return
        await asyncio.sleep(0.25)
