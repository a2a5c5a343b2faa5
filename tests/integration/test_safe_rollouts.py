"""Safe config releases against the real cluster, with rollouts that really fail.

A fake kubelet (tests/integration/fakekubelet.py) runs the pods of these workloads and
marks a pod Ready only when the config it read at start is valid (``MODE`` is not
``broken``): a bad config never becomes available, and kube-nudge's progress deadline
calls the rollout failed. Order, stopped lines and turns are observed from a watch of
the Deployments, never from the controller's own account.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.annotations import FAILED
from kube_nudge.model.progress import progress_of
from kube_nudge.runtime.notifier import Notifier
from kube_nudge_dev.cluster import LocalCluster
from tests.integration import manifests
from tests.integration.controller_support import (
    events,
    kube_nudge_cli,
    running_controller,
    template_hash,
    until,
)
from tests.integration.fakekubelet import FakeKubelet, placement
from tests.integration.manifests import ENABLED
from tests.webhook_receiver import Server

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


def node_for(namespace: str) -> str:
    """Each test its own fake node: pods of an earlier test's namespace still terminating
    never land on it."""
    return f"fake-kubelet-{namespace}"


DEADLINE = "8s"  # kube-nudge.io/progress-deadline: a bad config fails within seconds
TIMEOUT = 90.0


def valid(env: Mapping[str, str]) -> bool:
    """The app starts only with a config that isn't broken."""
    return env.get("MODE") != "broken"


@dataclass
class Seen:
    """One Deployment as last seen on the watch."""

    template: str | None = None
    done: bool = False
    failed: bool = False


@dataclass
class Timeline:
    """Every change of each Deployment's template hash, rollout completion and recorded
    failure, in watch order: (sequence, name, what)."""

    entries: list[tuple[int, str, str]] = field(default_factory=list)
    seen: dict[str, Seen] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    completed: dict[str, str | None] = field(default_factory=dict)
    """The template each Deployment last completed a rollout of."""
    rolling_peak: int = 0
    """The most Deployments seen rolling at once (template changed, not done yet)."""

    def apply(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        progress = progress_of("Deployment", obj)
        now = Seen(
            template_hash(obj, DEPLOYMENT),
            progress is not None and progress.done,
            FAILED in (obj["metadata"].get("annotations") or {}),
        )
        before = self.seen.get(name)
        if before is not None and before.template != now.template:
            self.entries.append((len(self.entries), name, "template"))
        # "done": the rollout of this template completed (once per template; a Deployment
        # can look unfinished for a moment without a new template, e.g. while a pod is
        # replaced, which is not a rollout).
        if now.done and self.completed.get(name, "?") != now.template:
            self.completed[name] = now.template
            self.entries.append((len(self.entries), name, "done"))
        if now.failed and (before is None or not before.failed):
            self.entries.append((len(self.entries), name, "failed"))
        self.seen[name] = now
        rolling = sum(
            1 for n, s in self.seen.items() if self.completed.get(n, "?") != s.template
            and not s.failed
        )  # fmt: skip
        self.rolling_peak = max(self.rolling_peak, rolling)
        self.changed.set()

    async def until(self, condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    def first(self, name: str, what: str, after: int = 0) -> int:
        found = [i for i, n, w in self.entries[after:] if n == name and w == what]
        assert found, f"no {what} of {name} after {after}: {self.entries}"
        return found[0]


@contextlib.asynccontextmanager
async def watching(kube: KubeClient, namespace: str) -> AsyncIterator[Timeline]:
    timeline = Timeline()
    listed = await kube.get(DEPLOYMENTS.path(namespace))
    for obj in listed["items"]:
        timeline.apply(obj)

    async def follow() -> None:
        version = listed["metadata"]["resourceVersion"]
        async for event in kube.watch(DEPLOYMENTS.path(namespace), resource_version=version):
            if event["type"] in ("ADDED", "MODIFIED"):
                timeline.apply(event["object"])

    task = asyncio.create_task(follow())
    try:
        yield timeline
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def receiving() -> AsyncIterator[tuple[Server, Notifier]]:
    """A local webhook receiver taking every kind of notification, and a notifier for it."""
    server = Server()
    await server.start()
    notifier = Notifier([server.receiver("hook")], backoff_base=0.01)
    task = asyncio.create_task(notifier.run())
    try:
        yield server, notifier
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await server.close()


def announced(server: Server) -> collections.Counter[tuple[str, str]]:
    """(workload, kind) of every notification delivered."""
    return collections.Counter((p["workload"], p["kind"]) for p in server.payloads("hook"))


async def make_fleet(
    kube: KubeClient, namespace: str, orders: Mapping[str, int | None], **more: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"MODE": "v1"}))
    for name, order in orders.items():
        annotations = {**ENABLED, "kube-nudge.io/progress-deadline": DEADLINE, **more}
        if order is not None:
            annotations["kube-nudge.io/rollout-order"] = str(order)
        spec = {**manifests.env_consumer("MODE"), **placement(node_for(namespace))}
        body = manifests.deployment(name, replicas=2, spec=spec, annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), body)


async def change(kube: KubeClient, namespace: str, mode: str) -> None:
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"MODE": mode}})


def held(found: list[dict[str, Any]]) -> set[str]:
    return {event["involvedObject"]["name"] for event in found}


ORDERS = {"a1": 1, "b1": 1, "a2": 2, "b2": 2, "c3": 3}


def assert_in_order(timeline: Timeline, start: int) -> None:
    """Every workload rolled exactly once since ``start``, each after every lower order
    completed."""
    rolled = collections.Counter(n for _, n, w in timeline.entries[start:] if w == "template")
    assert rolled == dict.fromkeys(ORDERS, 1), rolled
    for name, order in ORDERS.items():
        first = timeline.first(name, "template", start)
        for lower, lower_order in ORDERS.items():
            if lower_order < order:
                assert timeline.first(lower, "done", start) < first, (name, lower)


def all_done(timeline: Timeline, start: int) -> bool:
    return all(
        any(n == name and w == "done" for _, n, w in timeline.entries[start:]) for name in ORDERS
    )


async def test_an_ordered_fleet_rolls_by_order_and_a_failure_stops_the_line(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    async with FakeKubelet(kube, node_for(namespace), valid):
        await make_fleet(kube, namespace, ORDERS)
        async with watching(kube, namespace) as timeline:
            await timeline.until(lambda: len(timeline.seen) == 5 and all(
                s.done for s in timeline.seen.values()))  # fmt: skip
            async with (
                receiving() as (receiver, notifier),
                running_controller(cluster, namespace, notify=notifier.notify),
            ):
                start = len(timeline.entries)
                await change(kube, namespace, "v2")
                await timeline.until(lambda: all_done(timeline, start))
                assert_in_order(timeline, start)
                good = {name: timeline.seen[name].template for name in ORDERS}

                start = len(timeline.entries)
                await change(kube, namespace, "broken")
                await timeline.until(
                    lambda: timeline.seen["a1"].failed and timeline.seen["b1"].failed
                )
                stopped: set[str] = set()

                async def line_stopped() -> bool:
                    stopped.update(held(await events(kube, namespace, "LineStopped")))
                    return {"a2", "b2", "c3"} <= stopped

                await until(line_stopped, TIMEOUT)
                failed = held(await events(kube, namespace, "RolloutFailed"))
                assert failed == {"a1", "b1"}
                # Nothing of a higher order rolled into the broken config.
                assert {n: timeline.seen[n].template for n in ("a2", "b2", "c3")} == {
                    n: good[n] for n in ("a2", "b2", "c3")
                }
                assert [e for e in timeline.entries[start:] if e[1] in ("a2", "b2", "c3")] == []

                # A new change restarts the line, in order again.
                start = len(timeline.entries)
                await change(kube, namespace, "v3")
                await timeline.until(lambda: all_done(timeline, start))
                assert_in_order(timeline, start)

                # Exactly one notification per workload, kind and config: rolling and complete
                # for v2 and v3, rolling and failed for the broken config on order 1, a stopped
                # line for the others; waiting for an order is routine and not announced.
                expected = collections.Counter(
                    {(n, "rolling"): 2 for n in ORDERS} | {(n, "complete"): 2 for n in ORDERS}
                )
                expected.update({("a1", "rolling"): 1, ("b1", "rolling"): 1,
                                 ("a1", "failed"): 1, ("b1", "failed"): 1})  # fmt: skip
                expected.update({(n, "line-stopped"): 1 for n in ("a2", "b2", "c3")})
                await receiver.wait(lambda: announced(receiver) >= expected)
                assert announced(receiver) == expected


async def test_max_concurrent_rollouts_is_never_exceeded(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    names = {f"w{i}": None for i in range(10)}
    async with FakeKubelet(kube, node_for(namespace), valid):
        await make_fleet(kube, namespace, names)
        async with watching(kube, namespace) as timeline:
            await timeline.until(lambda: len(timeline.seen) == 10 and all(
                s.done for s in timeline.seen.values()))  # fmt: skip
            async with running_controller(cluster, namespace, max_concurrent_rollouts=2):
                start = len(timeline.entries)
                timeline.rolling_peak = 0
                await change(kube, namespace, "v2")
                await timeline.until(lambda: all(
                    any(n == name and w == "done" for _, n, w in timeline.entries[start:])
                    for name in names))  # fmt: skip
                assert timeline.rolling_peak == 2  # the limit was reached, never exceeded
                assert held(await events(kube, namespace, "WaitingForTurn"))


@contextlib.asynccontextmanager
async def one_web(
    kube: KubeClient, cluster: LocalCluster, namespace: str, **annotations: str
) -> AsyncIterator[Timeline]:
    """One Deployment "web" on the fake kubelet, available, with kube-nudge running."""
    async with FakeKubelet(kube, node_for(namespace), valid):
        await make_fleet(kube, namespace, {"web": None}, **annotations)
        async with watching(kube, namespace) as timeline:
            await timeline.until(lambda: timeline.seen.get("web", Seen()).done)
            async with running_controller(cluster, namespace):
                yield timeline


async def held_for(kube: KubeClient, namespace: str, reason: str) -> None:
    """Wait for a hold's Event on "web"."""

    async def posted() -> bool:
        return "web" in held(await events(kube, namespace, reason))

    await until(posted, TIMEOUT)


async def test_an_approval_hold_is_released_by_kube_nudge_approve(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    approval = {"kube-nudge.io/approval": "required"}
    async with one_web(kube, cluster, namespace, **approval) as timeline:
        before = timeline.seen["web"].template
        await change(kube, namespace, "v2")
        await held_for(kube, namespace, "AwaitingApproval")
        assert timeline.seen["web"].template == before
        code, out = await kube_nudge_cli(cluster, namespace, "approve", "deployment/web")
        assert code == 0, out
        assert f"approved {namespace}/Deployment/web" in out
        await timeline.until(lambda: timeline.seen["web"].template != before
                             and timeline.seen["web"].done)  # fmt: skip


async def test_a_failed_snapshot_rollout_is_rolled_back_to_the_good_copies(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    rollback = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}
    async with one_web(kube, cluster, namespace, **rollback) as timeline:
        before = timeline.seen["web"].template
        await change(kube, namespace, "v2")
        await timeline.until(lambda: timeline.seen["web"].template != before
                             and timeline.seen["web"].done)  # fmt: skip
        good = timeline.seen["web"].template
        await change(kube, namespace, "broken")
        await timeline.until(lambda: timeline.seen["web"].failed)
        await held_for(kube, namespace, "RolledBack")
        await timeline.until(lambda: timeline.seen["web"].template == good)
        await timeline.until(lambda: timeline.seen["web"].done)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        env = web["spec"]["template"]["spec"]["containers"][0]["env"][0]
        copy = env["valueFrom"]["configMapKeyRef"]["name"]
        assert copy != "app"  # a snapshot copy, holding the good config
        data = (await kube.get(CONFIGMAPS.path(namespace, copy)))["data"]
        assert data == {"MODE": "v2"}
        await held_for(kube, namespace, "ConfigRolledBack")  # and the failed config not again
        assert timeline.seen["web"].template == good


def next_minute_window(now: float) -> tuple[str, float]:
    """A one-hour rollout window (UTC) opening at the next whole minute at least 5 s away,
    and when it opens (windows have minutes, so this is as soon as one can open)."""
    opens = (int(now) // 60 + 1) * 60
    if opens - now < 5:
        opens += 60
    start = time.gmtime(opens)
    end = time.gmtime(opens + 3600)
    return f"{start.tm_hour:02d}:{start.tm_min:02d}-{end.tm_hour:02d}:{end.tm_min:02d} UTC", opens


async def test_a_change_waits_for_its_rollout_window(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    window, opens = next_minute_window(time.time())
    async with one_web(kube, cluster, namespace, **{"kube-nudge.io/rollout-window": window}) as (
        timeline
    ):
        before = timeline.seen["web"].template
        await change(kube, namespace, "v2")
        await held_for(kube, namespace, "OutsideWindow")
        assert timeline.seen["web"].template == before
        await timeline.until(lambda: timeline.seen["web"].template != before, 120)
        # Rolled once the window opened, not before (the watch saw it after).
        assert time.time() >= opens
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        rolled_at = web["metadata"]["annotations"]["kube-nudge.io/rolled-at"]
        assert float(rolled_at.split(",")[-1]) >= opens
