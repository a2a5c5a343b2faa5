"""Fault: the controller is SIGKILLed at random points of a stream of changes.

After it comes back, every workload must converge to the hash of the config it consumes
(nothing lost), and no workload may have rolled more often than changes to its consumed
keys justify (nothing extra).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import Replica, start_replica
from tests.integration.faults import FULL, FaultRun, Fleet, scenario

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
SOURCES, WORKLOADS, CHANGES, KILLS = (12, 50, 200, 10) if FULL else (8, 20, 80, 4)
ARGS = ("--debounce=100ms", "--max-rollouts=1000/1m")


@pytest.mark.parametrize("strategy", ["rollout", "snapshot"])
async def test_sigkill_during_a_stream_of_changes_loses_nothing_and_adds_nothing(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    fault_runs: list[FaultRun],
    strategy: str,
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS, strategy=strategy)
    log = tmp_path / "kn.log"
    replica: Replica = await start_replica(cluster.kubeconfig, namespace, log, extra_args=ARGS)
    kill_after = set(fleet.rng.sample(range(1, CHANGES), KILLS))
    try:
        await fleet.adopted()
        for step in range(CHANGES):
            await fleet.change()
            await fleet.pause()
            if step in kill_after:
                replica.proc.kill()
                await replica.proc.wait()
                replica = await start_replica(cluster.kubeconfig, namespace, log, extra_args=ARGS)
        end = await fleet.converge()
        await until(replica.leading, 10)
    finally:
        replica.proc.kill()
        await replica.proc.wait()
    fault_runs.append(
        FaultRun.of(scenario("controller SIGKILL mid-stream", strategy), fleet, KILLS, end)
    )
    end.check()
