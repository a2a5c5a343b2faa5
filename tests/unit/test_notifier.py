"""The notifier against a real HTTP server on 127.0.0.1: retries, Retry-After, no retry of
a 4xx, isolation of a hanging receiver, duplicates, overflow, drain, never raising, and no
receiver URL in any log line."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, Counter

from kube_nudge.notifications.delivery import RECEIVERS_ENV, Notifier, NotifierHooks, load_receivers
from kube_nudge.notifications.model import (
    Notification,
    NotificationKind,
    Receiver,
    generic_payload,
    slack_payload,
)
from kube_nudge.runtime.metrics import Metrics
from tests.webhook_receiver import HANG, QUERY, TOKEN, WAIT, Answer, Server

BASE = Notification(
    kind=NotificationKind.FAILED, namespace="shop", workload_kind="Deployment", workload="web",
    uid="uid-web", reason="RolloutFailed", message="rollout to config 3f2a failed",
    config_hash="3f2a", time=1767225600.0, change="configmap/app@1",
)  # fmt: skip


def note(n: int, kind: NotificationKind = NotificationKind.FAILED) -> Notification:
    """The n-th distinct notification (its own config hash, so its own id)."""
    return dataclasses.replace(BASE, kind=kind, config_hash=f"hash-{n}")


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    srv = Server()
    await srv.start()
    try:
        yield srv
    finally:
        await srv.close()


@dataclass
class Counted:
    """NotifierHooks that record what they are called with."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def hooks(self) -> NotifierHooks:
        def recorder(into: list[tuple[str, str]]) -> Callable[[str, str], None]:
            def record(receiver: str, value: str) -> None:
                into.append((receiver, value))
                self.changed.set()

            return record

        return NotifierHooks(sent=recorder(self.sent), failed=recorder(self.failed),
                             dropped=recorder(self.dropped))  # fmt: skip

    async def wait(self, condition: Callable[[], bool]) -> None:
        """Until ``condition`` holds (checked after each hook call), at most WAIT s."""

        async def until() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(until(), WAIT)


class Sleeps:
    """A sleep that records each delay asked for and returns at once (no test waits on a
    backoff or a Retry-After)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


def notifier(receivers: list[Receiver], counted: Counted, sleeps: Sleeps | None = None,
             **options: Any) -> Notifier:  # fmt: skip
    options.setdefault("backoff_base", 0.01)
    options.setdefault("jitter", lambda: 1.0)
    return Notifier(receivers, hooks=counted.hooks(), sleep=sleeps or Sleeps(), **options)


def waiting(n: Notifier) -> dict[str, int]:
    """Notifications waiting, by receiver label (not counting one being sent): each lane's
    queue, read directly (the notifier exports no queue length)."""
    return {lane.label: len(lane.queue) for lane in n._lanes}


@contextlib.asynccontextmanager
async def running(n: Notifier) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(n.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)


# -- delivery and retries -------------------------------------------------------------------


async def test_503_twice_then_delivered_once(server: Server) -> None:
    server.scripts["flaky"] = [Answer(503), Answer(503), Answer(200)]
    counted, sleeps = Counted(), Sleeps()
    receiver = server.receiver("flaky")
    n = notifier([receiver], counted, sleeps)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.sent or counted.failed))
    assert len(server.hits["flaky"]) == 3
    assert len(server.delivered["flaky"]) == 1
    assert counted.sent == [(receiver.label, "failed")]
    assert counted.failed == []
    assert sleeps.delays == [0.01, 0.02]  # exponential (jitter fixed at 1.0)
    for hit in server.hits["flaky"]:
        assert hit.headers["idempotency-key"] == BASE.id
        assert hit.headers["content-type"] == "application/json"
        assert hit.headers["user-agent"].startswith("kube-nudge/")
        assert json.loads(hit.body) == generic_payload(BASE)


async def test_format_is_the_receivers(server: Server) -> None:
    counted = Counted()
    n = notifier([server.receiver("slack", fmt="slack")], counted)
    n.notify(BASE)
    async with running(n):
        await server.wait(lambda: bool(server.delivered["slack"]))
    assert json.loads(server.delivered["slack"][0].body) == slack_payload(BASE)


async def test_429_retry_after_is_honoured(server: Server) -> None:
    server.scripts["busy"] = [Answer(429, {"Retry-After": "1"}), Answer(200)]
    counted, sleeps = Counted(), Sleeps()
    n = notifier([server.receiver("busy")], counted, sleeps)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.sent or counted.failed))
    assert sleeps.delays == [1.0]  # what the receiver asked for, not the 0.01 s backoff
    assert len(server.hits["busy"]) == 2


async def test_429_retry_after_beyond_the_budget_gives_up(server: Server) -> None:
    server.scripts["busy"] = [Answer(429, {"Retry-After": "3600"})]
    counted, sleeps = Counted(), Sleeps()
    receiver = server.receiver("busy")
    n = notifier([receiver], counted, sleeps, total_timeout=60)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.failed))
    assert counted.failed == [(receiver.label, "rate-limited")]
    assert sleeps.delays == []
    assert len(server.hits["busy"]) == 1


async def test_400_is_not_retried_and_said_once(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server.scripts["bad"] = [Answer(400)]
    counted, sleeps = Counted(), Sleeps()
    receiver = server.receiver("bad")
    n = notifier([receiver], counted, sleeps)
    caplog.set_level(logging.WARNING, logger="kube_nudge.notifications.delivery")
    n.notify(note(1))
    n.notify(note(2))
    async with running(n):
        await counted.wait(lambda: len(counted.failed) == 2)
    assert len(server.hits["bad"]) == 2  # one attempt each
    assert sleeps.delays == []
    assert counted.failed == [(receiver.label, "rejected")] * 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        f"notification receiver {receiver.label} answered HTTP 400, not retried: check its "
        "URL and format (said once per receiver)"
    ]


async def test_attempts_are_bounded(server: Server) -> None:
    server.scripts["down"] = [Answer(500)]
    counted, sleeps = Counted(), Sleeps()
    receiver = server.receiver("down")
    n = notifier([receiver], counted, sleeps, max_attempts=3)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.failed))
    assert len(server.hits["down"]) == 3
    assert counted.failed == [(receiver.label, "server-error")]
    assert sleeps.delays == [0.01, 0.02]


async def test_connection_refused_is_retried_then_given_up() -> None:
    closed = Server()
    await closed.start()
    await closed.close()  # nothing listens on its port any more
    counted, sleeps = Counted(), Sleeps()
    receiver = closed.receiver("gone")
    n = notifier([receiver], counted, sleeps, max_attempts=2)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.failed))
    assert counted.failed == [(receiver.label, "network")]
    assert sleeps.delays == [0.01]


# -- isolation and timeouts -----------------------------------------------------------------


async def test_a_hanging_receiver_does_not_delay_another(server: Server) -> None:
    server.scripts["slow"] = [HANG]
    counted = Counted()
    slow, healthy = server.receiver("slow", index=0), server.receiver("ok", index=1)
    # Timeouts far beyond the test: the slow receiver is still hanging when the healthy
    # one has its message.
    n = notifier([slow, healthy], counted, request_timeout=120, total_timeout=120)
    n.notify(BASE)
    async with running(n):
        await server.wait(lambda: server.hanging["slow"] == 1 and bool(server.delivered["ok"]))
        assert server.hanging["slow"] == 1
        assert counted.sent == [(healthy.label, "failed")]
        n.notify(note(2))  # and the next one goes through too
        await server.wait(lambda: len(server.delivered["ok"]) == 2)
        assert server.hanging["slow"] == 1


async def test_a_hanging_receiver_is_timed_out(server: Server) -> None:
    server.scripts["slow"] = [HANG]
    counted = Counted()
    slow = server.receiver("slow")
    n = notifier([slow], counted, request_timeout=0.2, total_timeout=60, max_attempts=2)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.failed))
        await server.wait(lambda: server.hanging["slow"] == 0)  # the client hung up
    assert counted.failed == [(slow.label, "timeout")]
    assert len(server.hits["slow"]) == 2


# -- de-duplication, overflow, drain --------------------------------------------------------


async def test_the_same_notification_is_sent_once(server: Server) -> None:
    counted = Counted()
    n = notifier([server.receiver("ok")], counted)
    n.notify(BASE)
    n.notify(BASE)
    async with running(n):
        await server.wait(lambda: len(server.delivered["ok"]) == 1)
        n.notify(dataclasses.replace(BASE, message="same id, posted again", time=2e9))
        n.notify(note(2))  # a sentinel: FIFO, so when it is in, any duplicate would be too
        await server.wait(lambda: len(server.delivered["ok"]) == 2)
    keys = [hit.headers["idempotency-key"] for hit in server.delivered["ok"]]
    assert keys == [BASE.id, note(2).id]


async def test_a_failed_notification_is_tried_again_when_notified_again(server: Server) -> None:
    server.scripts["once"] = [Answer(400), Answer(200)]
    counted = Counted()
    n = notifier([server.receiver("once")], counted)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: bool(counted.failed))
        n.notify(BASE)
        await server.wait(lambda: bool(server.delivered["once"]))
    assert len(server.hits["once"]) == 2


async def test_only_wanted_kinds_are_sent(server: Server) -> None:
    counted = Counted()
    failures = server.receiver("failures", on=frozenset({NotificationKind.FAILED}), index=0)
    everything = server.receiver("all", index=1)
    n = notifier([failures, everything], counted)
    n.notify(note(1, NotificationKind.ROLLING))
    n.notify(note(2, NotificationKind.FAILED))
    async with running(n):
        await server.wait(lambda: len(server.delivered["all"]) == 2)
        await server.wait(lambda: len(server.delivered["failures"]) == 1)
    assert server.delivered["failures"][0].headers["idempotency-key"] == note(2).id


async def test_a_full_queue_drops_the_oldest(server: Server) -> None:
    counted = Counted()
    receiver = server.receiver("ok")
    n = notifier([receiver], counted, queue_size=2)
    for i in (1, 2, 3):
        n.notify(note(i))
    assert counted.dropped == [(receiver.label, "queue-full")]
    assert waiting(n) == {receiver.label: 2}
    async with running(n):
        await server.wait(lambda: len(server.delivered["ok"]) == 2)
    keys = [hit.headers["idempotency-key"] for hit in server.delivered["ok"]]
    assert keys == [note(2).id, note(3).id]


async def test_drain_sends_what_is_queued(server: Server) -> None:
    counted = Counted()
    n = notifier([server.receiver("ok")], counted)
    for i in (1, 2, 3):
        n.notify(note(i))
    assert await n.drain(WAIT)
    assert len(server.delivered["ok"]) == 3
    assert counted.dropped == []


async def test_drain_gives_up_at_its_timeout_and_counts_the_rest(server: Server) -> None:
    server.scripts["slow"] = [HANG]
    counted = Counted()
    receiver = server.receiver("slow")
    n = notifier([receiver], counted, request_timeout=120, total_timeout=120)
    n.notify(note(1))
    n.notify(note(2))
    assert not await n.drain(0.2)
    assert counted.dropped == [(receiver.label, "shutdown")] * 2
    assert waiting(n) == {receiver.label: 0}


async def test_drain_after_run_was_cancelled_resends_the_interrupted_one(server: Server) -> None:
    server.scripts["slow"] = [HANG, Answer(200)]
    counted = Counted()
    n = notifier([server.receiver("slow")], counted, request_timeout=120, total_timeout=120)
    n.notify(BASE)
    async with running(n):
        await server.wait(lambda: server.hanging["slow"] == 1)
    assert await n.drain(WAIT)
    assert [hit.headers["idempotency-key"] for hit in server.delivered["slow"]] == [BASE.id]


# -- never raising, never blocking ----------------------------------------------------------


def test_notify_from_sync_code_never_raises() -> None:
    receiver = Receiver("http://127.0.0.1:9/x", on=frozenset(NotificationKind))
    n = notifier([receiver], Counted(), queue_size=1)
    n.notify(BASE)  # no event loop at all
    n.notify(cast(Any, None))
    n.notify(cast(Any, "garbage"))
    n.notify(cast(Any, object()))
    n.notify(cast(Any, dataclasses.replace(BASE, uid=cast(Any, None))))  # id cannot be made
    assert waiting(n) == {receiver.label: 1}


def test_notify_never_raises_after_its_loop_closed() -> None:
    receiver = Receiver("http://127.0.0.1:9/x", on=frozenset(NotificationKind))
    n = notifier([receiver], Counted())
    loop = asyncio.new_event_loop()

    async def run_briefly() -> None:
        task = asyncio.create_task(n.run())
        for _ in range(20):  # let the idle worker reach its wait for work
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    loop.run_until_complete(run_briefly())
    loop.close()
    n.notify(note(1))  # its loop is closed: queued for a later run or drain
    n.notify(cast(Any, 42))
    assert waiting(n) == {receiver.label: 1}


async def test_notify_from_another_thread(server: Server) -> None:
    counted = Counted()
    n = notifier([server.receiver("ok")], counted)
    async with running(n):
        await asyncio.to_thread(n.notify, BASE)
        await server.wait(lambda: bool(server.delivered["ok"]))


async def test_a_broken_metric_hook_does_not_stop_delivery(server: Server) -> None:
    def broken(receiver: str, value: str) -> None:
        raise RuntimeError("metrics are broken")

    n = Notifier([server.receiver("ok")], hooks=NotifierHooks(sent=broken))
    n.notify(note(1))
    n.notify(note(2))
    async with running(n):
        await server.wait(lambda: len(server.delivered["ok"]) == 2)


# -- no URL in any log line -----------------------------------------------------------------


async def test_no_log_line_shows_a_receiver_url(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server.scripts["down"] = [Answer(503), Answer(400)]
    server.scripts["slow"] = [HANG]
    caplog.set_level(logging.DEBUG)
    counted = Counted()
    closed = Server()
    await closed.start()
    await closed.close()
    receivers = [server.receiver("down", index=0), server.receiver("ok", index=1),
                 server.receiver("slow", index=2), closed.receiver("gone", index=3)]  # fmt: skip
    n = notifier(receivers, counted, request_timeout=0.2, max_attempts=2)
    n.notify(BASE)
    async with running(n):
        await counted.wait(lambda: len(counted.failed) == 3 and len(counted.sent) == 1)
    messages = [record.getMessage() for record in caplog.records]
    assert any("not delivered" in m for m in messages)
    for message in messages:
        assert TOKEN not in message
        assert QUERY not in message


# -- configuration --------------------------------------------------------------------------


def test_load_receivers_from_file_and_env(tmp_path: Path) -> None:
    file = tmp_path / "receivers.json"
    file.write_text('[{"url": "https://hooks.slack.com/services/A", "format": "slack"}]\n')
    env = {RECEIVERS_ENV: '[{"url": "https://hooks.slack.com/services/B", "format": "slack"}]'}
    from_file, from_env = load_receivers(file, env)
    assert from_file.url.endswith("/A")
    assert from_env.url.endswith("/B")
    assert [from_file.label, from_env.label] == ["slack:hooks.slack.com#0",
                                                 "slack:hooks.slack.com#1"]  # fmt: skip
    assert load_receivers(None, {}) == ()
    file.write_text("\n")
    assert load_receivers(file, {RECEIVERS_ENV: "  "}) == ()


def test_load_receivers_errors_name_the_source(tmp_path: Path) -> None:
    file = tmp_path / "receivers.json"
    with pytest.raises(ValueError, match=r"^cannot read notification receivers from file .*: "
                                         r"No such file or directory$"):  # fmt: skip
        load_receivers(file, {})
    file.write_text('[{"url": "ftp://h/secret"}]')
    with pytest.raises(ValueError, match=rf"^notification receivers in file {file}: entry 0: "):
        load_receivers(file, {})
    with pytest.raises(ValueError, match=rf"^notification receivers in env {RECEIVERS_ENV}: "):
        load_receivers(None, {RECEIVERS_ENV: "{"})


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="request_timeout"):
        Notifier([], request_timeout=10, total_timeout=5)
    with pytest.raises(ValueError, match="max_attempts"):
        Notifier([], max_attempts=0)
    with pytest.raises(ValueError, match="Backoff"):
        Notifier([], backoff_base=0)


def test_is_a_runnable_of_every_replica() -> None:
    n = Notifier([])
    assert n.name == "notifier"
    assert n.needs_leader is False


async def test_hooks_from_prometheus_counters(server: Server) -> None:
    """The counters proposed for runtime/metrics.py, in one registry with every existing
    metric (kube_nudge_notifications of strategy notify among them): no name clash. Once
    Metrics has them, the test uses Metrics' own."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)

    def counter(name: str, labels: list[str]) -> Any:
        existing = getattr(metrics, name, None)
        return existing or Counter(f"kube_nudge_{name}", name, labels, registry=registry)

    sent = counter("notifications_sent", ["receiver", "kind"])
    failed = counter("notifications_failed", ["receiver", "reason"])
    dropped = counter("notifications_dropped", ["receiver", "reason"])
    server.scripts["bad"] = [Answer(404)]
    ok, bad = server.receiver("ok", index=0), server.receiver("bad", index=1)
    n = Notifier([ok, bad], hooks=NotifierHooks.from_counters(sent, failed, dropped),
                 queue_size=1)  # fmt: skip
    n.notify(note(1))
    n.notify(note(2))  # drops note(1) on both
    async with running(n):
        await server.wait(lambda: bool(server.delivered["ok"]) and bool(server.hits["bad"]))
        await n.drain(WAIT)
    value = registry.get_sample_value
    assert (
        value("kube_nudge_notifications_sent_total", {"receiver": ok.label, "kind": "failed"}) == 1
    )
    assert value("kube_nudge_notifications_failed_total",
                 {"receiver": bad.label, "reason": "rejected"}) == 1  # fmt: skip
    for receiver in (ok, bad):
        assert value("kube_nudge_notifications_dropped_total",
                     {"receiver": receiver.label, "reason": "queue-full"}) == 1  # fmt: skip
