"""Fault: another writer edits the same workloads while kube-nudge rolls them.

kube-nudge's merge patches touch only its annotation, so the other writer's changes are
kept and both converge without conflicts or failed writes.
"""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from tests.integration.controller_support import running_controller
from tests.integration.faults import FULL, FaultRun, Fleet

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
SOURCES, WORKLOADS, CHANGES, ROUNDS = (8, 50, 100, 10) if FULL else (4, 8, 30, 5)


async def test_concurrent_writer_keeps_its_changes_and_hashes_converge(
    kube: AdminClient, cluster: LocalCluster, namespace: str, fault_runs: list[FaultRun]
) -> None:
    fleet = await Fleet.new(kube, namespace, SOURCES, WORKLOADS)

    async def other_writer() -> int:
        edits = 0
        for n in range(ROUNDS):
            for name in fleet.consumes:
                await kube.merge_patch(
                    DEPLOYMENTS.path(namespace, name),
                    {"metadata": {"annotations": {"example.com/touched": str(n)}},
                     "spec": {"template": {"metadata": {"labels": {"touched": str(n)}}}}},
                )  # fmt: skip
                fleet.justified[name] += 1  # its template edit is a rollout of its own
                edits += 1
            await fleet.pause()
        return edits

    async with running_controller(cluster, namespace, debounce=0.05) as running:
        await fleet.adopted()
        writer = asyncio.create_task(other_writer())
        await fleet.stream(CHANGES)
        edits = await writer
        end = await fleet.converge()
        await running.controller.settled(timeout=30)
        failed_writes = running.metrics.errors.labels(stage="write")._value.get()
    fault_runs.append(FaultRun.of("concurrent writer on the same workloads", fleet,
                                  edits, end))  # fmt: skip
    end.check()
    assert failed_writes == 0, f"{failed_writes} writes failed"
    last = str(ROUNDS - 1)
    for name in fleet.consumes:  # the workloads the other writer edited
        obj = await kube.get(DEPLOYMENTS.path(namespace, name))
        kept = (obj["metadata"]["annotations"]["example.com/touched"],
                obj["spec"]["template"]["metadata"]["labels"]["touched"])  # fmt: skip
        assert kept == (last, last), f"the other writer's edit was lost: {name} {kept} != {last}"
