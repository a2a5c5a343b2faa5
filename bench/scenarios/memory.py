"""Memory at scale: many 10 KB Secrets and opted-in Deployments across namespaces.

Measures time from process start to ``/readyz`` 200, peak RSS over the initial sync
(VmHWM read the moment it is ready), and steady RSS (VmRSS) some seconds later.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from bench.objects import create_all, deployment, random_secret, secret_env
from bench.procfs import cpu_seconds, memory_kib
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.tools import Tool, ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import DEPLOYMENTS, SECRETS

SETTINGS = ToolSettings()
TIMEOUT = 900.0


def _namespaces(count: int) -> list[str]:
    return [f"bench-{n:02d}" for n in range(count)]


def _secrets(namespaces: list[str], total: int, size: int) -> Iterator[tuple[str, JSON]]:
    per = total // len(namespaces)
    for namespace in namespaces:
        for n in range(per):
            yield SECRETS.path(namespace), random_secret(f"secret-{n:05d}", size)


def _deployments(
    namespaces: list[str], tool: Tool, total: int, secrets: int
) -> Iterator[tuple[str, JSON]]:
    per, stride = total // len(namespaces), secrets // total
    for namespace in namespaces:
        for n in range(per):
            env = [secret_env(f"secret-{n * stride:05d}", "blob")]
            yield DEPLOYMENTS.path(namespace), deployment(f"app-{n:05d}", tool.opt_in(), env)


async def run(ctx: Context) -> Metrics:
    """Populate the cluster, then start the tool and read its memory."""
    sizes = ctx.sizes
    namespaces = _namespaces(sizes.memory_namespaces)
    for namespace in namespaces:
        await ctx.namespace(namespace)
    tool = await ctx.tool(SETTINGS)
    secrets = sizes.memory_secrets // len(namespaces) * len(namespaces)
    workloads = sizes.memory_workloads // len(namespaces) * len(namespaces)
    await create_all(ctx.kube, _secrets(namespaces, secrets, sizes.secret_bytes), secrets,
                     f"secrets of {sizes.secret_bytes // 1024} KiB")  # fmt: skip
    await create_all(ctx.kube, _deployments(namespaces, tool, workloads, secrets), workloads,
                     "deployments")  # fmt: skip
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(), tool) as watch:
        await watch.until(
            lambda: len(watch.seen) == workloads and watch.count(lambda s: s.settled) == workloads,
            TIMEOUT, "deployments to be observed by their controller",
        )  # fmt: skip
        metrics = await measure(ctx, tool, watch, workloads)
    return {"secrets": secrets, "workloads": workloads, **metrics}


async def measure(ctx: Context, tool: Tool, watch: WorkloadWatcher, workloads: int) -> Metrics:
    """Start the tool; read VmHWM when ready and VmRSS ``steady_after`` seconds later."""
    started = time.perf_counter()
    tool.start(ctx.cluster.kubeconfig)
    pid = tool.pid
    assert pid is not None
    ready = await tool.wait_ready(TIMEOUT)
    at_ready = memory_kib(pid)
    sync_cpu = cpu_seconds(pid)
    say(f"  ready in {ready:.2f} s, peak RSS {at_ready['VmHWM'] / 1024:.1f} MiB")
    await asyncio.sleep(ctx.sizes.steady_after)
    steady = memory_kib(pid)
    say(f"  steady RSS {steady['VmRSS'] / 1024:.1f} MiB {ctx.sizes.steady_after:g} s later")
    await watch.until(lambda: watch.count(lambda s: s.adopted) == workloads, TIMEOUT, "adoption")
    adopted = max(seen.adopted_at for seen in watch.seen.values()) - started
    after = memory_kib(pid)
    say(f"  adopted {workloads} in {adopted:.1f} s, final RSS {after['VmRSS'] / 1024:.1f} MiB")
    return {
        "ready_s": round(ready, 3),
        "sync_cpu_s": round(sync_cpu, 2),
        "peak_rss_sync_mib": round(at_ready["VmHWM"] / 1024, 1),
        "steady_rss_mib": round(steady["VmRSS"] / 1024, 1),
        "adopt_s": round(adopted, 3),
        "peak_rss_total_mib": round(after["VmHWM"] / 1024, 1),
    }
