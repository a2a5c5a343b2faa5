"""A pass's Outcome is the one way it asks to be looked at again, all on the work queue:
backoff for a failure, a queued requeue, a follow-up that is a watch (no queued work until
due), and a wake-up for the workloads waiting for another's rollout."""

from __future__ import annotations

import asyncio

from kube_nudge.controller.book import WorkloadKey
from kube_nudge.controller.reconciler import Action, Outcome
from kube_nudge.controller.workers import NextLooks
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.runtime.queue import WorkQueue
from tests.unit.fakes import FakeClock


def k(name: str) -> WorkloadKey:
    return (BUILTIN_KINDS[0], "ns", name)


def looks_over(
    waiting: list[str] | None = None,
) -> tuple[NextLooks, WorkQueue[WorkloadKey], FakeClock, list[str]]:
    clock = FakeClock(100.0)
    queue: WorkQueue[WorkloadKey] = WorkQueue(monotonic=clock.monotonic)
    woken: list[str] = []
    looks = NextLooks(
        queue,
        waiting=lambda: [k(name) for name in waiting or []],
        look_again=lambda key: woken.append(key[2]),
    )
    return looks, queue, clock, woken


async def test_a_failed_pass_is_retried_with_backoff_and_a_success_resets_it() -> None:
    looks, queue, _, _ = looks_over()
    looks.after(k("w"), Outcome(Action.FAILED))
    looks.after(k("w"), Outcome(Action.FAILED))
    assert (queue.ready_at(k("w")), queue.backoff.failures(k("w"))) == (101.0, 2)
    looks.after(k("w"), Outcome(Action.NONE))
    assert queue.backoff.failures(k("w")) == 0


async def test_a_requeue_is_queued_work_and_a_follow_up_only_a_watch() -> None:
    looks, queue, clock, _ = looks_over()
    looks.after(k("held"), Outcome(Action.HELD, requeue_after=5.0))
    assert queue.ready_at(k("held")) == 105.0 and len(queue) == 1
    looks.after(k("rolled"), Outcome(Action.ROLLED, follow_up=30.0))
    assert queue.ready_at(k("rolled")) == 130.0  # on the queue: the one way back
    assert len(queue) == 1  # but no work in progress (Controller.settled)
    clock.advance(30.0)
    assert await asyncio.wait_for(queue.get(), 1) == k("held")
    queue.done(k("held"))
    assert await asyncio.wait_for(queue.get(), 1) == k("rolled")  # at its deadline


async def test_each_pass_serves_the_follow_up_and_a_failed_one_is_retried() -> None:
    looks, queue, clock, _ = looks_over()
    looks.after(k("a"), Outcome(Action.ROLLED, follow_up=30.0))
    assert await taken_early(queue, clock, k("a")) == k("a")  # a status change brought it
    looks.after(k("a"), Outcome(Action.NONE))  # no rollout to follow now
    assert queue.ready_at(k("a")) is None
    looks.after(k("b"), Outcome(Action.ROLLED, follow_up=30.0))
    await taken_early(queue, clock, k("b"))
    looks.after(k("b"), Outcome(Action.FAILED))  # its retry looks again (and follows)
    assert queue.ready_at(k("b")) == 101.0 and len(queue) == 1


async def taken_early(
    queue: WorkQueue[WorkloadKey], clock: FakeClock, key: WorkloadKey
) -> WorkloadKey:
    """``key`` queued now for an event of its own, taken and done: its watch is served."""
    queue.add(key)
    taken = await asyncio.wait_for(queue.get(), 1)
    queue.done(taken)
    return taken


async def test_a_rollout_moving_on_wakes_the_others_waiting_for_one() -> None:
    looks, _, _, woken = looks_over(waiting=["low", "high", "turn"])
    looks.rollout_moved(k("low"))
    assert sorted(woken) == ["high", "turn"]
