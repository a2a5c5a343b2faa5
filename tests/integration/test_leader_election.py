"""Lease leader election against the real API server: one leader, hand-over, lost renewals."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.ratelimit import RateLimiter
from kube_nudge.kube.resources import LEASES
from kube_nudge.runtime.leader import LeaderElector, LeaseConfig

pytestmark = pytest.mark.cluster
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
LEASE, RENEW, RETRY = 3.0, 2.0, 0.5


#: A lease no test waits out: a standby that leads within a test's timeouts took a released one.
LONG_LEASE = 3600.0


def _config(namespace: str, who: str, lease_duration: float = LEASE) -> LeaseConfig:
    return LeaseConfig(
        namespace=namespace,
        identity=f"{who}_{uuid.uuid4().hex[:8]}",
        lease_duration=lease_duration,
        renew_deadline=RENEW,
        retry_period=RETRY,
    )


class Candidate:
    """An elector plus a record of its callbacks, checked against its peers."""

    def __init__(self, client: KubeClient, config: LeaseConfig, peers: list[Candidate]) -> None:
        self.config = config
        self.peers = peers
        self.started, self.stopped = asyncio.Event(), asyncio.Event()
        self.started_at = self.stopped_at = 0.0
        self.starts = self.stops = 0
        self.violations: list[str] = []
        self.elector = LeaderElector(
            client, config, on_started=self._on_started, on_stopped=self._on_stopped
        )
        peers.append(self)

    def _on_started(self) -> None:
        self.starts += 1
        self.started_at = asyncio.get_running_loop().time()
        if any(peer.elector.is_leader for peer in self.peers if peer is not self):
            self.violations.append("started while a peer leads")
        self.stopped.clear()
        self.started.set()

    def _on_stopped(self) -> None:
        self.stops += 1
        self.stopped_at = asyncio.get_running_loop().time()
        if self.elector.is_leader:
            self.violations.append("still is_leader inside on_stopped")
        self.started.clear()
        self.stopped.set()


class Campaign:
    """Runs candidates (also ones started later), sampling ``is_leader`` every 50 ms; on exit
    cancels them, surfaces crashes and checks that two never led at once."""

    def __init__(self, candidates: list[Candidate]) -> None:
        self.candidates = candidates
        self.tasks: dict[Candidate, asyncio.Task[None]] = {}
        self.overlaps: list[list[str]] = []
        self.samples = 0
        self._sampler: asyncio.Task[None] | None = None

    def start(self, candidate: Candidate) -> None:
        self.tasks[candidate] = asyncio.create_task(candidate.elector.run())

    async def _sample(self) -> None:
        while True:
            leaders = [c.config.identity for c in self.candidates if c.elector.is_leader]
            self.samples += 1
            if len(leaders) > 1:
                self.overlaps.append(leaders)
            await asyncio.sleep(0.05)

    async def __aenter__(self) -> Campaign:
        for candidate in self.candidates:
            self.start(candidate)
        self._sampler = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._sampler is not None
        for task in [self._sampler, *self.tasks.values()]:
            task.cancel()
        async with asyncio.timeout(10):
            results = await asyncio.gather(
                self._sampler, *self.tasks.values(), return_exceptions=True
            )
        assert not [r for r in results if not isinstance(r, asyncio.CancelledError)]
        assert self.samples > 0
        assert not self.overlaps, self.overlaps
        assert not [v for c in self.candidates for v in c.violations]


def _micro_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def _lease(kube: KubeClient, namespace: str) -> JSON:
    return await kube.get(LEASES.path(namespace, "kube-nudge"))


async def _first_leader(candidates: list[Candidate], timeout: float) -> Candidate:
    waits = {asyncio.create_task(c.started.wait()): c for c in candidates}
    done, pending = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    assert done, "nobody became leader"
    return waits[done.pop()]


async def test_single_elector_leads_renews_and_releases(kube: KubeClient, namespace: str) -> None:
    candidates: list[Candidate] = []
    solo = Candidate(kube, _config(namespace, "solo"), candidates)
    async with Campaign(candidates) as campaign:
        async with asyncio.timeout(10):
            await solo.started.wait()
        assert solo.elector.is_leader
        spec = (await _lease(kube, namespace))["spec"]
        assert spec["holderIdentity"] == solo.config.identity
        assert spec["leaseDurationSeconds"] == 3
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
        async with asyncio.timeout(5):  # renewals move renewTime on
            while (await _lease(kube, namespace))["spec"]["renewTime"] == spec["renewTime"]:
                await asyncio.sleep(0.1)
        task = campaign.tasks[solo]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert (solo.starts, solo.stops, solo.elector.is_leader) == (1, 1, False)
    released = (await _lease(kube, namespace))["spec"]
    assert released.get("holderIdentity", "") == ""
    assert released["leaseDurationSeconds"] == 1


async def test_two_electors_one_leader_then_handover(kube: KubeClient, namespace: str) -> None:
    candidates: list[Candidate] = []
    Candidate(kube, _config(namespace, "a", LONG_LEASE), candidates)
    Candidate(kube, _config(namespace, "b", LONG_LEASE), candidates)
    async with Campaign(candidates) as campaign:
        leader = await _first_leader(candidates, timeout=10)
        standby = next(c for c in candidates if c is not leader)
        # The standby polls once per retry period, as the leader renews: through several
        # renewals it must not take over.
        renewals = [(await _lease(kube, namespace))["spec"]["renewTime"]]
        async with asyncio.timeout(30):
            while len(renewals) < 4:
                spec = (await _lease(kube, namespace))["spec"]
                if spec["renewTime"] != renewals[-1]:
                    renewals.append(spec["renewTime"])
                await asyncio.sleep(RETRY / 5)
        assert not standby.started.is_set()
        before = (await _lease(kube, namespace))["spec"]
        assert before["holderIdentity"] == leader.config.identity

        campaign.tasks[leader].cancel()
        # Leading at all, with a lease of an hour, means the released lease was taken.
        async with asyncio.timeout(30):
            await standby.started.wait()
        assert leader.stopped_at <= standby.started_at
        after = (await _lease(kube, namespace))["spec"]
        assert after["holderIdentity"] == standby.config.identity
        assert after["leaseTransitions"] == before["leaseTransitions"] + 1
    assert (leader.starts, leader.stops) == (1, 1)


class Partitionable(KubeClient):
    """A client whose requests fail (or hang) once ``partitioned`` is set."""

    def __init__(self, kube: KubeClient, mode: str) -> None:
        super().__init__(kube.http, kube.options)
        self.mode = mode
        self.partitioned = False

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        limiter: RateLimiter | None = None,
        accept: str = "application/json",
        retry_throttled: bool = True,
    ) -> JSON:
        if self.partitioned:
            if self.mode == "hang":
                await asyncio.Event().wait()  # only the elector's deadline ends this
            raise ApiError(0, "TransportError", "partitioned")
        return await super().request(
            method, path, params=params, body=body, content_type=content_type, limiter=limiter,
            accept=accept, retry_throttled=retry_throttled,
        )  # fmt: skip


@pytest.mark.parametrize("mode", ["fail", "hang"])
async def test_leader_that_cannot_renew_steps_down_before_expiry(
    kube: KubeClient, namespace: str, mode: str
) -> None:
    candidates: list[Candidate] = []
    cut_off = Partitionable(kube, mode)
    first = Candidate(cut_off, _config(namespace, "first"), candidates)
    async with Campaign(candidates) as campaign:
        async with asyncio.timeout(10):
            await first.started.wait()
        second = Candidate(kube, _config(namespace, "second"), candidates)
        campaign.start(second)

        cut_off.partitioned = True
        # The first can write nothing more: this is its last renewal until the second takes
        # the Lease over (which it can't before the lease duration is out).
        last = (await _lease(kube, namespace))["spec"]
        assert last["holderIdentity"] == first.config.identity
        async with asyncio.timeout(30):
            await first.stopped.wait()
        assert not first.elector.is_leader

        async with asyncio.timeout(30):
            await second.started.wait()
        # Only after the first had stopped leading did the second start ...
        assert second.started_at >= first.stopped_at
        spec = (await _lease(kube, namespace))["spec"]
        assert spec["holderIdentity"] == second.config.identity
        assert spec["leaseTransitions"] == 1
        # ... and it took over the first's record, never released, only once it had
        # expired (both times on the Lease, from this host's clock).
        taken = _micro_time(spec["acquireTime"]) - _micro_time(last["renewTime"])
        assert taken >= last["leaseDurationSeconds"], (taken, last)
    assert (first.starts, first.stops) == (1, 1)
