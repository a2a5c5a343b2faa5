"""Steps the fleet scenarios (fan-out, burst, API cost) share: adopt, then measure a change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from bench.procfs import quiet
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, Seen, WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import DEPLOYMENTS

SETTLE = 3.0  # seconds to wait before counting writes, so late or duplicate ones show
TIMEOUT = 900.0


def everyone(watch: WorkloadWatcher, count: int, condition: Callable[[Seen], bool]) -> bool:
    """All ``count`` workloads are in the watch and satisfy ``condition``."""
    return len(watch.seen) == count and watch.count(condition) == count


async def adopt_then_start(
    ctx: Context, settings: ToolSettings, watch: WorkloadWatcher, count: int
) -> tuple[Tool, Metrics]:
    """Let the tool take in every workload with its write throttle lifted, stop it, then
    start the measured instance with ``settings`` and wait until it is ready and quiet.

    Adoption is set-up here (Wave at its defaults needs 15 minutes for 1,000 adoption
    writes); the measured instance starts on adopted workloads, as after any restart."""
    await watch.until(lambda: everyone(watch, count, lambda s: s.settled), TIMEOUT,
                      "workloads observed")  # fmt: skip
    setup = await ctx.tool(replace(settings, unthrottled=True))
    mark = ctx.audit.mark()
    started = time.perf_counter()
    setup.start(ctx.cluster.kubeconfig)
    ready = await setup.wait_ready(TIMEOUT)
    await watch.until(lambda: everyone(watch, count, lambda s: s.adopted), TIMEOUT, "adoption")
    adopted = max(seen.adopted_at for seen in watch.seen.values()) - started
    await asyncio.sleep(SETTLE)
    writes = ctx.audit.writes(setup.writer_agent, mark).by_resource.get("deployments", 0)
    say(f"  {setup.name} ready in {ready:.2f} s, took in {count} workloads in "
        f"{max(adopted, ready):.1f} s ({writes} writes)")  # fmt: skip
    await asyncio.to_thread(setup.stop)
    tool = await ctx.tool(settings)
    tool.start(ctx.cluster.kubeconfig)
    restart_ready = await tool.wait_ready(TIMEOUT)
    await wait_quiet(tool)
    return tool, {
        "ready_s": round(ready, 3),
        "adopt_s": round(max(adopted, ready), 3) if setup.adopts else float("nan"),
        "adopt_writes": writes,
        "measured_ready_s": round(restart_ready, 3),
    }


async def wait_quiet(tool: Tool) -> None:
    """Let the tool and the cluster finish background work before the next phase."""
    assert tool.pid is not None
    waited, busy = await quiet(tool.pid)
    say(f"  quiet after {waited:.0f} s (machine {busy:.0%} busy)")


async def wrong_markers(
    ctx: Context, tool: Tool, namespace: str, before: dict[Key, str | None]
) -> tuple[int, int]:
    """(missing or wrong, unchanged) markers now. Unchanged: the same as before the change
    (not rolled). Missing or wrong: gone, or not what the tool says it should be (kube-nudge
    recomputes its hash; a peer cannot say, so only a lost marker counts for it)."""
    objects: list[JSON] = []
    async for items, _ in ctx.kube.list_pages(DEPLOYMENTS.path(namespace)):
        objects.extend(items)
    expected = await tool.expected_markers(ctx.kube, objects)
    wrong = unchanged = 0
    for obj, want in zip(objects, expected, strict=True):
        marker = tool.marker(obj)
        metadata = obj.get("metadata") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        if key not in before:
            continue
        if marker == before[key]:
            unchanged += 1
        elif marker is None or (want is not None and marker != want):
            wrong += 1
    return wrong, unchanged
