"""Coalescing with the commands users run, at each tool's defaults: one ``kubectl apply -f``
of a multi-document file, and one ``helm upgrade``, each changing a ConfigMap and a Secret
that one Deployment consumes.

For each command it records the gap between the watch events of the two writes (what any
controller's watch sees: the real pace of the writer), the rollouts the command caused
(1: coalesced), and the time from the later of the two watch events to the command's last
rollout, the one that carries both writes (a tool that rolls at each write rolls first
before the later write: timing its first rollout would read negative). A
command's rollouts are counted once nothing more came for ``SETTLE`` seconds (longer than
kube-nudge's 2 s cap), so a second rollout is never missed. kubectl and helm are the
project's own pinned builds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import yaml

from bench.objects import configmap, deployment
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.tools import Tool, ToolSettings
from bench.watcher import Key, WorkloadWatcher
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge_dev.build import find_binary, helm_binary

DEFAULTS = ToolSettings(debounce=None, max_rollouts="1000/1m")
WRITERS = ("kubectl", "helm")
SETTLE = 3.0  # seconds without another rollout before a command's rollouts are counted


def documents(prefix: str, value: str) -> list[JSON]:
    """The ConfigMap and the Secret a command writes."""
    secret: JSON = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{prefix}-secret"},
                    "stringData": {"TOKEN": value}}  # fmt: skip
    return [configmap(f"{prefix}-config", {"LEVEL": value}), secret]


def consumer(prefix: str, annotations: dict[str, str]) -> JSON:
    """A Deployment reading one key of each into env vars."""
    env = [
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": f"{prefix}-config",
                                                             "key": "LEVEL"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{prefix}-secret",
                                                          "key": "TOKEN"}}},
    ]  # fmt: skip
    return deployment(f"{prefix}-app", annotations, env)


class Commands:
    """The two writers, run as subprocesses against the scenario's cluster."""

    def __init__(self, kubeconfig: Path, namespace: str, home: Path) -> None:
        kubectl = find_binary("kubectl")
        if kubectl is None:
            raise RuntimeError("kubectl is not built (make control-plane)")
        self.kubectl, self.helm = str(kubectl), str(helm_binary())
        self.namespace, self.home = namespace, home
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
        self.chart = home / "chart"
        (self.chart / "templates").mkdir(parents=True, exist_ok=True)
        (self.chart / "Chart.yaml").write_text("apiVersion: v2\nname: config\nversion: 0.1.0\n")
        text = yaml.safe_dump_all(documents("helm", "VALUE")).replace(
            "VALUE", "{{ .Values.v | quote }}"
        )
        (self.chart / "templates" / "config.yaml").write_text(text)

    async def write(self, writer: str, value: str) -> None:
        """One command writing both objects with ``value``."""
        if writer == "kubectl":
            text = yaml.safe_dump_all(documents("kubectl", value))
            await self._run([self.kubectl, "apply", "-n", self.namespace, "-f", "-"], text)
        else:
            await self._run([self.helm, "upgrade", "--install", "config", str(self.chart),
                             "-n", self.namespace, "--set-string", f"v={value}"])  # fmt: skip

    async def _run(self, argv: list[str], stdin: str = "") -> None:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, env=self.env,
        )  # fmt: skip
        _, err = await asyncio.wait_for(process.communicate(stdin.encode()), 120)
        if process.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name}: {err.decode().strip()[-500:]}")


class SourceWrites:
    """When a watch saw each ConfigMap/Secret modified (perf_counter), by name."""

    def __init__(self) -> None:
        self.seen: dict[str, list[float]] = {}
        self.changed = asyncio.Event()

    async def until(self, condition: Callable[[], bool], timeout: float) -> None:
        """Wait until ``condition()`` holds after some write."""
        async with asyncio.timeout(timeout):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    @contextlib.asynccontextmanager
    async def watching(self, kube: KubeClient, namespace: str) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(self._watch(kube, resource.path(namespace)))
                 for resource in (CONFIGMAPS, SECRETS)]  # fmt: skip
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, kube: KubeClient, path: str) -> None:
        version = (await kube.get(path))["metadata"]["resourceVersion"]
        async for event in kube.watch(path, resource_version=version):
            if event.get("type") == "MODIFIED":
                name = event["object"]["metadata"]["name"]
                self.seen.setdefault(name, []).append(time.perf_counter())
                self.changed.set()


async def run(ctx: Context) -> Metrics:
    """``writer_commands`` commands of each writer; gaps, rollouts per command, latency."""
    namespace = await ctx.namespace()
    tool = await ctx.tool(DEFAULTS)
    with tempfile.TemporaryDirectory(prefix="bench-writers-") as home:
        commands = Commands(ctx.cluster.kubeconfig, namespace, Path(home))
        for writer in WRITERS:
            await commands.write(writer, "0")
            body = consumer(writer, tool.opt_in())
            await ctx.kube.create(DEPLOYMENTS.path(namespace), body)
        return await _measure(ctx, tool, commands, namespace)


async def _measure(ctx: Context, tool: Tool, commands: Commands, namespace: str) -> Metrics:
    sources = SourceWrites()
    metrics: Metrics = {}
    async with (
        WorkloadWatcher(ctx.kube, DEPLOYMENTS.path(namespace), tool) as watch,
        sources.watching(ctx.kube, namespace),
    ):
        tool.start(ctx.cluster.kubeconfig)
        await tool.wait_ready(120)
        keys = {writer: (namespace, f"{writer}-app") for writer in WRITERS}
        await watch.until(lambda: all(k in watch.seen and watch.seen[k].adopted
                                      for k in keys.values()), 60, "adoption")  # fmt: skip
        await asyncio.sleep(SETTLE)
        for writer in WRITERS:
            gaps, rollouts, latencies = [], [], []
            for change in range(1, ctx.sizes.writer_commands + 1):
                gap, rolled, latency = await _one(watch, sources, commands, writer, keys[writer],
                                                  str(change))  # fmt: skip
                gaps.append(gap)
                rollouts.append(rolled)
                if latency is not None:
                    latencies.append(latency)
            say(f"  {writer}: gaps {min(gaps):.1f}-{max(gaps):.1f} ms, rollouts per command "
                f"{rollouts}")  # fmt: skip
            metrics.update(_summary(writer, gaps, rollouts, latencies))
    return metrics


async def _one(
    watch: WorkloadWatcher, sources: SourceWrites, commands: Commands, writer: str, key: Key,
    value: str,
) -> tuple[float, int, float | None]:  # fmt: skip
    """One command: (gap ms, rollouts, ms from the later write's event to the last rollout)."""
    revision = watch.seen[key].revision
    marks = len(watch.rollouts)
    names = (f"{writer}-config", f"{writer}-secret")
    before = {name: len(sources.seen.get(name, ())) for name in names}
    await commands.write(writer, value)
    await sources.until(lambda: all(len(sources.seen.get(n, ())) > before[n] for n in names), 30)
    written = [sources.seen[name][before[name]] for name in names]
    while True:  # settle: no new rollout for SETTLE seconds
        count = len(watch.rollouts)
        await asyncio.sleep(SETTLE)
        if len(watch.rollouts) == count:
            break
    mine = [at for at, which, _ in watch.rollouts[marks:] if which == key]
    latency = (mine[-1] - max(written)) * 1000 if mine else None
    return abs(written[1] - written[0]) * 1000, watch.seen[key].revision - revision, latency


def _summary(writer: str, gaps: list[float], rollouts: list[int], latency: list[float]) -> Metrics:
    return {
        f"{writer}_gap_min_ms": round(min(gaps), 1),
        f"{writer}_gap_p50_ms": round(statistics.median(gaps), 1),
        f"{writer}_gap_max_ms": round(max(gaps), 1),
        f"{writer}_rollouts_per_command": round(sum(rollouts) / len(rollouts), 2),
        f"{writer}_commands_rolled_once": sum(1 for r in rollouts if r == 1),
        f"{writer}_commands": len(rollouts),
        f"{writer}_last_rollout_p50_ms": round(statistics.median(latency), 1) if latency else -1.0,
    }
