"""Sending notifications to chat and webhook receivers in the background.

``Notifier.notify`` never blocks and never raises: it puts the notification on one bounded
queue per receiver that wants its kind (full: the oldest is dropped) and returns. One
worker per receiver sends in order, so a dead or slow receiver delays only itself, never
another receiver and never a reconcile.

Each notification gets at most ``max_attempts`` requests of at most ``request_timeout``
seconds each, all within ``total_timeout``. Connection errors, timeouts, 408, 429 (after
its ``Retry-After``, if that fits the budget) and 5xx are retried with exponential backoff
and jitter; any other answer is the receiver's or its configuration's fault, so it is not
retried and said once per receiver. A notification is sent at most once per receiver and
process (by ``Notification.id``, also sent as header ``Idempotency-Key`` so a receiver can
drop the duplicates of a restart).

Receiver URLs are secrets: logs name receivers by ``Receiver.label`` only, errors by their
exception class (an HTTP client's exception text often holds the URL). The HTTP is aiohttp's,
the API client's own (no second HTTP library loaded), which logs no request line.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import ssl
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kube_nudge import __version__
from kube_nudge.notifications.config import RECEIVERS_ENV, load_receivers
from kube_nudge.notifications.model import Notification, Receiver
from kube_nudge.runtime.backoff import Backoff
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock

__all__ = [
    "DROP_REASONS",
    "FAIL_REASONS",
    "RECEIVERS_ENV",
    "Notifier",
    "NotifierHooks",
    "load_receivers",
]

log = logging.getLogger(__name__)

FAIL_REASONS = ("timeout", "network", "rate-limited", "server-error", "rejected", "error")
"""``failed`` reasons: of the last attempt of a notification given up on (``rejected``: a
3xx or 4xx answer other than 408 and 429, not retried)."""
DROP_REASONS = ("queue-full", "shutdown")
"""``dropped`` reasons: the oldest made room, or still queued when the notifier stopped."""

_RETRY_STATUS = frozenset({408, 429})
_SYSTEM_RANDOM = random.SystemRandom()


def _ignore(receiver: str, value: str) -> None:
    """A hook that counts nothing."""


class _Child(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Counter(Protocol):
    def labels(self, **labels: str) -> _Child: ...


@dataclass(frozen=True, slots=True)
class NotifierHooks:
    """What the notifier counts, each called with (receiver label, kind or reason)."""

    sent: Callable[[str, str], None] = _ignore
    """A notification was delivered (2xx): (receiver, notification kind)."""
    failed: Callable[[str, str], None] = _ignore
    """A notification was given up on: (receiver, one of ``FAIL_REASONS``)."""
    dropped: Callable[[str, str], None] = _ignore
    """A notification was dropped unsent: (receiver, one of ``DROP_REASONS``)."""

    @classmethod
    def from_counters(
        cls,
        sent: _Counter,
        failed: _Counter,
        dropped: _Counter,
        receivers: Sequence[Receiver] = (),
    ) -> NotifierHooks:
        """Hooks that increment Prometheus counters labelled ``receiver`` and ``kind``
        (sent) or ``receiver`` and ``reason`` (failed, dropped). Each of ``receivers``
        starts at 0 for every kind it is sent and every reason: a series born at its first
        failure would be born at 1, an increase no alert sees."""
        for receiver in receivers:
            for kind in sorted(receiver.on):
                sent.labels(receiver=receiver.label, kind=kind.value)
            for reason in FAIL_REASONS:
                failed.labels(receiver=receiver.label, reason=reason)
            for reason in DROP_REASONS:
                dropped.labels(receiver=receiver.label, reason=reason)
        return cls(
            sent=lambda receiver, kind: sent.labels(receiver=receiver, kind=kind).inc(),
            failed=lambda receiver, why: failed.labels(receiver=receiver, reason=why).inc(),
            dropped=lambda receiver, why: dropped.labels(receiver=receiver, reason=why).inc(),
        )


def _tls(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext | bool:
    """aiohttp's ``ssl`` for ``verify``: a context, a CA bundle's path, or True/False."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify if isinstance(verify, ssl.SSLContext) or not verify else True


class _Lane:
    """One receiver's queue, memory of ids and worker state."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.label = receiver.label
        self.queue: deque[Notification] = deque()
        self.seen: OrderedDict[str, None] = OrderedDict()  # LRU of ids queued or sent
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()


class Notifier:
    """Delivers notifications to receivers; a runnable of every replica (only the leader
    produces notifications, and one that stops leading still delivers what it queued)."""

    name = "notifier"
    needs_leader = False

    def __init__(
        self,
        receivers: Sequence[Receiver],
        *,
        hooks: NotifierHooks | None = None,
        request_timeout: float = 5.0,
        total_timeout: float = 60.0,
        max_attempts: int = 5,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        queue_size: int = 1000,
        dedup_size: int = 4096,
        verify: ssl.SSLContext | str | bool = True,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = _SYSTEM_RANDOM.random,
    ) -> None:
        if not 0 < request_timeout <= total_timeout:
            raise ValueError(
                f"Notifier needs 0 < request_timeout <= total_timeout, got "
                f"{request_timeout} / {total_timeout}"
            )
        if max_attempts < 1 or queue_size < 1 or dedup_size < 1:
            raise ValueError("Notifier needs max_attempts, queue_size and dedup_size >= 1")
        Backoff[str](backoff_base, backoff_cap)  # validates base and cap
        self._lanes = [_Lane(receiver) for receiver in receivers]
        self._hooks = hooks or NotifierHooks()
        self._request_timeout = request_timeout
        self._total_timeout = total_timeout
        self._max_attempts = max_attempts
        self._backoff = (backoff_base, backoff_cap)
        self._queue_size = queue_size
        self._dedup_size = dedup_size
        self._verify = verify
        self._clock = clock
        self._sleep = sleep
        self._jitter = jitter
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._said: set[tuple[str, str]] = set()  # (receiver, what) warned about once

    @property
    def receivers(self) -> tuple[Receiver, ...]:
        """The receivers, in order."""
        return tuple(lane.receiver for lane in self._lanes)

    # -- producing (any code, any thread) --------------------------------------------

    def notify(self, n: Notification) -> None:
        """Queue ``n`` for every receiver that wants its kind. Never blocks, never raises:
        callable from the event loop, from sync code and from other threads."""
        try:
            loop = self._loop
            if loop is not None and not loop.is_closed() and loop.is_running():
                try:
                    running = asyncio.get_running_loop()
                except RuntimeError:
                    running = None
                if running is not loop:  # another thread: the loop's own thread enqueues
                    loop.call_soon_threadsafe(self._enqueue, n)
                    return
            self._enqueue(n)
        except Exception as exc:
            log.warning("notification not queued: %s", type(exc).__name__)

    def _enqueue(self, n: object) -> None:  # anything: notify() is called with garbage too
        try:
            if not isinstance(n, Notification):
                log.warning("ignored a notification of type %s", type(n).__name__)
                return
            key = n.id
            for lane in self._lanes:
                if lane.receiver.wants(n.kind):
                    self._enqueue_in(lane, n, key)
        except Exception as exc:
            log.warning("notification not queued: %s", type(exc).__name__)

    def _enqueue_in(self, lane: _Lane, n: Notification, key: str) -> None:
        if key in lane.seen:
            lane.seen.move_to_end(key)
            log.debug("notification %s (%s) already queued or sent to %s", key, n.kind, lane.label)
            return
        lane.seen[key] = None
        while len(lane.seen) > self._dedup_size:
            lane.seen.popitem(last=False)
        lane.queue.append(n)
        if len(lane.queue) > self._queue_size:
            oldest = lane.queue.popleft()
            lane.seen.pop(oldest.id, None)
            self._count(self._hooks.dropped, lane.label, "queue-full")
            self._say_once(
                lane.label,
                "queue-full",
                "notification queue of %s is full (%d): dropping the oldest (counted in "
                "kube_nudge_notifications_dropped_total; said once)",
                lane.label,
                self._queue_size,
            )
        lane.idle.clear()
        lane.wake.set()

    # -- sending (the event loop) -----------------------------------------------------

    async def run(self) -> None:
        """Send until cancelled, one worker per receiver."""
        if self._workers and self._loop is asyncio.get_running_loop():
            raise RuntimeError("Notifier is already running")
        self._start()
        try:
            await asyncio.gather(*self._workers)
        finally:
            await self._stop()

    async def drain(self, timeout: float) -> bool:
        """Send what is queued, for at most ``timeout`` seconds (shutdown: call it after
        ``run`` stopped, or while it runs). True if everything queued was sent or given up
        on in time. If this call started the workers, what is left when it returns is
        dropped (counted with reason ``shutdown``)."""
        own = not self._workers
        if own:
            self._start()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(lane.idle.wait() for lane in self._lanes))
            return True
        except TimeoutError:
            return False
        finally:
            if own:
                await self._stop()
                self._drop_queued("shutdown")

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for lane in self._lanes:
            # Fresh events, bound to this loop (notify may have run before any loop did).
            lane.wake, lane.idle = asyncio.Event(), asyncio.Event()
            if lane.queue:
                lane.wake.set()
            else:
                lane.idle.set()
        self._workers = [
            asyncio.create_task(self._work(lane), name=f"notifier {lane.label}")
            for lane in self._lanes
        ]

    async def _stop(self) -> None:
        workers, self._workers = self._workers, []
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    def _drop_queued(self, reason: str) -> None:
        for lane in self._lanes:
            while lane.queue:
                dropped = lane.queue.popleft()
                lane.seen.pop(dropped.id, None)
                self._count(self._hooks.dropped, lane.label, reason)
                log.warning(
                    "notification %s (%s) to %s dropped unsent (%s)",
                    dropped.id,
                    dropped.kind,
                    lane.label,
                    reason,
                )

    async def _work(self, lane: _Lane) -> None:
        timeout = aiohttp.ClientTimeout(total=self._request_timeout)
        headers = {"User-Agent": f"kube-nudge/{__version__}"}
        connector = aiohttp.TCPConnector(ssl=_tls(self._verify), limit=1)
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=headers
        ) as http:
            backoff = Backoff[str](*self._backoff)
            while True:
                if not lane.queue:
                    lane.idle.set()
                    lane.wake.clear()
                    await lane.wake.wait()
                    continue
                n = lane.queue.popleft()
                try:
                    await self._deliver(lane, http, backoff, n)
                except asyncio.CancelledError:
                    lane.queue.appendleft(n)  # for drain; the receiver can drop a repeat
                    raise
                except Exception as exc:  # a worker never dies
                    lane.seen.pop(n.id, None)
                    self._count(self._hooks.failed, lane.label, "error")
                    log.error(
                        "notification %s (%s) to %s not sent: unexpected %s",
                        n.id,
                        n.kind,
                        lane.label,
                        type(exc).__name__,
                    )
                finally:
                    backoff.succeeded(n.id)

    async def _deliver(
        self, lane: _Lane, http: aiohttp.ClientSession, backoff: Backoff[str], n: Notification
    ) -> None:
        body = json.dumps(lane.receiver.payload(n), ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": n.id}
        about = f"{n.kind} of {n.workload_kind} {n.namespace}/{n.workload}"
        deadline = self._clock.monotonic() + self._total_timeout
        attempt = 0
        while True:
            attempt += 1
            budget = min(self._request_timeout, deadline - self._clock.monotonic())
            reason, status, retry_after = await self._post(lane, http, body, headers, budget)
            if reason is None:
                self._count(self._hooks.sent, lane.label, str(n.kind))
                log.debug(
                    "notification %s (%s) delivered to %s (attempt %d)",
                    n.id,
                    about,
                    lane.label,
                    attempt,
                )
                return
            outcome = f"HTTP {status}" if status is not None else reason
            if reason == "rejected":
                self._say_once(
                    lane.label,
                    "rejected",
                    "notification receiver %s answered %s, not retried: check its URL and "
                    "format (said once per receiver)",
                    lane.label,
                    outcome,
                )
                return self._give_up(lane, n, about, reason, outcome, attempt, quiet=True)
            delay = backoff.failed(n.id) * (0.5 + 0.5 * self._jitter())
            if retry_after is not None:
                delay = retry_after
            if attempt >= self._max_attempts:
                return self._give_up(lane, n, about, reason, outcome, attempt)
            if self._clock.monotonic() + delay >= deadline:
                return self._give_up(lane, n, about, reason, outcome, attempt, budget_spent=True)
            log.debug(
                "notification %s (%s) to %s: attempt %d failed (%s), next in %.2f s",
                n.id,
                about,
                lane.label,
                attempt,
                outcome,
                delay,
            )
            await self._sleep(delay)

    async def _post(
        self,
        lane: _Lane,
        http: aiohttp.ClientSession,
        body: bytes,
        headers: Mapping[str, str],
        budget: float,
    ) -> tuple[str | None, int | None, float | None]:
        """One request: (failure reason or None if delivered, HTTP status, Retry-After)."""
        if budget <= 0:
            return "timeout", None, None
        try:
            # One bound for the whole request: connect, send, answer and its body.
            async with (
                asyncio.timeout(budget),
                http.post(
                    lane.receiver.url, data=body, headers=headers, allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=budget),
                ) as response,
            ):  # fmt: skip
                await response.read()
        except TimeoutError:
            return "timeout", None, None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            log.debug("notification to %s: %s", lane.label, type(exc).__name__)
            return "network", None, None
        status = response.status
        if 200 <= status < 300:
            return None, status, None
        if status == 429:
            return "rate-limited", status, self._retry_after(response.headers)
        if status in _RETRY_STATUS:
            return "timeout", status, None
        if status >= 500:
            return "server-error", status, None
        return "rejected", status, None

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        """``Retry-After`` in seconds (a number or an HTTP date), None if absent or bad."""
        value = headers.get("retry-after", "").strip()
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - self._clock.now())

    def _give_up(
        self,
        lane: _Lane,
        n: Notification,
        about: str,
        reason: str,
        outcome: str,
        attempts: int,
        *,
        budget_spent: bool = False,
        quiet: bool = False,
    ) -> None:
        lane.seen.pop(n.id, None)  # notified again later, it is tried again
        self._count(self._hooks.failed, lane.label, reason)
        why = f"; the next try would pass its {self._total_timeout:g} s" if budget_spent else ""
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "notification %s (%s) to %s not delivered after %d attempt(s): %s%s",
            n.id,
            about,
            lane.label,
            attempts,
            outcome,
            why,
        )

    def _say_once(self, receiver: str, what: str, message: str, *args: Any) -> None:
        if (receiver, what) in self._said:
            log.debug(message, *args)
            return
        self._said.add((receiver, what))
        log.warning(message, *args)

    @staticmethod
    def _count(hook: Callable[[str, str], None], receiver: str, value: str) -> None:
        try:
            hook(receiver, value)
        except Exception as exc:  # a metrics bug must not stop delivery
            log.error("notification metric hook failed: %s", type(exc).__name__)
