"""The work queue's top layer (runtime/queue/retrying.py): a failed key comes back after
its own backoff, whatever else holds it, and a success or ``forget`` resets it."""

from __future__ import annotations

import asyncio

from kube_nudge.runtime.backoff import Backoff
from kube_nudge.runtime.queue import WorkQueue
from tests.unit.fakes import FakeClock


def test_failures_come_back_after_the_backoff_given_per_key() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(backoff=Backoff(base=0.5, cap=2.0), monotonic=clock.monotonic)
    delays = []
    for _ in range(4):
        delays.append(queue.add_after_failure("w"))
        queue.forget("x")  # another key's forgetting resets nothing of w's
    assert delays == [0.5, 1.0, 2.0, 2.0]
    assert queue.ready_at("w") == 0.5  # the earliest retry wins
    assert queue.add_after_failure("x") == 0.5


async def test_a_key_failing_again_in_its_pass_comes_back_after_it_at_its_delay() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", 3600.0)  # a change's window: no retry waits for it
    queue.settle("w", failed=True)
    clock.advance(1.0)
    key = await asyncio.wait_for(queue.get(), 1)
    queue.settle(key, failed=True)  # failed again, before the worker's done
    assert queue.ready_at(key) == 3.0 and queue.backoff.failures(key) == 2
    queue.done(key)
    clock.advance(2.0)
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    queue.done(key)
    queue.settle(key, failed=False, again=-1.0)  # succeeded: reset, and looked at now
    assert queue.backoff.failures(key) == 0 and queue.ready_at(key) == 3.0
