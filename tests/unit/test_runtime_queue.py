"""The work queue's coalescing and per-key backoff, on an injected clock."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.model.pacing import Pacing
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


async def test_a_debounce_raised_while_waiting_lengthens_the_window_from_its_start() -> None:
    """The flake of test_namespace_deleted_while_its_workloads_are_queued: the workload's own
    status update queued it under its 2 s debounce; the debounce was raised to 1 h and a
    config change came while it waited. The 2 s entry must not carry that change early."""
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", 2.0)  # a status update, under the old debounce
    clock.advance(0.5)
    queue.add("w", 3600.0)  # the debounce annotation itself (an event of the workload)
    clock.advance(0.5)
    queue.add("w", 3600.0)  # the config change
    assert queue.ready_at("w") == 3600.0  # the longer window, from when it opened
    clock.advance(2.0)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)
    clock.advance(3600.0)
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    assert len(queue) == 0


def test_a_raised_debounce_never_holds_back_a_look_or_a_retry_and_a_lowered_one_wins() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("first-sight")  # at once: the baseline must be what the pods started with
    queue.add("first-sight", 2.0)
    assert queue.ready_at("first-sight") == 0.0
    queue.settle("held", failed=False, again=5.0)  # a hold's retry, at its time
    queue.add("held", 3600.0)
    assert queue.ready_at("held") == 5.0
    queue.settle("failed", failed=True)
    queue.add("failed", 3600.0)
    assert queue.ready_at("failed") == 1.0
    queue.add("lowered", 3600.0)
    clock.advance(1.0)
    queue.add("lowered", 2.0)  # the debounce was lowered: the sooner time wins
    assert queue.ready_at("lowered") == 3.0


async def test_a_window_kept_while_in_progress_is_the_same_when_queued_again() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w")
    key = await asyncio.wait_for(queue.get(), 1)
    queue.add("w", 2.0)  # a change while it is processed
    clock.advance(1.0)
    queue.done(key)
    assert queue.ready_at("w") == 2.0
    clock.advance(0.5)
    queue.add("w", 2.0)  # another change inside the same window: not pushed back
    assert queue.ready_at("w") == 2.0
    queue.add("w", 10.0)  # the debounce raised: 10 s from when the window opened
    assert queue.ready_at("w") == 10.0


async def test_an_own_event_opens_no_window_a_later_change_could_ride_in() -> None:
    """Issue 24: the workload's own event (a status update) at 0, a config change at 3.01 s,
    both under a 5 s debounce. The change waits its whole window: ready at 8.01, not at 5
    (2 s after it, in a window the status update would have opened)."""
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add_own("w", 5.0)
    assert queue.ready_at("w") == 5.0  # alone, it is looked at a debounce later
    clock.advance(3.01)
    queue.add("w", 5.0)  # the config change
    assert queue.ready_at("w") == pytest.approx(8.01)
    clock.advance(1.99)  # t = 5: nothing yet
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)
    clock.advance(3.01)
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    assert len(queue) == 0  # one pass serves the own event and the change


def test_own_events_never_shorten_or_restart_an_open_window() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", 3.0)  # a change opens the window
    for _ in range(5):
        clock.advance(0.5)
        queue.add_own("w", 3.0)  # status updates, an unrelated edit
        assert queue.ready_at("w") == 3.0
    queue.add("w", 3.0)  # the second change coalesces into the same window
    assert queue.ready_at("w") == 3.0
    queue.add_own("w", 10.0)  # the debounce raised by an edit: longer, from its start
    assert queue.ready_at("w") == 10.0


def test_own_events_wait_for_a_change_at_most_one_window_and_never_hold_back_a_retry() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add_own("w", 2.0)
    clock.advance(0.5)
    queue.add_own("w", 2.0)  # the earliest own event wins: never restarted
    assert queue.ready_at("w") == 2.0
    clock.advance(1.0)
    queue.add("w", 2.0)  # a change: the own events wait with it, one window
    clock.advance(1.0)
    queue.add_own("w", 2.0)
    queue.add("w", 2.0)
    assert queue.ready_at("w") == 3.5
    queue.settle("held", failed=False, again=1.0)  # a hold's retry, at its time (3.5)
    queue.add_own("held", 2.0)
    assert queue.ready_at("held") == 3.5
    queue.add("held", 2.0)
    assert queue.ready_at("held") == 3.5  # the window (to 4.5) holds no retry back
    queue.add("now")  # an immediate look is never held back by an own event or a window
    queue.add_own("now", 2.0)
    assert queue.ready_at("now") == 2.5


async def test_an_own_event_while_in_progress_opens_no_window_either() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w")
    key = await asyncio.wait_for(queue.get(), 1)
    queue.add_own("w", 2.0)  # the status update of the rollout this pass started
    clock.advance(1.0)
    queue.done(key)
    assert queue.ready_at("w") == 2.0
    clock.advance(0.5)
    queue.add("w", 2.0)  # a change: its own whole window
    assert queue.ready_at("w") == 3.5


def test_a_quiet_window_extends_while_changes_arrive_up_to_its_cap() -> None:
    """``debounce: auto``: ready once no change came for ``quiet``, at most ``cap`` after the
    first; the slowest writer seen in the window sets the quiet window."""
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", Pacing(quiet=0.05, cap=2.0))
    assert queue.ready_at("w") == pytest.approx(0.05)
    clock.advance(0.04)
    queue.add("w", Pacing(quiet=0.05, cap=2.0))  # the next write of the same apply
    assert queue.ready_at("w") == pytest.approx(0.09)
    queue.add("w", Pacing(quiet=0.4, cap=2.0))  # a slower writer: its window
    assert queue.ready_at("w") == pytest.approx(0.44)
    clock.advance(0.01)
    queue.add("w", Pacing(quiet=0.05, cap=2.0))  # a faster one never shortens it
    assert queue.ready_at("w") == pytest.approx(0.45)
    for _ in range(10):  # a stream that never goes quiet
        clock.advance(0.3)
        queue.add("w", Pacing(quiet=0.4, cap=2.0))
    assert queue.ready_at("w") == pytest.approx(2.0)


def test_own_events_never_extend_a_quiet_window() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    auto = Pacing(quiet=0.05, cap=2.0)
    queue.add("w", auto)
    clock.advance(0.03)
    queue.add_own("w", 1.0, auto)  # the Deployment's status, an unrelated edit
    assert queue.ready_at("w") == pytest.approx(0.05)
    queue.add_own("w", 1.0, Pacing(debounce=3.0))  # its debounce raised to 3 s meanwhile
    assert queue.ready_at("w") == pytest.approx(3.0)


def test_a_quiet_window_without_a_change_waits_the_own_delay() -> None:
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add_own("w", 1.0, Pacing(quiet=0.05, cap=2.0))
    assert queue.ready_at("w") == 1.0
    clock.advance(0.5)
    queue.add("w", Pacing(quiet=0.05, cap=2.0))  # a change gets its own window, not the 1 s
    assert queue.ready_at("w") == pytest.approx(0.55)


async def test_a_retry_inside_a_window_leaves_the_window_open() -> None:
    """A requeue or follow-up taken while a change's window is open must not carry the
    change early: the window stays, and the key comes back at its end."""
    clock = FakeClock(0.0)
    queue: WorkQueue[str] = WorkQueue(monotonic=clock.monotonic)
    queue.add("w", Pacing(quiet=1.0, cap=2.0))
    queue.add("w")  # a follow-up, now
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    assert queue.window_open("w")
    queue.done("w")
    assert queue.ready_at("w") == 1.0  # back at the window's end
    clock.advance(1.0)
    assert not queue.window_open("w")
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    queue.done("w")
    assert len(queue) == 0


async def _settle() -> None:
    """Let every task that can run, run (no timers involved)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_ready_key_wakes_one_waiting_worker_not_all() -> None:
    queue: WorkQueue[str] = WorkQueue()
    woken: list[int] = []

    async def worker(n: int) -> None:
        key = await queue.get()
        woken.append(n)
        queue.done(key)

    workers = [asyncio.create_task(worker(n)) for n in range(8)]
    await _settle()
    waiting = list(queue._ready._waiters)
    assert len(waiting) == 8
    queue.add("a")
    await _settle()
    assert woken == [0]  # the first waiter took it...
    assert list(queue._ready._waiters) == waiting[1:]  # ...and the seven others never woke
    queue.add("b")
    queue.add("c")
    await _settle()
    assert woken == [0, 1, 2]
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)


async def test_keys_ready_at_once_are_shared_out_among_the_waiting_workers() -> None:
    queue: WorkQueue[str] = WorkQueue()
    taken: list[str] = []

    async def worker() -> None:
        while True:
            taken.append(await queue.get())  # never done: each worker holds its key

    workers = [asyncio.create_task(worker()) for _ in range(3)]
    await _settle()
    for key in "abc":
        queue.add(key)
    await _settle()
    assert sorted(taken) == ["a", "b", "c"]
    for task in workers:
        task.cancel()
    await asyncio.gather(*workers, return_exceptions=True)


async def test_a_key_due_later_is_taken_when_due_by_one_waiter() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(4)]
    await _settle()
    queue.add("w", 0.02)
    done, pending = await asyncio.wait(getters, return_when=asyncio.FIRST_COMPLETED)
    assert [task.result() for task in done] == ["w"]
    assert len(pending) == 3
    queue.add("x", 0.01)  # due after another wait: the queue's timer wakes a waiter again
    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    assert [task.result() for task in done] == ["x"]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def test_a_waiter_cancelled_after_its_wake_passes_the_wake_on() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await _settle()
    queue.add("w")  # wakes ``first``'s waiter...
    first.cancel()  # ...which is cancelled before it runs again
    assert await asyncio.wait_for(second, 1) == "w"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_key_queued_for_later_while_no_worker_waits_is_taken_when_due() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("w", 0.01)  # no waiter yet: the first one to come sets the queue's timer
    assert await asyncio.wait_for(queue.get(), 1) == "w"
    queue.add("x", 0.01)
    queue.add("y", 0.02)
    getter = asyncio.create_task(queue.get())
    assert await asyncio.wait_for(getter, 1) == "x"
    assert await asyncio.wait_for(queue.get(), 1) == "y"  # taken, then the next one's timer
