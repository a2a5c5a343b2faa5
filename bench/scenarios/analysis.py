"""Analysis gate: many opted-in Deployments (1,000 at full size) gated in one wave by one
AnalysisTemplate, after one ConfigMap change rolls them all. kube-nudge alone: no peer gates
a config change on metrics.

The template is kube-nudge's own (``kube-nudge.io/v1alpha1``, the chart's CRD): the
``error-ratio`` metric of docs/analysis.md, its query as the page gives it over a 10 s
window, with the benchmark's timing: ``initialDelay`` 5s, ``interval`` 5s, ``count`` 3. Each
analysis so takes at least 15 s (``initialDelay + (count - 1) x interval``, Argo's schedule).
Its Prometheus is the dev tools' pinned server, scraping every 2 s an exporter of every
Deployment's requests (``kube_nudge_dev.analysis``, the integration tests' own; 1 % of them
fail, so every analysis passes). kube-nudge runs as the benchmark runs it, at its defaults,
with ``--prometheus-url`` naming that server.

Measured from the change until every verdict has arrived on a watch, every half second:
Prometheus's own count of the instant queries it answered
(``prometheus_http_requests_total{handler="/api/v1/query"}``; nothing else queries it
then), kube-nudge's CPU time and VmRSS. "During the analyses" is from the first analysis's
start to the last verdict (the wave's last rollouts complete inside it). Per workload
(``bench.gate``): the delay the gate adds beyond 15 s, from when its rollout completed (its
Deployment's status on the watch) to its last measurement (its ``kube-nudge.io/analysis-run``
record).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx2 as httpx

from bench import gate
from bench.objects import configmap, configmap_env, create_all, deployment
from bench.procfs import cpu_seconds, machine_busy, memory_kib
from bench.progress import say
from bench.rolling import wait_rolled
from bench.scenarios import Context, Metrics
from bench.scenarios.phases import adopt_then_start
from bench.tools import Tool, ToolSettings
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import ANALYSISTEMPLATES, CONFIGMAPS, DEPLOYMENTS
from kube_nudge.model.analysis import parse_record
from kube_nudge.model.annotations import ANALYSIS_RUN
from kube_nudge_dev.analysis import (
    Exporter,
    documented_template,
    exporter_for,
    install_template_crd,
)
from kube_nudge_dev.prometheus import prometheus_process

CONFIGMAP, KEY, TEMPLATE = "shared-config", "LEVEL", "error-ratio"
INITIAL_DELAY, INTERVAL, COUNT = 5.0, 5.0, 3
NOMINAL = INITIAL_DELAY + (COUNT - 1) * INTERVAL
WINDOW, SCRAPE = "10s", "2s"
SAMPLE_EVERY = 0.5
READY_TIMEOUT = 120.0
VERDICT_TIMEOUT = 600.0


def template(address: str) -> JSON:
    """The page's error-ratio metric alone, with the benchmark's timing, window and server."""
    page = copy.deepcopy(documented_template())
    [metric] = [m for m in page["spec"]["metrics"] if m["name"] == "error-ratio"]
    metric.update({"initialDelay": f"{INITIAL_DELAY:g}s", "interval": f"{INTERVAL:g}s",
                   "count": COUNT})  # fmt: skip
    metric["provider"]["prometheus"]["address"] = address
    args = [{**a, "value": WINDOW} if a["name"] == "window" else a for a in page["spec"]["args"]]
    return {
        "apiVersion": page["apiVersion"], "kind": page["kind"], "metadata": {"name": TEMPLATE},
        "spec": {"args": args, "metrics": [metric]},
    }  # fmt: skip


def scrape_config(port: int) -> JSON:
    """Prometheus scraping the exporter at ``port`` every ``SCRAPE``."""
    return {
        "global": {"scrape_interval": SCRAPE, "scrape_timeout": SCRAPE},
        "scrape_configs": [{"job_name": "apps",
                            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }  # fmt: skip


def recorded(obj: JSON) -> str | None:
    """A workload's ``kube-nudge.io/analysis-run`` (what the watcher timestamps)."""
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANALYSIS_RUN)


def ended(text: str | None) -> bool:
    """A record with a verdict (cheap: the watch's every wake asks it of every workload)."""
    return text is not None and '"phase":' in text


@dataclass
class Timeline:
    """kube-nudge's CPU seconds and VmRSS, the machine's busy and total CPU seconds, and the
    queries Prometheus answered, read every ``SAMPLE_EVERY`` s (perf_counter seconds)."""

    pid: int
    prometheus: str
    cpu: list[gate.Sample] = field(default_factory=list)
    rss: list[gate.Sample] = field(default_factory=list)
    busy: list[gate.Sample] = field(default_factory=list)
    total: list[gate.Sample] = field(default_factory=list)
    queries: list[gate.Sample] = field(default_factory=list)

    async def sample(self, http: httpx.AsyncClient) -> None:
        """One reading of each."""
        answered = gate.queries_answered((await http.get(f"{self.prometheus}/metrics")).text)
        now = time.perf_counter()
        busy, total = machine_busy()
        self.cpu.append((now, cpu_seconds(self.pid)))
        self.rss.append((now, memory_kib(self.pid).get("VmRSS", 0) / 1024))
        self.busy.append((now, busy))
        self.total.append((now, total))
        self.queries.append((now, answered))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Timeline]:
        """Sample in the background until the context ends (and once more then)."""

        async def loop(http: httpx.AsyncClient) -> None:
            while True:
                await self.sample(http)
                await asyncio.sleep(SAMPLE_EVERY)

        async with httpx.AsyncClient(timeout=5.0) as http:
            task = asyncio.create_task(loop(http), name="analysis timeline")
            try:
                yield self
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                await self.sample(http)


@contextlib.asynccontextmanager
async def monitored(ctx: Context, namespace: str, names: list[str]) -> AsyncIterator[str]:
    """An exporter of every workload's requests and a Prometheus scraping it; its URL once
    it returns every workload's series."""
    async with exporter_for(namespace) as exporter:
        for name in names:
            exporter.app(name)
        config = scrape_config(exporter.port)
        async with prometheus_process(config, ctx.cluster.directory / "prometheus") as server:
            await series_ready(server.url, exporter)
            yield server.url


async def series_ready(url: str, exporter: Exporter) -> None:
    """Wait until a rate over ``WINDOW`` of every app's requests can be computed."""
    expr = (f'count(sum by (deployment) (rate(http_requests_total{{namespace='
            f'"{exporter.namespace}"}}[{WINDOW}])))')  # fmt: skip
    async with httpx.AsyncClient(timeout=10.0) as http, asyncio.timeout(READY_TIMEOUT):
        while True:
            body = (await http.get(f"{url}/api/v1/query", params={"query": expr})).json()
            result = body.get("data", {}).get("result") or []
            if result and float(result[0]["value"][1]) >= len(exporter.apps):
                return
            await asyncio.sleep(0.5)


async def create_objects(
    kube: KubeClient, namespace: str, address: str, opt_in: dict[str, str], names: list[str]
) -> None:
    """The CRD, the template, the ConfigMap and the gated Deployments (one wave: no
    ``rollout-order``)."""
    await install_template_crd(kube)
    await kube.create(ANALYSISTEMPLATES.path(namespace), template(address))
    await kube.create(CONFIGMAPS.path(namespace), configmap(CONFIGMAP, {KEY: "0"}))
    annotations = {**opt_in, "kube-nudge.io/analysis": TEMPLATE}
    env = [configmap_env(CONFIGMAP, KEY)]
    path = DEPLOYMENTS.path(namespace)
    items = ((path, deployment(name, annotations, env)) for name in names)
    await create_all(kube, items, len(names), "deployments")


async def run(ctx: Context) -> Metrics:
    """Set up the gated fleet, Prometheus and kube-nudge; change the ConfigMap once; measure
    until every analysis has its verdict."""
    namespace = await ctx.namespace()
    count = ctx.sizes.analysis_workloads
    names = [f"app-{n:05d}" for n in range(count)]
    async with monitored(ctx, namespace, names) as url:
        settings = ToolSettings(extra_args=("--prometheus-url", url))
        probe = ctx.make_tool(settings)  # never started: says how kube-nudge marks workloads
        await create_objects(ctx.kube, namespace, url, probe.opt_in(), names)
        path = DEPLOYMENTS.path(namespace)
        async with WorkloadWatcher(ctx.kube, path, probe, note=recorded) as watch:
            tool, metrics = await adopt_then_start(ctx, settings, watch, count)
            metrics |= await measure(ctx, tool, watch, namespace, url)
    return {"workloads": count, **metrics}


async def measure(
    ctx: Context, tool: Tool, watch: WorkloadWatcher, namespace: str, url: str
) -> Metrics:
    """Change the ConfigMap; sample until every verdict arrived; the figures."""
    assert tool.pid is not None
    count = len(watch.seen)
    before = watch.markers()
    timeline = Timeline(tool.pid, url)
    rss_before = memory_kib(tool.pid).get("VmRSS", 0) / 1024
    async with timeline.running():
        await ctx.kube.merge_patch(CONFIGMAPS.path(namespace, CONFIGMAP), {"data": {KEY: "1"}})
        t0 = time.perf_counter()
        rolled = await wait_rolled(watch, before, count, t0, ctx.sizes.roll_timeout)
        with contextlib.suppress(TimeoutError):
            await watch.until(lambda: watch.count(lambda s: ended(s.noted)) >= count,
                              VERDICT_TIMEOUT, "every analysis's verdict")  # fmt: skip
    hwm = memory_kib(tool.pid).get("VmHWM", 0) / 1024
    wall = time.time() - time.perf_counter()  # perf_counter + wall: Unix seconds
    gates = [
        gate.gated(parse_record(seen.noted), seen.completed_at + wall, seen.noted_at + wall)
        for seen in watch.seen.values()
    ]
    passed = [g for g in gates if g is not None]
    done = [s.completed_at - t0 for s in watch.seen.values() if s.completed_at >= t0]
    metrics = {"rolled_s": round(rolled.total(), 3),
               "completed_s": round(max(done), 3) if len(done) == count else float("nan"),
               "queries": round(timeline.queries[-1][1] - timeline.queries[0][1]),
               "analyses_passed": len(passed),
               "analyses_ended": watch.count(lambda s: ended(s.noted)),
               "initial_delay_ms": INITIAL_DELAY * 1000, "interval_ms": INTERVAL * 1000,
               "count": COUNT, "nominal_ms": NOMINAL * 1000,
               "rss_before_mib": round(rss_before, 1), "hwm_mib": round(hwm, 1),
               **gate.delay_figures(passed, NOMINAL)}  # fmt: skip
    if passed:
        start = min(g.started for g in passed) - wall
        end = max(g.verdict_seen for g in passed) - wall
        metrics |= during(timeline, start, end)
    ctx.series["delay_s"] = sorted(round(g.delay(NOMINAL), 4) for g in passed)
    say(f"  {len(passed)}/{count} analyses passed; gate delay p50 {metrics['delay_p50_ms']} ms, "
        f"p99 {metrics['delay_p99_ms']} ms, max {metrics['delay_max_ms']} ms beyond "
        f"{NOMINAL:g} s; {metrics.get('queries', 0):.0f} queries, "
        f"{metrics.get('qps_peak', 0):.0f}/s at most")  # fmt: skip
    return metrics


def during(timeline: Timeline, start: float, end: float) -> Metrics:
    """The figures of the analyses' window (``start``..``end``, perf_counter seconds)."""
    seconds = end - start
    queries = gate.value_at(timeline.queries, end) - gate.value_at(timeline.queries, start)
    cpu = gate.value_at(timeline.cpu, end) - gate.value_at(timeline.cpu, start)
    busy = gate.mean_rate(timeline.busy, start, end) / gate.mean_rate(timeline.total, start, end)
    return {
        "window_s": round(seconds, 2),
        "qps_mean": round(queries / seconds, 1),
        "qps_peak": round(gate.peak_rate(timeline.queries, start, end), 1),
        "cpu_s": round(cpu, 2),
        "cpu_pct": round(cpu / seconds * 100, 1),
        "cpu_peak_pct": round(gate.peak_rate(timeline.cpu, start, end) * 100, 1),
        "rss_peak_mib": round(gate.highest(timeline.rss, start, end), 1),
        "machine_busy_pct": round(busy * 100, 1),
    }
