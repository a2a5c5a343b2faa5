"""Scale: kube-nudge alone on a large cluster (by default 100,000 Secrets and 10,000 opted-in
Deployments over 1,000 namespaces; ``BENCH_SCALE_*`` for smaller runs).

Each namespace holds its share of small Secrets (256 bytes: the count, not the bytes, is what
this scenario scales) and of Deployments. Deployment N of a namespace reads its own Secret
and the namespace's ``secret-00000``, which every Deployment of that namespace shares.

Measured: process start to ready, peak RSS over the initial sync (VmHWM at ready), the time
until every Deployment is taken in, steady RSS once it is quiet, and one typical change at
this scale: the shared Secret of one namespace changes, and the time until each of that
namespace's Deployments (10 at full size) rolled. kube-nudge runs at its defaults.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from bench.objects import create_all, deployment, random_secret, secret_env
from bench.procfs import RssSampler, cpu_seconds, memory_kib
from bench.progress import say
from bench.rolling import wait_rolled
from bench.scenarios import Context, Metrics
from bench.scenarios.phases import everyone, wait_quiet
from bench.tools import Tool, ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import DEPLOYMENTS, NAMESPACES, SECRETS

SETTINGS = ToolSettings()
SHARED = "secret-00000"
TIMEOUT = 1800.0
CHANGE_TIMEOUT = 120.0


def namespaces(count: int) -> list[str]:
    """``scale-0000`` ..."""
    return [f"scale-{n:04d}" for n in range(count)]


def secrets(spaces: list[str], per: int, size: int) -> Iterator[tuple[str, JSON]]:
    """``per`` Secrets of ``size`` bytes in each namespace, built as they are sent."""
    for namespace in spaces:
        for n in range(per):
            yield SECRETS.path(namespace), random_secret(f"secret-{n:05d}", size)


def deployments(
    spaces: list[str], per: int, secrets_per: int, opt_in: dict[str, str]
) -> Iterator[tuple[str, JSON]]:
    """``per`` opted-in Deployments in each namespace, each reading its own Secret and the
    shared one."""
    stride = max(secrets_per // per, 1)
    for namespace in spaces:
        for n in range(per):
            env = [
                secret_env(f"secret-{n * stride % secrets_per:05d}", "blob"),
                {**secret_env(SHARED, "blob"), "name": "SHARED"},
            ]
            yield DEPLOYMENTS.path(namespace), deployment(f"app-{n:05d}", opt_in, env)


async def run(ctx: Context) -> Metrics:
    """Populate the cluster, start kube-nudge, read its memory, then time one change."""
    sizes = ctx.sizes
    spaces = namespaces(sizes.scale_namespaces)
    secrets_per = sizes.scale_secrets // len(spaces)
    workloads_per = sizes.scale_workloads // len(spaces)
    total_secrets, total_workloads = secrets_per * len(spaces), workloads_per * len(spaces)
    tool = await ctx.tool(SETTINGS)
    namespace_items = ((NAMESPACES.path(), {"metadata": {"name": n}}) for n in spaces)
    await create_all(ctx.kube, namespace_items, len(spaces), "namespaces")
    made = await create_all(ctx.kube, secrets(spaces, secrets_per, sizes.scale_secret_bytes),
                            total_secrets, "secrets")  # fmt: skip
    made += await create_all(ctx.kube, deployments(spaces, workloads_per, secrets_per,
                                                   tool.opt_in()),
                             total_workloads, "deployments")  # fmt: skip
    async with WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(), tool) as watch:
        await watch.until(lambda: everyone(watch, total_workloads, lambda s: s.settled),
                          TIMEOUT, "deployments observed by their controller")  # fmt: skip
        metrics = await start_and_adopt(ctx, tool, watch, total_workloads)
        metrics |= await one_change(ctx, watch, spaces[0], workloads_per)
    return {"secrets": total_secrets, "workloads": total_workloads,
            "namespaces": len(spaces), "create_s": round(made, 1), **metrics}  # fmt: skip


async def start_and_adopt(ctx: Context, tool: Tool, watch: WorkloadWatcher, count: int) -> Metrics:
    """Start the tool; VmHWM at ready, the time to take every workload in, VmRSS once quiet."""
    started = time.perf_counter()
    tool.start(ctx.cluster.kubeconfig)
    pid = tool.pid
    assert pid is not None
    async with RssSampler(pid, started) as sampler:
        ready = await tool.wait_ready(TIMEOUT)
        at_ready, sync_cpu = memory_kib(pid), cpu_seconds(pid)
        say(f"  ready in {ready:.2f} s, peak RSS {at_ready['VmHWM'] / 1024:.1f} MiB")
        await watch.until(lambda: everyone(watch, count, lambda s: s.adopted), TIMEOUT,
                          "adoption")  # fmt: skip
        adopted = max(seen.adopted_at for seen in watch.seen.values()) - started
        await wait_quiet(tool)
        steady = memory_kib(pid)
    say(f"  took in {count} workloads in {adopted:.1f} s; steady RSS "
        f"{steady['VmRSS'] / 1024:.1f} MiB, peak {steady['VmHWM'] / 1024:.1f} MiB")  # fmt: skip
    ctx.series["rss_mib"] = sampler.samples
    return {
        "ready_s": round(ready, 3),
        "sync_cpu_s": round(sync_cpu, 2),
        "adopt_s": round(max(adopted, ready), 3),
        "peak_rss_sync_mib": round(at_ready["VmHWM"] / 1024, 1),
        "steady_rss_mib": round(steady["VmRSS"] / 1024, 1),
        "peak_rss_total_mib": round(steady["VmHWM"] / 1024, 1),
    }


async def one_change(ctx: Context, watch: WorkloadWatcher, namespace: str, count: int) -> Metrics:
    """Change ``namespace``'s shared Secret; time until its ``count`` Deployments rolled."""
    before = watch.markers()
    body = random_secret(SHARED, ctx.sizes.scale_secret_bytes)
    await ctx.kube.merge_patch(SECRETS.path(namespace, SHARED), {"data": body["data"]})
    t0 = time.perf_counter()
    rolled = await wait_rolled(watch, before, count, t0, CHANGE_TIMEOUT)
    say(f"  one change: {len(rolled.times)}/{count} rolled, the last after "
        f"{rolled.total() * 1000:.0f} ms")  # fmt: skip
    ctx.series["rolled_s"] = rolled.times
    metrics = rolled.metrics("change")
    return {**metrics, "change_ms": round(metrics.pop("change_s") * 1000, 1)}
