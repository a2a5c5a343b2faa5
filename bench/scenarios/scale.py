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
from bench.progress import say
from bench.rolling import wait_rolled
from bench.scenarios import Context, Metrics
from bench.scenarios.memory import Settle, measure
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
        metrics = await measure(ctx, tool, adoption(watch, tool, total_workloads), TIMEOUT)
        metrics |= await one_change(ctx, watch, spaces[0], workloads_per)
    return {"secrets": total_secrets, "workloads": total_workloads,
            "namespaces": len(spaces), "create_s": round(made, 1), **metrics}  # fmt: skip


def adoption(watch: WorkloadWatcher, tool: Tool, count: int) -> Settle:
    """Between ready and the steady RSS: every workload taken in, then the tool quiet."""

    async def settle(started: float, ready: float) -> Metrics:
        await watch.until(lambda: everyone(watch, count, lambda s: s.adopted), TIMEOUT,
                          "adoption")  # fmt: skip
        adopted = max(seen.adopted_at for seen in watch.seen.values()) - started
        say(f"  took in {count} workloads in {adopted:.1f} s")
        await wait_quiet(tool)
        return {"adopt_s": round(max(adopted, ready), 3)}

    return settle


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
