"""The write budget: a burst passes at once, then the rate holds, in arrival order, and an
idle budget fills up again (on a fake clock: no real sleeps)."""

from __future__ import annotations

import asyncio

import pytest

from kube_nudge.kube.ratelimit import RateLimiter


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


async def test_a_burst_passes_at_once_then_the_rate_holds() -> None:
    fake = FakeTime()
    limiter = RateLimiter(2.0, 3, clock=fake.clock, sleep=fake.sleep)
    for _ in range(6):
        await limiter.acquire()
    assert fake.slept == [0.5, 0.5, 0.5]  # three at once, then one every half second


async def test_an_idle_budget_fills_up_again_but_no_further() -> None:
    fake = FakeTime()
    limiter = RateLimiter(10.0, 2, clock=fake.clock, sleep=fake.sleep)
    for _ in range(4):
        await limiter.acquire()
    fake.now += 60  # idle long enough to leak everything out, and then some
    for _ in range(3):
        await limiter.acquire()
    assert fake.slept == [0.1, 0.1, 0.1]  # two after the first burst, one after the second


async def test_waiters_pass_in_the_order_they_came() -> None:
    fake, gate, passed = FakeTime(), asyncio.Event(), list[int]()

    async def gated_sleep(seconds: float) -> None:
        await gate.wait()
        await fake.sleep(seconds)

    limiter = RateLimiter(1.0, 1, clock=fake.clock, sleep=gated_sleep)

    async def writer(n: int) -> None:
        await limiter.acquire()
        passed.append(n)

    tasks = [asyncio.create_task(writer(n)) for n in range(5)]
    async with asyncio.timeout(5):
        while not passed:
            await asyncio.sleep(0)
    gate.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert passed == [0, 1, 2, 3, 4] and fake.slept == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (1.0, 0), (-1.0, 5)])
def test_a_budget_must_let_something_through(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate > 0 and burst >= 1"):
        RateLimiter(rate, burst)
