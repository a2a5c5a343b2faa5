"""The work queue's middle layer (runtime/queue/delaying.py): keys due later, handed down
to the ready queue when due and only then, with the windows that decide when."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.model.pacing import Pacing
from kube_nudge.runtime.queue.delaying import DelayingQueue
from tests.unit.fakes import FakeClock


def queue_at(start: float = 0.0) -> tuple[DelayingQueue[str], FakeClock]:
    clock = FakeClock(start)
    return DelayingQueue(monotonic=clock.monotonic), clock


async def next_key(queue: DelayingQueue[str]) -> str:
    """The next key due now (it is marked done at once)."""
    key = await asyncio.wait_for(queue.get(), 1)
    queue.done(key)
    return key


async def nothing_due(queue: DelayingQueue[str]) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)


def test_keys_are_queued_for_later_without_an_event_loop() -> None:
    """The queue's one timer is set only while a worker waits (adds come before any do)."""
    queue, _ = queue_at()
    queue.add("w", 5.0)
    queue.add_own("x", 1.0)
    queue.add_after("y", 2.0)
    assert (queue.ready_at("w"), queue.ready_at("x"), queue.ready_at("y")) == (5.0, 1.0, 2.0)
    assert len(queue) == 3


async def test_a_key_due_later_is_handed_out_once_due() -> None:
    queue, clock = queue_at()
    queue.add_after("w", 2.0)
    await nothing_due(queue)
    clock.advance(2.0)
    assert await next_key(queue) == "w"
    assert len(queue) == 0 and queue.ready_at("w") is None


async def test_keys_due_meanwhile_are_handed_out_earliest_due_first() -> None:
    queue, clock = queue_at()
    queue.add_after("b", 2.0)
    queue.add_after("a", 1.0)
    queue.add("c", 2.5)
    clock.advance(3.0)
    queue.add("d")  # now: after those due before it
    assert [await next_key(queue) for _ in range(4)] == ["a", "b", "c", "d"]


async def test_a_key_goes_in_the_order_it_came_due_even_after_others_were_found_due() -> None:
    """A pass in progress when its key's window ends: another key came due before it, and
    goes first once both are handed out."""
    queue, clock = queue_at()
    queue.add("k", Pacing(quiet=1.0, cap=1.6))
    queue.add("k")  # a look now, inside the window
    key = await asyncio.wait_for(queue.get(), 1)
    queue.add_after("a", 1.2)
    clock.advance(2.0)
    queue.add("k", Pacing(quiet=1.0, cap=1.6))  # a change past the window's cap: due at 1.6
    assert queue.ready_at("k") == 1.6
    queue.done(key)
    assert [await next_key(queue) for _ in range(2)] == ["a", "k"]


async def test_a_change_holds_back_a_key_due_but_not_yet_taken() -> None:
    """Every worker busy: the key's own event is due, but a change comes before a worker
    takes it. The change waits its window, and the own event with it."""
    queue, clock = queue_at()
    queue.add_own("w", 1.0)
    clock.advance(1.5)
    queue.add("x")  # hands down what is due: w, then x
    queue.add("w", Pacing(quiet=0.5, cap=2.0))  # the change
    assert queue.ready_at("w") == 2.0
    assert await next_key(queue) == "x"
    await nothing_due(queue)
    clock.advance(0.5)
    assert await next_key(queue) == "w"


async def test_a_window_ending_during_its_keys_pass_brings_it_back_when_done() -> None:
    queue, clock = queue_at()
    queue.add("w", Pacing(quiet=1.0, cap=2.0))
    queue.add("w")  # a look now, inside the change's window
    key = await asyncio.wait_for(queue.get(), 1)
    assert queue.window_open(key) and queue.ready_at(key) == 1.0
    clock.advance(1.0)
    assert not queue.window_open(key)
    queue.add("x")  # hands down what is due: w comes back once its pass is done
    assert await next_key(queue) == "x"
    queue.done(key)
    assert await next_key(queue) == "w"
    assert len(queue) == 0


async def test_a_forgotten_key_is_dropped_and_its_pass_in_progress_not_queued_again() -> None:
    queue, clock = queue_at()
    queue.add("w")
    queue.add("ready")
    queue.add("later", 1.0)
    key = await asyncio.wait_for(queue.get(), 1)
    queue.add(key)  # again while processed
    for forgotten in (key, "ready", "later"):
        queue.forget(forgotten)
    assert len(queue) == 0 and queue.ready_at(key) is None
    clock.advance(1.0)
    queue.done(key)
    await nothing_due(queue)


async def test_waiting_for_idle_ends_once_nothing_is_queued_or_processed() -> None:
    queue, _ = queue_at()
    await asyncio.wait_for(queue.wait_idle(), 1)  # idle already
    queue.add("w")
    idle = asyncio.create_task(queue.wait_idle())
    key = await asyncio.wait_for(queue.get(), 1)
    await asyncio.sleep(0)
    assert not idle.done() and queue.busy
    queue.done(key)
    await asyncio.wait_for(idle, 1)


async def test_a_watch_is_no_work_until_due_and_a_pass_taken_before_serves_it() -> None:
    queue, clock = queue_at()
    queue.watch_after("w", 10.0)
    assert queue.ready_at("w") == 10.0 and len(queue) == 0
    await asyncio.wait_for(queue.wait_idle(), 1)  # nothing to wait for
    queue.add_after("w", 2.0)  # a requeue too: work now, due at the earlier
    assert queue.ready_at("w") == 2.0 and len(queue) == 1
    clock.advance(2.0)
    assert await next_key(queue) == "w"
    assert queue.ready_at("w") is None  # the pass served the watch as well
    queue.watch_after("x", 1.0)
    clock.advance(1.0)
    assert len(queue) == 0  # due, but not handed down yet: found by the next get
    assert await next_key(queue) == "x" and len(queue) == 0


async def test_a_watch_due_is_work_and_a_change_keeps_its_window() -> None:
    queue, clock = queue_at()
    queue.watch_after("w", 1.0)
    queue.add("w", 5.0)  # a change: its window is work
    assert (queue.ready_at("w"), len(queue)) == (1.0, 1)
    clock.advance(1.0)
    key = await asyncio.wait_for(queue.get(), 1)  # the watch, inside the window
    assert queue.window_open(key) and queue.ready_at(key) == 5.0 and len(queue) == 1
    queue.done(key)
    queue.watch_after("y", 1.0)
    idle = asyncio.create_task(queue.wait_idle())
    clock.advance(1.0)
    queue.add_after("z", 0.0)  # hands down what is due: y is work now
    assert len(queue) == 3  # w (its window), y and z
    assert {await next_key(queue), await next_key(queue)} == {"y", "z"}
    clock.advance(4.0)
    assert await next_key(queue) == "w"
    await asyncio.wait_for(idle, 1)
