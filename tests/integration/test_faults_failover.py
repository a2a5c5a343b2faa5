"""Fault: the leader of two replicas dies during a stream of changes.

Exactly one replica writes at any time (every write is attributed through the user agent in
the API server's audit log), and no change is lost.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge_dev.cluster import LocalCluster
from tests.integration.controller_support import controller_writes, start_replica, until
from tests.integration.faults import FULL, FaultRun, Fleet, scenario

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
SOURCES, WORKLOADS, CHANGES = (10, 50, 120) if FULL else (4, 8, 40)
ARGS = ("--leader-elect", "--lease-duration=3s", "--renew-deadline=2s", "--retry-period=500ms",
        "--debounce=100ms", "--max-rollouts=1000/1m")  # fmt: skip


@pytest.mark.parametrize("strategy", ["rollout", "snapshot"])
async def test_leader_dies_mid_stream_one_writer_at_a_time_nothing_lost(
    kube: KubeClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    fault_runs: list[FaultRun],
    strategy: str,
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS, strategy=strategy)
    replicas = [
        await start_replica(cluster.kubeconfig, namespace, tmp_path / f"r{n}.log", extra_args=ARGS)
        for n in range(2)
    ]
    try:

        async def one_leader() -> bool:
            return [await r.leading() for r in replicas].count(True) == 1

        await until(one_leader, 30)
        leader, standby = replicas if await replicas[0].leading() else replicas[::-1]
        await fleet.adopted()
        for step in range(CHANGES):
            await fleet.change()
            await fleet.pause()
            if step == CHANGES // 2:
                leader.proc.kill()  # no release: the standby waits out the lease
                await leader.proc.wait()
        await until(standby.leading, 30)
        end = await fleet.converge()
    finally:
        for replica in replicas:
            if replica.proc.returncode is None:
                replica.proc.kill()
                await replica.proc.wait()
    fault_runs.append(
        FaultRun.of(scenario("leader SIGKILL, standby takes over", strategy), fleet, 1, end)
    )
    end.check()

    writes = sorted(
        controller_writes(cluster, namespace), key=lambda e: e["requestReceivedTimestamp"]
    )
    writers = [entry["userAgent"] for entry in writes]
    switches = sum(1 for a, b in itertools.pairwise(writers) if a != b)
    assert len(set(writers)) == 2, set(writers)  # both led, one after the other
    assert switches == 1, writers  # never interleaved: one writer at a time
