"""The manager starts runnables that need the leader only while leading."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import pytest

from kube_nudge.runtime.manager import Elector, Manager

HANG = 60.0
"""Bounds on waits only tell a hang from progress (no I/O here: everything happens within a
few loop turns); none measures speed, which a loaded machine would break."""


class Recorder:
    """A runnable that notes when it runs and when it is cancelled."""

    def __init__(self, name: str, needs_leader: bool, fail: bool = False) -> None:
        self.name = name
        self.needs_leader = needs_leader
        self.fail = fail
        self.starts = 0
        self.cancels = 0
        self.running = asyncio.Event()

    async def run(self) -> None:
        self.starts += 1
        self.running.set()
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        try:
            await asyncio.Event().wait()
        finally:
            self.cancels += 1
            self.running.clear()


class ManualElector:
    """Leadership switched by the test."""

    def __init__(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        self.on_started, self.on_stopped = on_started, on_stopped

    async def run(self) -> None:
        await asyncio.Event().wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_leader_runnables_follow_leadership() -> None:
    cache, workers = Recorder("cache", False), Recorder("workers", True)
    electors: list[ManualElector] = []
    leading: list[bool] = []

    def elector(on_started: Callable[[], None], on_stopped: Callable[[], None]) -> Elector:
        electors.append(ManualElector(on_started, on_stopped))
        return electors[-1]

    manager = Manager([cache, workers], elector=elector, on_leading=leading.append)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(cache.running.wait(), HANG)
    await settle()
    assert workers.starts == 0 and not manager.leading
    electors[0].on_started()
    await asyncio.wait_for(workers.running.wait(), HANG)
    electors[0].on_stopped()
    await settle()
    assert (workers.starts, workers.cancels) == (1, 1)
    assert cache.cancels == 0  # the cache keeps running on a standby
    electors[0].on_started()
    await asyncio.wait_for(workers.running.wait(), HANG)
    assert workers.starts == 2
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG)
    assert (cache.cancels, workers.cancels) == (1, 2)
    assert leading == [True, False, True, False]


async def test_without_an_elector_everything_runs_at_once() -> None:
    cache, workers = Recorder("cache", False), Recorder("workers", True)
    task = asyncio.create_task(Manager([cache, workers]).run())
    await asyncio.wait_for(asyncio.gather(cache.running.wait(), workers.running.wait()), HANG)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, HANG)
    assert (cache.cancels, workers.cancels) == (1, 1)


@pytest.mark.parametrize("needs_leader", [False, True])
async def test_a_failing_runnable_stops_the_manager_with_its_error(needs_leader: bool) -> None:
    other = Recorder("other", not needs_leader)
    broken = Recorder("broken", needs_leader, fail=True)
    with pytest.raises(RuntimeError, match="broken broke"):
        await asyncio.wait_for(Manager([other, broken]).run(), HANG)
    assert other.cancels == other.starts == 1
