"""A gated release survives its controller's death mid-analysis: three `kube-nudge run`
processes with leader election query the real Prometheus through a front that can hold the
answers back (``query_proxy``). The leader is SIGKILLed with one of wave 1's queries in
flight (between the query and its record), and the next one as wave 1's analysis passes
(its rollout then counts complete, and wave 2 is due). Each wave must roll once, and each
analysis end Successful with exactly ``count`` measurements of each metric: none measured
twice (a query whose answer was never recorded is asked again, and counted once), none
skipped, none early. Rollouts are observed from a watch, measurements from the records on
the workloads and the queries at the front."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge.model.analysis import AnalysisPhase
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import wait_for_objects
from tests.integration.analysis_support import (
    analysed,
    analysis_run,
    example_template,
    exporter_for,
    fleet,
    measured,
)
from tests.integration.controller_support import (
    FAST_FAILOVER,
    Replica,
    events,
    leader_of,
    start_replica,
)
from tests.integration.faults import FaultRun
from tests.integration.prometheus_support import prometheus_for
from tests.integration.query_proxy import query_proxy
from tests.integration.rollout_timeline import (
    TIMEOUT,
    Tally,
    all_done,
    change,
    tally,
    watching,
)

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
ARGS = FAST_FAILOVER
WAVES = {"web-1": 1, "web-2": 2}
COUNT, INTERVAL, DELAY = 4, 2.0, 2.0
METRICS = ("error-ratio", "p99-latency")
PASSED = AnalysisPhase.SUCCESSFUL


async def test_a_gated_release_survives_sigkill_mid_query_and_as_its_analysis_passes(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    fault_runs: list[FaultRun],
) -> None:
    async def deployments(condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return await wait_for_objects(kube, DEPLOYMENTS.path(namespace), condition, timeout=TIMEOUT)

    replicas: list[Replica] = []
    async with (
        exporter_for(namespace) as exporter,
        prometheus_for(exporter.port, namespace, tmp_path) as prometheus,
        query_proxy(prometheus.url) as proxy,
    ):
        for name in WAVES:
            exporter.app(name)
        await prometheus.returns(f'http_requests_total{{namespace="{namespace}"}}')
        template = example_template(proxy.url)
        for metric in template["spec"]["metrics"]:
            metric.update({"initialDelay": f"{DELAY:g}s", "interval": f"{INTERVAL:g}s",
                           "count": COUNT})  # fmt: skip
        await fleet(kube, namespace, template, WAVES)
        try:
            async with watching(kube, namespace) as timeline:
                await timeline.until(lambda: len(timeline.seen) == len(WAVES) and all(
                    s.done for s in timeline.seen.values()))  # fmt: skip
                args = (*ARGS, f"--prometheus-url={proxy.url}",
                        "--analysis-namespace-label=namespace")  # fmt: skip
                for n in range(3):
                    log = tmp_path / f"r{n}.log"
                    replicas.append(
                        await start_replica(cluster.kubeconfig, namespace, log, extra_args=args)
                    )
                leader = await leader_of(replicas)
                start = len(timeline.entries)
                changed_at = time.monotonic()
                await change(kube, namespace, "v2")

                # Fault 1: once wave 1's first measurements are recorded, its next query is
                # held at the front and the leader dies with it in flight.
                await deployments(lambda objs: measured(objs["web-1"], 1))
                proxy.hold()
                await proxy.until_held("web-1", TIMEOUT)
                leader.proc.kill()
                await leader.proc.wait()
                proxy.release()
                leader = await leader_of(replicas)

                # Fault 2: the next leader dies as wave 1's analysis passes (the verdict is
                # written; its rollout now counts complete and wave 2 is due).
                await deployments(lambda objs: analysed(objs["web-1"], PASSED))
                leader.proc.kill()
                await leader.proc.wait()
                await leader_of(replicas)

                found = await deployments(
                    lambda objs: all(analysed(objs[name], PASSED) for name in WAVES)
                )
                await timeline.until(lambda: all_done(timeline, start, WAVES))
                converged = time.monotonic() - changed_at
                seen = tally(timeline, [(start, dict.fromkeys(WAVES, 1))])
                assert seen == Tally(lost={}, extra={}, rollouts=len(WAVES)), seen
                assert timeline.first("web-2", "template", start) > timeline.first(
                    "web-1", "done", start
                )  # wave 2 rolled only after wave 1 completed

                # Every metric measured exactly COUNT times, none failed or errored, the last
                # no earlier than the schedule allows: nothing twice, nothing skipped.
                for name in WAVES:
                    record = analysis_run(found[name])
                    assert record is not None and record.started is not None
                    for metric in METRICS:
                        state = record.state(metric)
                        assert (state.taken, state.count, state.errors) == (COUNT, COUNT, 0)
                    schedule = DELAY + (COUNT - 1) * INTERVAL
                    assert record.last_at - record.started >= schedule - 0.01, record
                # At the front: each query once, but the one in flight at the kill, which the
                # next leader asked again (its answer was never recorded).
                extra = proxy.queries - collections.Counter(
                    {(name, metric): COUNT for name in WAVES for metric in METRICS}
                )
                missing = (
                    collections.Counter(
                        {(name, metric): COUNT for name in WAVES for metric in METRICS}
                    )
                    - proxy.queries
                )
                assert missing == collections.Counter(), proxy.queries
                assert sum(extra.values()) == 1 and {w for w, _ in extra} == {"web-1"}, extra
                passed = await events(kube, namespace, "AnalysisSuccessful")
                assert all(e.get("count", 1) == 1 for e in passed), passed
        finally:
            for replica in replicas:
                if replica.proc.returncode is None:
                    replica.proc.kill()
                    await replica.proc.wait()
    fault_runs.append(FaultRun(
        "gated release: leader SIGKILL with a query in flight, and as wave 1's analysis passes",
        seed=0, workloads=len(WAVES), faults=2, changes=1, lost=sum(seen.lost.values()),
        extra_rollouts=sum(seen.extra.values()), rollouts=seen.rollouts,
        converge_seconds=round(converged, 2),
    ))  # fmt: skip
