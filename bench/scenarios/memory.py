"""Memory at scale: many 10 KB Secrets, 2 KB ConfigMaps and opted-in Deployments across many
namespaces.

Measures time from process start to ready (each tool's own signal, see its docstring), peak
RSS over the initial sync (VmHWM read the moment it is ready), steady RSS (VmRSS some
seconds later) and the peak by then; RSS is sampled every 100 ms for the plot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

from bench.objects import (
    configmap,
    configmap_env,
    create_all,
    deployment,
    random_secret,
    random_text,
    secret_env,
)
from bench.procfs import RssSampler, cpu_seconds, memory_kib
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.tools import Tool, ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS

SETTINGS = ToolSettings()
TIMEOUT = 900.0


def _namespaces(count: int) -> list[str]:
    return [f"bench-{n:03d}" for n in range(count)]


def _sources(namespaces: list[str], secrets: int, configmaps: int, secret_bytes: int,
             configmap_bytes: int) -> Iterator[tuple[str, JSON]]:  # fmt: skip
    per_secret, per_configmap = secrets // len(namespaces), configmaps // len(namespaces)
    for namespace in namespaces:
        for n in range(per_secret):
            yield SECRETS.path(namespace), random_secret(f"secret-{n:05d}", secret_bytes)
        for n in range(per_configmap):
            body = configmap(f"config-{n:05d}", {"blob": random_text(configmap_bytes)})
            yield CONFIGMAPS.path(namespace), body


def _deployments(namespaces: list[str], tool: Tool, workloads: int, secrets: int,
                 configmaps: int) -> Iterator[tuple[str, JSON]]:  # fmt: skip
    per = workloads // len(namespaces)
    secret_stride, configmap_stride = secrets // workloads, configmaps // workloads
    for namespace in namespaces:
        for n in range(per):
            env = [
                secret_env(f"secret-{n * secret_stride:05d}", "blob"),
                {**configmap_env(f"config-{n * configmap_stride:05d}", "blob"), "name": "CONF"},
            ]
            yield DEPLOYMENTS.path(namespace), deployment(f"app-{n:05d}", tool.opt_in(), env)


async def run(ctx: Context) -> Metrics:
    """Populate the cluster, then start the tool and read its memory."""
    sizes = ctx.sizes
    namespaces = _namespaces(sizes.memory_namespaces)
    for namespace in namespaces:
        await ctx.namespace(namespace)
    tool = await ctx.tool(SETTINGS)
    spaces = len(namespaces)
    secrets = sizes.memory_secrets // spaces * spaces
    configmaps = sizes.memory_configmaps // spaces * spaces
    workloads = sizes.memory_workloads // spaces * spaces
    sources = _sources(namespaces, secrets, configmaps, sizes.secret_bytes, sizes.configmap_bytes)
    await create_all(ctx.kube, sources, secrets + configmaps,
                     f"secrets of {sizes.secret_bytes // 1024} KiB and configmaps of "
                     f"{sizes.configmap_bytes // 1024} KiB")  # fmt: skip
    await create_all(ctx.kube, _deployments(namespaces, tool, workloads, secrets, configmaps),
                     workloads, "deployments")  # fmt: skip
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(), tool) as watch:
        await watch.until(
            lambda: len(watch.seen) == workloads and watch.count(lambda s: s.settled) == workloads,
            TIMEOUT, "deployments to be observed by their controller",
        )  # fmt: skip
        metrics = await measure(ctx, tool)
    return {"secrets": secrets, "configmaps": configmaps, "workloads": workloads, **metrics}


#: What happens between ready and reading the steady RSS: given (start, seconds to ready),
#: it returns figures of its own (the default waits ``steady_after`` seconds).
Settle = Callable[[float, float], Awaitable[Metrics]]


async def measure(
    ctx: Context, tool: Tool, settle: Settle | None = None, timeout: float = TIMEOUT
) -> Metrics:
    """Start the tool; read VmHWM when ready, then VmRSS once ``settle`` is done."""
    started = time.perf_counter()
    tool.start(ctx.cluster.kubeconfig)
    pid = tool.pid
    assert pid is not None
    async with RssSampler(pid, started) as sampler:
        ready = await tool.wait_ready(timeout)
        at_ready = memory_kib(pid)
        sync_cpu = cpu_seconds(pid)
        say(f"  ready in {ready:.2f} s, peak RSS {at_ready['VmHWM'] / 1024:.1f} MiB")
        extra = await (settle or _wait_steady(ctx))(started, ready)
        steady = memory_kib(pid)
    say(f"  steady RSS {steady['VmRSS'] / 1024:.1f} MiB, peak by then "
        f"{steady['VmHWM'] / 1024:.1f} MiB")  # fmt: skip
    ctx.series["rss_mib"] = sampler.samples
    ctx.series["ready_s"] = round(ready, 3)
    peak, steady_mib = at_ready["VmHWM"] / 1024, steady["VmRSS"] / 1024
    return {
        "ready_s": round(ready, 3),
        "sync_cpu_s": round(sync_cpu, 2),
        "peak_rss_sync_mib": round(peak, 1),
        "steady_rss_mib": round(steady_mib, 1),
        "peak_rss_total_mib": round(steady["VmHWM"] / 1024, 1),
        "peak_over_steady": round(peak / steady_mib, 2),
        **extra,
    }


def _wait_steady(ctx: Context) -> Settle:
    async def wait(started: float, ready: float) -> Metrics:
        await asyncio.sleep(ctx.sizes.steady_after)
        return {}

    return wait
