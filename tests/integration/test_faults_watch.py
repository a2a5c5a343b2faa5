"""Faults between the controller and the API server, injected by a proxy in front of the real
kube-apiserver: watches that expire (410 Gone, injected by the proxy, and for real after an
etcd compaction), watches that go silent without closing, and writes throttled with 429 +
Retry-After.

Each scenario streams random config changes at a fleet of workloads through the fault and
ends with the suite's convergence check (nothing lost, nothing rolled without cause).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube_nudge.kube.resources import CONFIGMAPS
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from tests.integration.apiproxy import ApiProxy, proxy_for
from tests.integration.controller_support import running_controller
from tests.integration.faults import FULL, FaultRun, Fleet, own_control_plane

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
SOURCES, WORKLOADS, CHANGES = (8, 50, 100) if FULL else (4, 12, 24)
WATCHES = 6  # ConfigMaps, Secrets and four workload kinds, in one namespace


@pytest.fixture
async def proxy(cluster: LocalCluster) -> AsyncIterator[ApiProxy]:
    """A fault-injecting proxy in front of the session's API server."""
    async with proxy_for(cluster) as front:
        yield front


async def test_watches_expired_after_a_gap_relist_and_lose_nothing(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    proxy: ApiProxy,
    tmp_path: Path,
    fault_runs: list[FaultRun],
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)
    kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
    async with running_controller(cluster, namespace, kubeconfig=kubeconfig, debounce=0.1) as run:
        await fleet.adopted()
        await fleet.stream(CHANGES // 2)
        # The gap: from here the controller's watches deliver nothing ...
        gap = proxy.silence_watches()
        assert gap == WATCHES
        await fleet.stream(CHANGES - CHANGES // 2)
        # ... and when they break, the history they would resume from is compacted away.
        latest = (await kube.get(CONFIGMAPS.path(namespace), limit=1))["metadata"]
        proxy.expire_before(int(latest["resourceVersion"]))
        assert proxy.cut_watches() == gap
        end = await fleet.converge(timeout=30)
        expired = sum(
            run.metrics.watch_restarts.labels(resource=str(r), reason="expired")._value.get()
            for r in {inf.resource for inf in run.controller.cache.informers()}
        )
    fault_runs.append(FaultRun.of("watch expired (410 Gone) after a gap", fleet, gap, end))
    assert proxy.count(status=410) >= gap  # every resumed watch really was refused
    assert expired >= gap
    end.check()


async def test_watches_resumed_after_an_etcd_compaction_relist_and_lose_nothing(
    tmp_path: Path, fault_runs: list[FaultRun]
) -> None:
    """The real thing: ConfigMap watches served by etcd (watch cache off for them), history
    compacted during the gap, so the API server itself answers the resumed watch with 410."""
    async with (
        own_control_plane("--watch-cache-sizes=configmaps#0") as (cluster, kube, namespace),
        proxy_for(cluster) as proxy,
    ):
        fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        async with running_controller(
            cluster, namespace, kubeconfig=kubeconfig, debounce=0.1
        ) as run:
            await fleet.adopted()
            await fleet.stream(CHANGES // 2)
            gap = proxy.silence_watches()
            await fleet.stream(CHANGES - CHANGES // 2)
            await asyncio.to_thread(cluster.compact_etcd)
            proxy.cut_watches()
            end = await fleet.converge(timeout=30)
            expired = run.metrics.watch_restarts.labels(resource="configmaps", reason="expired")
    fault_runs.append(FaultRun.of("etcd compaction during a watch gap", fleet, gap, end))
    assert proxy.expired_before is None  # every 410 came from the API server
    assert expired._value.get() >= 1
    end.check()


async def test_silent_watches_are_caught_by_the_watchdog(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    proxy: ApiProxy,
    tmp_path: Path,
    fault_runs: list[FaultRun],
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)
    kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
    async with running_controller(
        cluster, namespace, kubeconfig=kubeconfig, debounce=0.1, watch_inactivity=3.0
    ):
        await fleet.adopted()
        silenced = proxy.silence_watches()
        assert silenced == WATCHES
        await fleet.stream(CHANGES)
        end = await fleet.converge(timeout=30)
    fault_runs.append(FaultRun.of("silent watch stream (watchdog)", fleet, silenced, end))
    end.check()


async def test_throttled_writes_honour_retry_after_and_lose_nothing(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    proxy: ApiProxy,
    tmp_path: Path,
    fault_runs: list[FaultRun],
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)
    kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
    # Longer than the client's own retries (5 x Retry-After 1 s), so a reconcile also gives
    # up once and has to be re-queued.
    throttle = 6.5
    async with running_controller(cluster, namespace, kubeconfig=kubeconfig, debounce=0.0):
        await fleet.adopted()
        proxy.throttle(throttle, retry_after=1)
        await fleet.stream(CHANGES)
        end = await fleet.converge(timeout=60)
    throttled = [r for r in proxy.requests if r.status == 429]
    fault_runs.append(FaultRun.of("writes throttled (429 Retry-After)", fleet,
                                  len(throttled), end))  # fmt: skip
    end.check()
    # Retry-After honoured: the same object is never tried again within the second the
    # server asked for ...
    attempts: dict[str, list[float]] = defaultdict(list)
    for request in throttled:
        if request.method == "PATCH":
            attempts[request.path].append(request.at)
    assert any("/deployments/" in path for path in attempts), "no rollout was ever throttled"
    for path, times in attempts.items():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        shown = [f"{gap:.2f}" for gap in gaps]
        assert all(gap >= 0.9 for gap in gaps), f"Retry-After not honoured: {path} {shown}"
    # ... and the client as a whole pauses: 429s come in waves (requests already in flight
    # when the first 429 arrived), about one per Retry-After, never a hot loop.
    times = sorted(request.at for request in throttled)
    waves = 1 + sum(1 for a, b in itertools.pairwise(times) if b - a > 0.5)
    assert waves <= throttle + 2, f"Retry-After not honoured by the client: {waves} waves"
