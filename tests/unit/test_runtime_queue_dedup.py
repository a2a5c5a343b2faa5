"""The work queue's ready keys (``DedupQueue`` in runtime/queue/delaying.py): each key
queued once, handed out oldest-ready first, never to two workers at a time, and one waiting
worker woken per key."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.runtime.queue.delaying import DedupQueue


async def _settle() -> None:
    """Let every task that can run, run (no timers involved)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def taken(queue: DedupQueue[str]) -> list[str]:
    """Every key ready now, in the order handed out (each marked done)."""
    keys: list[str] = []
    while len(queue):
        key = await asyncio.wait_for(queue.get(), 1)
        keys.append(key)
        queue.done(key)
    return keys


async def test_a_key_added_again_while_queued_is_handed_out_once() -> None:
    queue: DedupQueue[str] = DedupQueue()
    queue.add("w", 1.0)
    queue.add("w", 1.0)
    assert len(queue) == 1 and "w" in queue
    assert await taken(queue) == ["w"]


async def test_keys_are_handed_out_oldest_ready_first_and_a_key_moves_with_its_time() -> None:
    queue: DedupQueue[str] = DedupQueue()
    for key, since in (("c", 3.0), ("a", 1.0), ("b", 2.0), ("d", 4.0)):
        queue.add(key, since)
    queue.add("a", 5.0)  # not ready since 1 after all: its place moves, still once
    assert await taken(queue) == ["b", "c", "d", "a"]


async def test_a_key_in_progress_goes_to_no_other_worker_and_comes_back_when_done() -> None:
    queue: DedupQueue[str] = DedupQueue()
    queue.add("w", 1.0)
    key = await queue.get()
    queue.add("w", 2.0)  # re-added while processed: dirty, not handed out
    queue.add("x", 3.0)
    assert "w" in queue and len(queue) == 2 and queue.busy
    assert await asyncio.wait_for(queue.get(), 1) == "x"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), 0.05)
    queue.done(key)
    assert await asyncio.wait_for(queue.get(), 1) == "w"


async def test_a_discarded_key_is_not_handed_out_nor_queued_again_when_done() -> None:
    queue: DedupQueue[str] = DedupQueue()
    queue.add("gone", 1.0)
    queue.add("w", 2.0)
    queue.discard("gone")
    assert "gone" not in queue
    key = await asyncio.wait_for(queue.get(), 1)
    assert key == "w"
    queue.add("w", 3.0)
    queue.discard("w")  # dirty, then discarded: done does not queue it again
    queue.done(key)
    assert len(queue) == 0 and not queue.busy


async def test_the_layer_above_is_told_when_a_worker_waits_and_can_hand_it_a_key() -> None:
    told: list[bool] = []

    def on_wait() -> None:
        told.append(queue.waiting)
        if len(told) == 2:
            queue.add("due", 1.0)  # a key the layer above found due meanwhile

    queue: DedupQueue[str] = DedupQueue(on_wait=on_wait)
    getter = asyncio.create_task(queue.get())
    await _settle()
    assert told == [True] and queue.waiting  # told once, with the worker already waiting
    queue.add("w", 1.0)
    assert await asyncio.wait_for(getter, 1) == "w"
    assert await asyncio.wait_for(queue.get(), 1) == "due"
    assert told == [True, True] and not queue.waiting


async def test_a_ready_key_wakes_one_waiting_worker() -> None:
    waits = 0

    def on_wait() -> None:
        nonlocal waits
        waits += 1

    queue: DedupQueue[str] = DedupQueue(on_wait=on_wait)
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await _settle()
    queue.add("w", 1.0)
    await _settle()
    assert [task.result() for task in getters if task.done()] == ["w"]
    assert waits == 3  # the two others never woke (to find nothing and wait again)
    for task in getters:
        task.cancel()
    await asyncio.gather(*getters, return_exceptions=True)
