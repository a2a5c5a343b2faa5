"""Config releases gated on metrics, against the real API server and a real Prometheus.

A fleet of three Deployments in waves (``rollout-order`` 1, 2, 3) asks for the analysis of
docs/analysis.md (``web-health``, the page's own example made faster): each Deployment's
error ratio under 5% and its p99 latency under 0.5 s, twice, as an exporter of its requests
reports them and the dev tools' Prometheus scrapes it every second. A good change passes
every wave in order; a bad one (the test raises wave 1's error ratio once wave 1 runs it)
fails wave 1's analysis, which fails its rollout and stops the line: waves 2 and 3 never
roll, the chart's alert fires and the failed notification goes out. Also: Prometheus gone
mid-analysis is an Error that holds the line until `kube-nudge release`; an address not
allowed is never contacted; a controller killed mid-analysis resumes without measuring twice
or rolling again; Argo's own AnalysisTemplate is read as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    ARGO_ANALYSISTEMPLATES,
    CONFIGMAPS,
    DEPLOYMENTS,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.analysis import AnalysisPhase
from kube_nudge.model.annotations import FAILED, RELEASED_AT
from kube_nudge.notifications.delivery import Notifier
from kube_nudge.runtime.prometheus import PrometheusAccess, normalised
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until, wait_for_objects
from tests.integration.analysis_support import (
    Exporter,
    analysed,
    analysis_run,
    example_template,
    exporter_for,
    fleet,
    measured,
)
from tests.integration.argo_support import install_argo_rollouts_crds
from tests.integration.controller_support import (
    Running,
    events,
    eventually,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.prometheus_support import Prometheus, prometheus_for
from tests.webhook_receiver import Server

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
WAVES = {"web-1": 1, "web-2": 2, "web-3": 3}
TIMEOUT = 90.0


# -- the set-up -----------------------------------------------------------------------------


@dataclass
class Gated:
    """A running analysis set-up: the app exporter, Prometheus, the controller."""

    exporter: Exporter
    prometheus: Prometheus
    running: Running
    receiver: Server


@contextlib.asynccontextmanager
async def monitored(namespace: str, tmp_path: Path) -> AsyncIterator[tuple[Exporter, Prometheus]]:
    """The exporter and a Prometheus scraping it (with the chart's alert rules)."""
    async with (
        exporter_for(namespace) as exporter,
        prometheus_for(exporter.port, namespace, tmp_path) as prometheus,
    ):
        yield exporter, prometheus


@contextlib.asynccontextmanager
async def controlled(
    cluster: LocalCluster, namespace: str, exporter: Exporter, *allowed: str, argo: bool = False
) -> AsyncIterator[tuple[Running, Server]]:
    """The controller allowed to query ``allowed`` (and with ``argo``, reading Argo's
    templates), its notifications to a receiver, its own metrics scraped with the app's."""
    receiver = Server()
    await receiver.start()
    notifier = Notifier([receiver.receiver("hook")], backoff_base=0.01)
    task = asyncio.create_task(notifier.run())
    access = PrometheusAccess(tuple(normalised(a) for a in allowed))
    try:
        # The documented template selects its own namespace only: it passes the tenancy check.
        async with running_controller(
            cluster,
            namespace,
            prometheus=access,
            notify=notifier.notify,
            analysis_namespace_label="namespace",
            argo_analysis_templates=argo,
        ) as running:
            exporter.also = lambda: running.metrics.render()[0]
            yield running, receiver
            exporter.also = None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await receiver.close()


async def change(kube: AdminClient, namespace: str, mode: str) -> None:
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"MODE": mode}})


async def deployments(kube: KubeClient, namespace: str, condition: Any) -> dict[str, Any]:
    return await wait_for_objects(kube, DEPLOYMENTS.path(namespace), condition, timeout=TIMEOUT)


async def until_posted(
    kube: KubeClient, namespace: str, reason: str, count: int
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def enough() -> bool:
        nonlocal found
        found = await events(kube, namespace, reason)
        return len(found) >= count

    await until(enough, TIMEOUT)
    return found


def rolled(obj: dict[str, Any]) -> bool:
    return template_hash(obj, DEPLOYMENT) is not None


def templates(found: dict[str, Any]) -> dict[str, str | None]:
    return {name: template_hash(obj, DEPLOYMENT) for name, obj in found.items()}


# -- the tests ------------------------------------------------------------------------------


async def test_a_good_change_passes_every_wave_and_a_bad_one_stops_at_the_first(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    async with monitored(namespace, tmp_path) as (exporter, prometheus):
        for name in WAVES:
            exporter.app(name)
        await prometheus.returns(f'http_requests_total{{namespace="{namespace}"}}')
        await fleet(kube, namespace, example_template(prometheus.url), WAVES)
        async with controlled(cluster, namespace, exporter, prometheus.url) as (running, hook):
            finished = running.metrics.analyses_finished
            await change(kube, namespace, "v2")
            passed = AnalysisPhase.SUCCESSFUL
            found = await deployments(kube, namespace, lambda objs: len(objs) == 3 and all(
                rolled(o) and analysed(o, passed) for o in objs.values()))  # fmt: skip
            # Each wave rolled only once the one before had passed its analysis.
            for lower, higher in (("web-1", "web-2"), ("web-2", "web-3")):
                before_it, after_it = analysis_run(found[lower]), analysis_run(found[higher])
                assert before_it is not None and after_it is not None
                assert (after_it.started or 0) > before_it.last_at
            # Counted after the verdict's write returns, which the watch may show first.
            successful = finished.labels(phase="Successful")
            await eventually(lambda: successful._value.get() >= 3, timeout=10)
            assert successful._value.get() == 3
            complete = await until_posted(kube, namespace, "RolloutComplete", 3)
            assert all("analysis successful" in e["message"] for e in complete)

            # The bad change: wave 1 runs it, and its error ratio rises.
            before = templates(found)
            await change(kube, namespace, "v3")
            await deployments(kube, namespace, lambda objs: template_hash(
                objs["web-1"], DEPLOYMENT) != before["web-1"])  # fmt: skip
            exporter.app("web-1").error_ratio = 0.5
            found = await deployments(kube, namespace, lambda objs: FAILED in (
                objs["web-1"]["metadata"].get("annotations") or {}))  # fmt: skip
            assert analysed(found["web-1"], AnalysisPhase.FAILED)
            [failed] = await posted(kube, namespace, "AnalysisFailed")
            assert failed["type"] == "Warning"
            assert "metric error-ratio measured [0." in failed["message"]
            assert "success: result[0] < 0.05" in failed["message"]
            [rollout_failed] = await posted(kube, namespace, "RolloutFailed")
            assert "analysis failed" in rollout_failed["message"]
            await posted(kube, namespace, "LineStopped")
            alert = await prometheus.firing("KubeNudgeAnalysisFailed")
            assert alert.labels["namespace"] == namespace
            await hook.wait(lambda: any(p["kind"] == "failed" and p["workload"] == "web-1"
                                        for p in hook.payloads("hook")))  # fmt: skip
            await running.controller.settled(timeout=30)
            latest = await kube.get(DEPLOYMENTS.path(namespace))
            now = templates({o["metadata"]["name"]: o for o in latest["items"]})
            assert (now["web-2"], now["web-3"]) == (before["web-2"], before["web-3"])
            assert finished.labels(phase="Failed")._value.get() == 1
            assert len(await events(kube, namespace, "AnalysisFailed")) == 1


def stoppable_template(address: str, **timing: Any) -> dict[str, Any]:
    """The documented template with a one-second query timeout and ``timing``."""
    template = example_template(address)
    for metric in template["spec"]["metrics"]:
        metric["provider"]["prometheus"]["timeout"] = 1
        metric.update(timing)
    return template


@contextlib.asynccontextmanager
async def two_waves(
    kube: AdminClient, namespace: str, tmp_path: Path, **timing: Any
) -> AsyncIterator[tuple[Exporter, Prometheus]]:
    """Waves web-1 and web-2 gated by ``stoppable_template`` with ``timing``, their
    exporter and the Prometheus scraping it (which a test may stop)."""
    async with monitored(namespace, tmp_path) as (exporter, prometheus):
        for name in ("web-1", "web-2"):
            exporter.app(name)
        await prometheus.returns(f'http_requests_total{{namespace="{namespace}"}}')
        template = stoppable_template(prometheus.url, **timing)
        await fleet(kube, namespace, template, {"web-1": 1, "web-2": 2})
        yield exporter, prometheus


async def test_prometheus_stopped_mid_analysis_errors_after_the_limit_and_holds_the_line(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """The real Prometheus stopped (SIGSTOP: it answers nothing) once wave 1's first
    measurements are recorded: errors, paced, reach Error past consecutiveErrorLimit; the
    line is held (never proceeding blind) until a person releases it."""
    async with (
        two_waves(kube, namespace, tmp_path, count=20, consecutiveErrorLimit=1) as (
            exporter,
            prometheus,
        ),
        controlled(cluster, namespace, exporter, prometheus.url) as (running, _),
    ):
        before = templates(await deployments(kube, namespace, lambda objs: len(objs) == 2))
        await change(kube, namespace, "v2")
        await deployments(kube, namespace, lambda objs: measured(objs["web-1"], 1))
        prometheus.stop()
        found = await deployments(kube, namespace, lambda objs: analysed(
            objs["web-1"], AnalysisPhase.ERROR))  # fmt: skip
        record = analysis_run(found["web-1"])
        assert record is not None
        state = record.state("error-ratio")
        assert (state.count >= 1, state.consecutive_errors) == (True, 2)  # past 1
        [error] = await posted(kube, namespace, "AnalysisError")
        assert "no answer within 1 s" in error["message"]
        assert "kube-nudge release" in error["message"]
        await running.controller.settled(timeout=30)
        latest = templates(await deployments(kube, namespace, lambda objs: True))
        assert latest["web-2"] == before["web-2"]  # held: never proceeding blind
        assert FAILED not in (found["web-1"]["metadata"].get("annotations") or {})
        prometheus.resume()
        await _release(kube, namespace, "web-1")  # a person lets the line go on
        await deployments(kube, namespace, lambda objs: template_hash(
            objs["web-2"], DEPLOYMENT) != before["web-2"])  # fmt: skip


async def test_prometheus_back_within_the_error_limit_lets_the_analysis_pass(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Stopped after the first measurements, back after an error: within
    consecutiveErrorLimit (errors come an error interval apart, not at once), the analysis
    goes on and passes, and the next wave rolls with no person involved."""
    async with (
        two_waves(kube, namespace, tmp_path, count=4, consecutiveErrorLimit=3) as (
            exporter,
            prometheus,
        ),
        controlled(cluster, namespace, exporter, prometheus.url),
    ):
        before = templates(await deployments(kube, namespace, lambda objs: len(objs) == 2))
        await change(kube, namespace, "v2")
        await deployments(kube, namespace, lambda objs: measured(objs["web-1"], 1))
        prometheus.stop()
        await deployments(kube, namespace, lambda objs: measured(objs["web-1"], 2, errors=1))
        prometheus.resume()
        found = await deployments(kube, namespace, lambda objs: analysed(
            objs["web-1"], AnalysisPhase.SUCCESSFUL) and template_hash(
            objs["web-2"], DEPLOYMENT) != before["web-2"])  # fmt: skip
        record = analysis_run(found["web-1"])
        assert record is not None
        for name in ("error-ratio", "p99-latency"):
            state = record.state(name)
            assert state.count == 4 and state.errors >= 1 and state.taken == 4 + state.errors
        assert await events(kube, namespace, "AnalysisError") == []


async def _release(kube: AdminClient, namespace: str, name: str) -> None:
    """What `kube-nudge release deployment/NAME` writes."""
    await kube.merge_patch(
        DEPLOYMENTS.path(namespace, name),
        {"metadata": {"annotations": {RELEASED_AT: f"{time.time():.3f}"}}},
    )


async def test_an_address_not_allowed_is_never_contacted(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    elsewhere = Server()  # what a template must not make the controller fetch
    await elsewhere.start()
    try:
        async with monitored(namespace, tmp_path) as (exporter, prometheus):
            exporter.app("web-1")
            template = example_template(f"http://127.0.0.1:{elsewhere.port}/metadata")
            await fleet(kube, namespace, template, {"web-1": 1})
            async with controlled(cluster, namespace, exporter, prometheus.url) as (running, _):
                await change(kube, namespace, "v2")
                await deployments(kube, namespace, lambda objs: analysed(
                    objs["web-1"], AnalysisPhase.ERROR))  # fmt: skip
                [refused] = await posted(kube, namespace, "AnalysisError")
                assert (
                    f"127.0.0.1:{elsewhere.port}/metadata is not a --prometheus-url"
                    in (refused["message"])
                )
                await running.controller.settled(timeout=30)
        assert sum(len(hits) for hits in elsewhere.hits.values()) == 0
    finally:
        await elsewhere.close()


async def test_a_query_that_may_read_another_namespace_is_refused_before_it_is_sent(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """With --analysis-namespace-label namespace, a template's query must select only the
    workload's namespace: one that selects another's, or every namespace's, is refused
    with a Warning naming the selector, and the (allowed) server gets nothing."""
    server = Server()  # allowed: it would record the query if one were sent
    await server.start()
    address = f"http://127.0.0.1:{server.port}"
    template = example_template(address)
    [ratio, *_] = template["spec"]["metrics"]
    ratio["provider"]["prometheus"]["query"] = (
        f'sum(rate(http_requests_total{{namespace="{namespace}"}}[1m])) '
        '/ sum(rate(http_requests_total{namespace=~".+"}[1m]))'
    )
    access = PrometheusAccess((normalised(address),))
    try:
        await fleet(kube, namespace, template, {"web-1": 1})
        async with running_controller(
            cluster, namespace, prometheus=access, analysis_namespace_label="namespace"
        ) as running:
            await change(kube, namespace, "v2")
            await deployments(kube, namespace, lambda objs: analysed(
                objs["web-1"], AnalysisPhase.ERROR))  # fmt: skip
            [refused] = await posted(kube, namespace, "AnalysisError")
            assert (
                f"metric {ratio['name']}: its query may read series outside namespace "
                f'{namespace}: http_requests_total{{namespace=~".+"}}; every selector needs '
                f'namespace="{namespace}" (--analysis-namespace-label)'
            ) in refused["message"]
            await running.controller.settled(timeout=30)
        assert dict(server.hits) == {}
    finally:
        await server.close()


async def test_a_controller_killed_mid_analysis_resumes_without_measuring_twice(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    async with monitored(namespace, tmp_path) as (exporter, prometheus):
        exporter.app("web-1")
        await prometheus.returns(f'http_requests_total{{namespace="{namespace}"}}')
        template = example_template(prometheus.url)
        for metric in template["spec"]["metrics"]:
            metric.update({"count": 6, "interval": "2s"})
        await fleet(kube, namespace, template, {"web-1": 1})
        async with controlled(cluster, namespace, exporter, prometheus.url):
            await change(kube, namespace, "v2")
            found = await deployments(kube, namespace, lambda objs: (
                (record := analysis_run(objs["web-1"])) is not None
                and record.state("error-ratio").taken >= 2))  # fmt: skip
        rolled_to = template_hash(found["web-1"], DEPLOYMENT)
        async with controlled(cluster, namespace, exporter, prometheus.url) as (second, _):
            found = await deployments(kube, namespace, lambda objs: analysed(
                objs["web-1"], AnalysisPhase.SUCCESSFUL))  # fmt: skip
            assert second.metrics.nudges.labels(kind="Deployment")._value.get() == 0
        assert template_hash(found["web-1"], DEPLOYMENT) == rolled_to  # not rolled again
        record = analysis_run(found["web-1"])
        assert record is not None
        for name in ("error-ratio", "p99-latency"):
            state = record.state(name)
            assert (state.taken, state.count) == (6, 6)  # none twice, none skipped


async def test_an_argo_analysis_template_is_read_as_it_is(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await install_argo_rollouts_crds(kube)
    async with monitored(namespace, tmp_path) as (exporter, prometheus):
        exporter.app("web-1")
        await prometheus.returns(f'http_requests_total{{namespace="{namespace}"}}')
        argo = example_template(prometheus.url)
        argo["apiVersion"] = f"{ARGO_ANALYSISTEMPLATES.group}/{ARGO_ANALYSISTEMPLATES.version}"
        await fleet(kube, namespace, argo, {"web-1": 1},
                    analysis="AnalysisTemplate.argoproj.io/web-health")  # fmt: skip
        async with controlled(cluster, namespace, exporter, prometheus.url, argo=True):
            await change(kube, namespace, "v2")
            await deployments(kube, namespace, lambda objs: analysed(
                objs["web-1"], AnalysisPhase.SUCCESSFUL))  # fmt: skip
            [passed] = await posted(kube, namespace, "AnalysisSuccessful")
            assert passed["message"].startswith("AnalysisTemplate ")


async def test_a_query_with_no_data_follows_the_templates_rules(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """The app exports nothing yet: an empty vector. A condition that allows it passes; one
    that indexes it is an Error each time, and past consecutiveErrorLimit the line holds."""
    async with monitored(namespace, tmp_path) as (exporter, prometheus):
        template = example_template(prometheus.url)
        lenient, strict = template["spec"]["metrics"]
        lenient["successCondition"] = "size(result) == 0 || result[0] < 0.05"
        strict.update({"consecutiveErrorLimit": 1, "count": 5})
        await fleet(kube, namespace, template, {"web-1": 1})
        async with controlled(cluster, namespace, exporter, prometheus.url):
            await change(kube, namespace, "v2")
            found = await deployments(kube, namespace, lambda objs: analysed(
                objs["web-1"], AnalysisPhase.ERROR))  # fmt: skip
            record = analysis_run(found["web-1"])
            assert record is not None
            assert record.state("error-ratio").failed == 0  # the empty vector passed it
            assert record.state("error-ratio").count == record.state("error-ratio").taken
            assert record.state("p99-latency").errors == 2  # past the limit of 1 in a row
            [error] = await posted(kube, namespace, "AnalysisError")
            assert "metric p99-latency" in error["message"]
