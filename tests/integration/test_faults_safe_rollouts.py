"""Ordered, tracked rollouts survive the controller's death: SIGKILL of the leader mid
release, then a second failover during a failing release. Run as real `kube-nudge run`
processes with leader election; the fake kubelet makes the rollouts really progress or
fail; order and announcements are checked from a watch and the Events."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pytest

from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import (
    FAST_FAILOVER,
    Replica,
    events,
    leader_of,
    start_replica,
)
from tests.integration.fakekubelet import FakeKubelet
from tests.integration.faults import FaultRun
from tests.integration.rollout_timeline import (
    ORDERS,
    TIMEOUT,
    Tally,
    all_done,
    announced,
    assert_in_order,
    change,
    kubelet_fleet,
    node_for,
    tally,
    valid,
    watching,
)
from tests.webhook_receiver import Server

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
ARGS = FAST_FAILOVER


async def test_an_ordered_release_survives_sigkill_and_failover(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    fault_runs: list[FaultRun],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = Server()  # every replica notifies it (the default kinds: what needs a human)
    await receiver.start()
    hook = f'[{{"url": "{receiver.url("hook")}"}}]'
    monkeypatch.setenv("KUBE_NUDGE_NOTIFY_RECEIVERS", hook)  # inherited by the replicas
    async with FakeKubelet(kube, node_for(namespace), valid):
        await kubelet_fleet(kube, namespace, ORDERS)
        replicas: list[Replica] = []
        try:
            async with watching(kube, namespace) as timeline:
                await timeline.until(lambda: len(timeline.seen) == 5 and all(
                    s.done for s in timeline.seen.values()))  # fmt: skip
                for n in range(3):
                    log = tmp_path / f"r{n}.log"
                    replica = await start_replica(
                        cluster.kubeconfig, namespace, log, extra_args=ARGS
                    )
                    replicas.append(replica)
                leader = await leader_of(replicas)

                # A good change; the leader dies once the first order has started.
                start = good_start = len(timeline.entries)
                changed_at = time.monotonic()
                await change(kube, namespace, "v2")
                await timeline.until(lambda: any(
                    w == "template" and n in ("a1", "b1") for _, n, w in timeline.entries[start:]
                ))  # fmt: skip
                leader.proc.kill()
                await leader.proc.wait()
                leader = await leader_of(replicas)
                await timeline.until(lambda: all_done(timeline, start), TIMEOUT)
                converged = time.monotonic() - changed_at
                assert_in_order(timeline, start)

                # A bad change; the next leader dies while order 1 is failing.
                start = broken_start = len(timeline.entries)
                await change(kube, namespace, "broken")
                await timeline.until(lambda: all(
                    any(n == name and w == "template" for _, n, w in timeline.entries[start:])
                    for name in ("a1", "b1")))  # fmt: skip
                leader.proc.kill()
                await leader.proc.wait()
                await leader_of(replicas)
                await timeline.until(
                    lambda: timeline.seen["a1"].failed and timeline.seen["b1"].failed, TIMEOUT
                )

                async def line_stopped() -> bool:
                    found = await events(kube, namespace, "LineStopped")
                    return {e["involvedObject"]["name"] for e in found} >= {"a2", "b2", "c3"}

                async def failures_announced() -> bool:
                    found = await events(kube, namespace, "RolloutFailed")
                    return {e["involvedObject"]["name"] for e in found} >= {"a1", "b1"}

                await until(line_stopped, TIMEOUT)
                # Announced once per failed workload, by whichever replica saw it fail. Waited
                # for: a sibling's gate can stop the line from the failed rollout's status
                # before that workload's own pass records the failure, and its Event is posted
                # in the background after the record (a fresh clone's CI once read the Events
                # between the two).
                await until(failures_announced, TIMEOUT)
                failed = await events(kube, namespace, "RolloutFailed")
                assert sorted(e["involvedObject"]["name"] for e in failed) == ["a1", "b1"]
                assert [e.get("count", 1) for e in failed] == [1, 1]
                # And notified exactly once per workload and kind, across three replicas.
                expected = collections.Counter({("a1", "failed"): 1, ("b1", "failed"): 1} | {
                    (n, "line-stopped"): 1 for n in ("a2", "b2", "c3")})  # fmt: skip
                await receiver.wait(lambda: announced(receiver) >= expected)
                assert announced(receiver) == expected
                assert [e for e in timeline.entries[start:]
                        if e[1] in ("a2", "b2", "c3") and e[2] == "template"] == []  # fmt: skip
                # The report's row, from what the watch saw: the good change justifies one
                # rollout of every workload, the broken one only order 1's (5 + 2).
                seen = tally(timeline, [
                    (good_start, dict.fromkeys(ORDERS, 1)),
                    (broken_start, {"a1": 1, "b1": 1}),
                ])  # fmt: skip
                assert seen == Tally(lost={}, extra={}, rollouts=7), seen
        finally:
            for replica in replicas:
                if replica.proc.returncode is None:
                    replica.proc.kill()
                    await replica.proc.wait()
            await receiver.close()
    fault_runs.append(FaultRun(
        "ordered release: leader SIGKILL mid-release, failover while order 1 fails",
        seed=0, workloads=len(ORDERS), faults=2, changes=2, lost=sum(seen.lost.values()),
        extra_rollouts=sum(seen.extra.values()), rollouts=seen.rollouts,
        converge_seconds=round(converged, 2),
    ))  # fmt: skip
