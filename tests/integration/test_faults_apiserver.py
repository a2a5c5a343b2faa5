"""Fault: kube-apiserver crashes (SIGKILL) in the middle of a burst of changes and comes back.

The controller (a `kube-nudge run` process with leader election) sees its writes fail and
its watches break; when the server is back, the watches it resumes are older than the new
server's watch cache (410 Gone), so it re-lists. Nothing may be lost or rolled twice.

It runs on a control plane of its own: the restarts would otherwise leave the session's
kube-controller-manager catching up while later tests run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import start_replica
from tests.integration.faults import FULL, FaultRun, Fleet, own_control_plane

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
SOURCES, WORKLOADS, CHANGES, RESTARTS = (10, 50, 120, 3) if FULL else (6, 16, 40, 1)
# Down longer than the client retries a request (~6 s), so reconciles fail and are re-queued,
# and with start-up longer than the renew deadline (10 s), so the leader steps down and
# has to win its Lease back.
DOWN_SECONDS = 8.0
ARGS = ("--leader-elect", "--debounce=100ms", "--max-rollouts=1000/1m")


async def test_apiserver_restart_mid_burst_loses_nothing(
    tmp_path: Path, fault_runs: list[FaultRun]
) -> None:
    async with own_control_plane() as (cluster, kube, namespace):
        await _restart_mid_burst(cluster, kube, namespace, tmp_path, fault_runs)


async def _restart_mid_burst(
    cluster: LocalCluster,
    kube: AdminClient,
    namespace: str,
    tmp_path: Path,
    fault_runs: list[FaultRun],
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)
    replica = await start_replica(
        cluster.kubeconfig, namespace, tmp_path / "kn.log", extra_args=ARGS
    )
    restart_after = set(fleet.rng.sample(range(CHANGES // 4, CHANGES), RESTARTS))
    try:
        await fleet.adopted()
        for step in range(CHANGES):
            await fleet.change()
            if step in restart_after:
                # No pause before the crash: the controller is mid-reconcile.
                await asyncio.to_thread(cluster.restart_apiserver, DOWN_SECONDS)
            else:
                await fleet.pause()
        end = await fleet.converge(timeout=90)
        await until(replica.leading, 30)  # it kept (or took back) the lease
        metrics = await replica.get("/metrics")
    finally:
        replica.proc.kill()
        await replica.proc.wait()
    fault_runs.append(FaultRun.of("kube-apiserver SIGKILL mid-burst", fleet,
                                  RESTARTS, end))  # fmt: skip
    end.check()
    assert metrics is not None
    restarts = [line for line in metrics.text.splitlines()
                if line.startswith("kube_nudge_watch_restarts_total{")]  # fmt: skip
    print("\n".join(restarts))
    assert restarts, "the controller never noticed the API server going away"
