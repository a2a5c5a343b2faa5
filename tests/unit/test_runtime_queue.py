"""The work queue's coalescing and per-key backoff, on an injected clock."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.runtime.backoff import Backoff
from kube_nudge.runtime.queue import WorkQueue
from tests.unit.fakes import FakeClock


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    backoff: Backoff[str] = Backoff(base=1.0, cap=8.0)
    assert [backoff.failed("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.failed("b") == 1.0  # per key
    backoff.succeeded("a")
    assert backoff.failed("a") == 1.0
    assert backoff.failures("a") == 1


def test_backoff_survives_huge_failure_counts() -> None:
    backoff: Backoff[str] = Backoff(base=0.5, cap=60.0)
    for _ in range(2000):
        delay = backoff.failed("a")
    assert delay == 60.0


def test_backoff_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="0 < base <= cap"):
        Backoff(base=0.0)


def test_failed_keys_come_back_after_a_growing_delay() -> None:
    clock = FakeClock(100.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    assert queue.add_after_failure("w") == 1.0
    assert queue.ready_at("w") == 101.0
    queue.forget("w")
    assert queue.ready_at("w") is None
    assert queue.add_after_failure("w") == 1.0  # forgetting reset the backoff
    assert queue.add_after_failure("w") == 2.0
    assert queue.ready_at("w") == 101.0  # the earlier ready time wins
    queue.succeeded("w")
    assert queue.backoff.failures("w") == 0


def test_earliest_ready_time_wins_so_changes_coalesce() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", 2.0)
    clock.advance(1.5)
    queue.add("w", 2.0)  # a second change inside the window doesn't push it back
    assert queue.ready_at("w") == 2.0
    assert len(queue) == 1


async def test_a_key_in_progress_is_queued_again_when_done() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w")
    key = await asyncio.wait_for(queue.get(), 1)
    queue.add("w")  # re-added while being processed: dirty
    assert queue.ready_at("w") == 0.0
    queue.done(key)
    assert await asyncio.wait_for(queue.get(), 1) == "w"


def test_settle_retries_failures_with_backoff_and_requeues_successes_when_asked() -> None:
    clock = FakeClock(100.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.settle("w", failed=True)
    queue.settle("w", failed=True)
    assert (queue.ready_at("w"), queue.backoff.failures("w")) == (101.0, 2)
    queue.settle("w", failed=False)
    assert queue.backoff.failures("w") == 0  # a success resets the backoff
    queue.settle("x", failed=False, again=5.0)
    assert queue.ready_at("x") == 105.0
    queue.settle("y", failed=False)
    assert queue.ready_at("y") is None
