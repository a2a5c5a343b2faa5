"""Background Events wait in one queue, not as a task each: a thousand posts run on at most
``concurrency`` workers, in order, each stamped when posted; failures are counted and a
worker survives them; ``flush`` waits for the queue to empty."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from kube_nudge.kube.events import EventRecorder, ObjectRef
from kube_nudge.runtime.events import BackgroundEvents

REF = ObjectRef("apps/v1", "Deployment", "a", "web", "uid-1")


class SlowRecorder:
    """Records each call; every call waits for ``gate``; counts calls running at once."""

    def __init__(self, fail: set[str] | None = None, raise_on: set[str] | None = None) -> None:
        self.calls: list[tuple[str, float | None]] = []
        self.running = self.most = 0
        self.gate = asyncio.Event()
        self.fail = fail or set()
        self.raise_on = raise_on or set()

    async def record(
        self, obj: ObjectRef, event_type: str, reason: str, message: str,
        *, at: float | None = None,
    ) -> bool:  # fmt: skip
        self.running += 1
        self.most = max(self.most, self.running)
        self.calls.append((message, at))  # in the order they were started
        try:
            await self.gate.wait()
            if message in self.raise_on:
                raise RuntimeError("boom")
            return message not in self.fail
        finally:
            self.running -= 1


def events(recorder: SlowRecorder, failures: list[int], concurrency: int = 2) -> BackgroundEvents:
    return BackgroundEvents(
        cast(EventRecorder, recorder), on_failure=lambda: failures.append(1),
        concurrency=concurrency,
    )  # fmt: skip


def worker_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "events" and not t.done()]


async def test_a_thousand_posts_wait_in_the_queue_on_two_workers_in_order() -> None:
    recorder, failures = SlowRecorder(), list[int]()
    background = events(recorder, failures)
    for n in range(1000):
        background.post(REF, "Normal", "Adopted", f"m{n}")
    async with asyncio.timeout(5):  # the workers take their first Event each
        while recorder.running < 2:
            await asyncio.sleep(0)
    # Two Events taken, one per worker; the other 998 wait in the queue, not started.
    assert len(worker_tasks()) == 2 and len(recorder.calls) == 2
    recorder.gate.set()
    await asyncio.wait_for(background.flush(), 5)
    assert [message for message, _ in recorder.calls] == [f"m{n}" for n in range(1000)]
    assert recorder.most == 2 and failures == [] and worker_tasks() == []
    assert all(at is not None for _, at in recorder.calls)  # stamped when posted


async def test_a_post_after_the_queue_emptied_starts_a_worker_again() -> None:
    recorder, failures = SlowRecorder(), list[int]()
    recorder.gate.set()
    background = events(recorder, failures, concurrency=1)
    background.post(REF, "Normal", "Adopted", "first")
    await asyncio.wait_for(background.flush(), 5)
    background.post(REF, "Normal", "Adopted", "second")
    await asyncio.wait_for(background.flush(), 5)
    assert [message for message, _ in recorder.calls] == ["first", "second"]


async def test_refused_and_raising_posts_are_counted_and_the_rest_still_go() -> None:
    recorder, failures = SlowRecorder(fail={"refused"}, raise_on={"raises"}), list[int]()
    recorder.gate.set()
    background = events(recorder, failures, concurrency=1)
    for message in ("refused", "raises", "fine"):
        background.post(REF, "Normal", "Adopted", message)
    await asyncio.wait_for(background.flush(), 5)
    assert [message for message, _ in recorder.calls] == ["refused", "raises", "fine"]
    assert failures == [1, 1]


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrency >= 1"):
        events(SlowRecorder(), [], concurrency=0)


async def test_a_post_arriving_just_as_the_last_worker_finishes_still_goes() -> None:
    recorder, failures = SlowRecorder(), list[int]()
    recorder.gate.set()
    background = events(recorder, failures, concurrency=1)
    loop = asyncio.get_running_loop()
    original = recorder.record

    async def record_then_post(*args: object, **kwargs: object) -> bool:
        if not recorder.calls:  # the first call returns, the worker finds the queue empty
            # and ends in the same step; this post runs right after, before anything else
            loop.call_soon(background.post, REF, "Normal", "Adopted", "late")
        return await original(*args, **kwargs)  # type: ignore[arg-type]

    recorder.record = record_then_post  # type: ignore[method-assign]
    background.post(REF, "Normal", "Adopted", "first")
    async with asyncio.timeout(5):
        while len(recorder.calls) < 2:
            await background.flush()
            await asyncio.sleep(0)
    assert [message for message, _ in recorder.calls] == ["first", "late"]
