"""A pass's Outcome is the one way it asks to be looked at again: backoff for a failure, a
queued requeue, a follow-up timer that is not queued work, and a wake-up for the workloads
waiting for another's rollout."""

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


async def after_timers_due(delay: float) -> None:
    """Return once every timer set so far with ``delay`` or less would have fired: the event
    loop runs timers in order of their deadlines, so one set now for ``delay`` comes last."""
    due = asyncio.Event()
    asyncio.get_running_loop().call_later(delay, due.set)
    await asyncio.wait_for(due.wait(), 10)


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


async def test_a_requeue_is_queued_work_and_a_follow_up_is_only_a_timer() -> None:
    looks, queue, _, _ = looks_over()
    looks.after(k("held"), Outcome(Action.HELD, requeue_after=5.0))
    assert queue.ready_at(k("held")) == 105.0 and len(queue) == 1
    looks.after(k("rolled"), Outcome(Action.ROLLED, follow_up=0.01))
    assert queue.ready_at(k("rolled")) is None  # not work in progress (Controller.settled)
    await after_timers_due(0.01)
    assert queue.ready_at(k("rolled")) == 100.0  # at its deadline: queued, at once


async def test_each_pass_replaces_the_follow_up_and_stopping_cancels_them() -> None:
    looks, queue, _, _ = looks_over()
    looks.after(k("a"), Outcome(Action.ROLLED, follow_up=0.01))
    looks.after(k("a"), Outcome(Action.NONE))  # no rollout to follow now
    looks.after(k("b"), Outcome(Action.ROLLED, follow_up=0.01))
    looks.after(k("b"), Outcome(Action.FAILED))  # keeps its follow-up
    looks.after(k("c"), Outcome(Action.ROLLED, follow_up=0.01))
    looks.stop()
    await after_timers_due(0.01)
    assert queue.ready_at(k("a")) is None and queue.ready_at(k("c")) is None
    assert queue.ready_at(k("b")) is not None


async def test_a_rollout_moving_on_wakes_the_others_waiting_for_one() -> None:
    looks, _, _, woken = looks_over(waiting=["low", "high", "turn"])
    looks.rollout_moved(k("low"))
    assert sorted(woken) == ["high", "turn"]
