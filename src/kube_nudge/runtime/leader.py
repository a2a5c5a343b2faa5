"""Lease-based leader election (coordination.k8s.io/v1) with client-go semantics.

Our own rather than kubernetes_asyncio's elector, because importing that library costs
about 63 MB of RSS; this needs only ``KubeClient`` GET, POST and PUT on one Lease.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.resources import LEASES

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseConfig:
    """Where the Lease lives, who we are, and the timings (seconds) of the election."""

    namespace: str
    name: str = "kube-nudge"
    identity: str  # unique per process, e.g. f"{hostname}_{uuid4().hex[:8]}"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("LeaseConfig.identity must not be empty")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "LeaseConfig needs 0 < retry_period < renew_deadline < lease_duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}: "
                "a leader must stop before its lease can expire for the others"
            )


def micro_time(moment: datetime | None = None) -> str:
    """A Kubernetes ``MicroTime``: RFC 3339 in UTC with microseconds."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for one Lease; calls ``on_started``/``on_stopped`` as leadership changes.

    The callbacks run synchronously in the election task and should return quickly;
    ``is_leader`` is already False when ``on_stopped`` runs.
    """

    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        *,
        on_started: Callable[[], None],
        on_stopped: Callable[[], None],
    ) -> None:
        self._client = client
        self._config = config
        self._on_started = on_started
        self._on_stopped = on_stopped
        self._path = LEASES.path(config.namespace, config.name)
        self._is_leader = False
        self._lease: JSON | None = None  # the last Lease we read or wrote
        self._observed_spec: JSON | None = None
        self._observed_at = 0.0  # loop time when we first saw _observed_spec
        self._renewed_at = 0.0  # loop time when the last successful write was started

    @property
    def is_leader(self) -> bool:
        """True while we hold the Lease and are within the renew deadline."""
        return self._is_leader

    async def run(self) -> None:
        """Acquire, renew, and re-acquire after losing, until cancelled (then release)."""
        try:
            while True:
                await self._acquire()
                self._is_leader = True
                log.info("became leader of lease %s/%s", self._config.namespace, self._config.name)
                self._on_started()
                await self._renew_until_lost()
                self._stop("lease not renewed")
        finally:
            if self._is_leader:
                try:
                    self._stop("shutting down")
                finally:
                    await self._release()

    def _stop(self, why: str) -> None:
        self._is_leader = False
        log.info("stopped leading lease %s/%s: %s", self._config.namespace, self._config.name, why)
        self._on_stopped()

    async def _acquire(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._config.renew_deadline):
                    if await self._try_acquire_or_renew():
                        return
            except TimeoutError:
                log.warning("lease %s: acquire attempt timed out", self._config.name)
            jitter = random.random() * 0.2  # noqa: S311  # nosec B311 # retry jitter, not a secret
            await asyncio.sleep(self._config.retry_period * (1 + jitter))

    async def _renew_until_lost(self) -> None:
        while True:
            try:
                # The deadline counts from the start of the last successful write, which
                # precedes any other elector's observation of it.
                async with asyncio.timeout_at(self._renewed_at + self._config.renew_deadline):
                    await asyncio.sleep(self._config.retry_period)
                    while not await self._try_acquire_or_renew():
                        if self._held_by_other():
                            return
                        await asyncio.sleep(self._config.retry_period)
            except TimeoutError:
                return

    async def _try_acquire_or_renew(self) -> bool:
        started = asyncio.get_running_loop().time()
        try:
            if self._is_leader and self._lease is not None:
                try:  # fast path: we are the last writer, so our copy is current
                    return self._wrote(await self._put(self._lease), started)
                except ApiError as exc:
                    if not exc.conflict:
                        raise
            try:
                lease = await self._client.get(self._path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                created = await self._client.create(
                    LEASES.path(self._config.namespace),
                    {
                        "apiVersion": LEASES.api_version,
                        "kind": LEASES.kind,
                        "metadata": {
                            "name": self._config.name,
                            "namespace": self._config.namespace,
                        },
                        "spec": self._spec({}, taking_over=True),
                    },
                )
                return self._wrote(created, started)
            self._observe(lease)
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            if holder and holder != self._config.identity and not self._expired():
                return False
            return self._wrote(await self._put(lease), started)
        except ApiError as exc:
            if not exc.conflict:  # a conflict only means someone else wrote first
                log.warning("lease %s: %s", self._config.name, exc)
            return False

    async def _put(self, lease: JSON) -> JSON:
        spec = lease.get("spec") or {}
        taking_over = spec.get("holderIdentity") != self._config.identity
        body = {**lease, "spec": self._spec(spec, taking_over=taking_over)}
        return await self._client.request("PUT", self._path, body=body)

    def _spec(self, old: JSON, *, taking_over: bool) -> JSON:
        now = micro_time()
        spec = {
            **old,
            "holderIdentity": self._config.identity,
            "leaseDurationSeconds": math.ceil(self._config.lease_duration),
            "renewTime": now,
        }
        if taking_over:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + (1 if old else 0)
        return spec

    def _wrote(self, lease: JSON, started: float) -> bool:
        self._observe(lease)
        self._renewed_at = started
        return True

    def _observe(self, lease: JSON) -> None:
        self._lease = lease
        spec = lease.get("spec")
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = asyncio.get_running_loop().time()

    def _held_by_other(self) -> bool:
        holder = ((self._lease or {}).get("spec") or {}).get("holderIdentity") or ""
        return holder not in ("", self._config.identity)

    def _expired(self) -> bool:
        # Judged by how long *we* have seen the same record (client-go's observedTime),
        # never by the holder's renewTime, so clock skew between nodes cannot matter.
        spec = self._observed_spec or {}
        duration = spec.get("leaseDurationSeconds") or self._config.lease_duration
        return asyncio.get_running_loop().time() >= self._observed_at + float(duration)

    async def _release(self) -> None:
        """Best effort: hand the Lease over at once (guarded by its resourceVersion)."""
        lease = self._lease
        if lease is None or self._held_by_other():
            return
        now = micro_time()
        spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1}
        spec.update(acquireTime=now, renewTime=now)
        try:
            async with asyncio.timeout(self._config.retry_period):
                await self._client.request("PUT", self._path, body={**lease, "spec": spec})
        except (ApiError, TimeoutError) as exc:
            log.warning("could not release lease %s: %s", self._config.name, exc)
