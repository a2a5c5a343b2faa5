"""A `--workload` the API server doesn't serve yet: retried with backoff, watched once served."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.controller.pending_kinds import PendingKinds, spec_label
from kube_nudge.kube.resources import Resource
from kube_nudge.kube.workloads import WorkloadKind, WorkloadSpec, parse_workload_flag
from kube_nudge.runtime.metrics import Metrics

SPEC = parse_workload_flag("example.com/v1/gadgets=spec.template")
KIND = WorkloadKind(Resource("example.com", "v1", "gadgets", "Gadget"), ("spec", "template"))


async def test_retries_with_doubling_delays_until_served_then_watches_once() -> None:
    sleeps: list[float] = []
    watched: list[WorkloadKind] = []
    answers = iter([False, False, False, False, True])
    metrics = Metrics()

    async def resolve(spec: WorkloadSpec) -> WorkloadKind:
        if not next(answers):
            raise ValueError(f"--workload {spec.text!r}: not served")
        return KIND

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    pending = PendingKinds(
        [SPEC], resolve=resolve, watch=watched.append, metrics=metrics, sleep=sleep,
        first_retry=1.0, max_retry=4.0,
    )  # fmt: skip
    available = metrics.kind_available.labels(resource=spec_label(SPEC))
    assert available._value.get() == 0
    task = asyncio.create_task(pending.run())
    while not watched:
        await asyncio.sleep(0)
    assert sleeps == [1.0, 2.0, 4.0, 4.0, 4.0]  # capped at max_retry
    assert watched == [KIND]
    assert pending.pending == ()
    assert available._value.get() == 1
    assert str(KIND.resource) == spec_label(SPEC)  # one label for both states
    await asyncio.sleep(0)
    assert not task.done()  # idles: a runnable that returns would stop the manager
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
