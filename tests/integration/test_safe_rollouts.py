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
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.model.annotations import BASELINE_HASH
from kube_nudge.notifications.delivery import Notifier
from kube_nudge.strategies.snapshot.model import BASELINE_SNAPSHOTS, parse_baseline
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import (
    events,
    kube_nudge_cli,
    posted,
    running_controller,
)
from tests.integration.fakekubelet import FakeKubelet
from tests.integration.rollout_timeline import (
    ORDERS,
    TIMEOUT,
    Seen,
    Timeline,
    all_done,
    announced,
    assert_in_order,
    change,
    held,
    held_for,
    kubelet_fleet,
    node_for,
    roll_to_good_then_broken,
    valid,
    watching,
)
from tests.webhook_receiver import Server

pytestmark = pytest.mark.cluster


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


async def test_an_ordered_fleet_rolls_by_order_and_a_failure_stops_the_line(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    async with FakeKubelet(kube, node_for(namespace), valid):
        await kubelet_fleet(kube, namespace, ORDERS)
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
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    names = {f"w{i}": None for i in range(10)}
    async with FakeKubelet(kube, node_for(namespace), valid):
        await kubelet_fleet(kube, namespace, names)
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
    kube: AdminClient, cluster: LocalCluster, namespace: str, **annotations: str
) -> AsyncIterator[Timeline]:
    """One Deployment "web" on the fake kubelet, available, with kube-nudge running."""
    async with FakeKubelet(kube, node_for(namespace), valid):
        await kubelet_fleet(kube, namespace, {"web": None}, **annotations)
        async with watching(kube, namespace) as timeline:
            await timeline.until(lambda: timeline.seen.get("web", Seen()).done)
            async with running_controller(cluster, namespace):
                yield timeline


async def test_an_approval_hold_is_released_by_kube_nudge_approve(
    kube: AdminClient, cluster: LocalCluster, namespace: str
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
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    rollback = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}
    async with one_web(kube, cluster, namespace, **rollback) as timeline:
        good = await roll_to_good_then_broken(kube, namespace, timeline)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        env = web["spec"]["template"]["spec"]["containers"][0]["env"][0]
        copy = env["valueFrom"]["configMapKeyRef"]["name"]
        assert copy != "app"  # a snapshot copy, holding the good config
        data = (await kube.get(CONFIGMAPS.path(namespace, copy)))["data"]
        assert data == {"MODE": "v2"}
        await held_for(kube, namespace, "ConfigRolledBack")  # and the failed config not again
        assert timeline.seen["web"].template == good


async def _adopted(kube: AdminClient, namespace: str) -> dict[str, Any]:
    """The Deployment "web" once kube-nudge recorded its baseline."""

    found: dict[str, Any] = {}

    async def recorded() -> bool:
        found.update(await kube.get(DEPLOYMENTS.path(namespace, "web")))
        return BASELINE_HASH in (found["metadata"].get("annotations") or {})

    await until(recorded, TIMEOUT)
    return found


def _consumed_configmap(web: dict[str, Any]) -> str:
    env = web["spec"]["template"]["spec"]["containers"][0]["env"][0]
    return str(env["valueFrom"]["configMapKeyRef"]["name"])


async def test_a_failed_first_change_after_adoption_rolls_back_onto_the_adopted_config(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Adopted (no copies on its template, nothing restarted), then a broken first change:
    the revision before it names the ConfigMap itself, which now holds the broken config.
    The rollback goes onto the copy made at adoption, so the pods start on MODE v1 again
    (the fake kubelet reads it), once; nothing re-adopts the broken config."""
    rollback = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}
    async with one_web(kube, cluster, namespace, **rollback) as timeline:
        adopted = await _adopted(kube, namespace)
        before = timeline.seen["web"].template
        assert _consumed_configmap(adopted) == "app"  # opting in rewrote nothing
        baseline = parse_baseline(adopted["metadata"]["annotations"][BASELINE_SNAPSHOTS])
        assert baseline is not None
        [(_, copy)] = list(baseline.copies)
        assert (await kube.get(CONFIGMAPS.path(namespace, copy)))["data"] == {"MODE": "v1"}
        await change(kube, namespace, "broken")
        await timeline.until(lambda: timeline.seen["web"].failed)
        await held_for(kube, namespace, "RolledBack")
        await timeline.until(lambda: timeline.seen["web"].template not in (None, before)
                             and timeline.seen["web"].done)  # fmt: skip
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert _consumed_configmap(web) == copy  # the pods read v1 again: they are Ready
        await held_for(kube, namespace, "ConfigRolledBack")  # the broken config not again
        [rolled_back] = await events(kube, namespace, "RolledBack")
        assert rolled_back.get("count", 1) == 1
        assert f"configmap/{copy}" in rolled_back["message"]
        assert "made at adoption" in rolled_back["message"]
        assert [e.get("count", 1) for e in await events(kube, namespace, "Adopted")] == [1]
        latest = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert BASELINE_HASH not in (latest["metadata"].get("annotations") or {})


async def test_a_rollback_that_would_not_restore_the_config_is_never_said_to_have_happened(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Adopted by a kube-nudge that kept no copy of the config (the annotation removed, as
    before copies were kept at adoption): the failed first change can't be undone by going
    back a revision, so it isn't. No RolledBack: a Warning that says why, and the
    workload stays on the failed config, held."""
    rollback = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}
    async with one_web(kube, cluster, namespace, **rollback) as timeline:
        await _adopted(kube, namespace)
        kept = {"metadata": {"annotations": {BASELINE_SNAPSHOTS: None}}}
        await kube.merge_patch(DEPLOYMENTS.path(namespace, "web"), kept)
        await change(kube, namespace, "broken")
        await timeline.until(lambda: timeline.seen["web"].failed)
        [impossible] = await posted(kube, namespace, "RollbackImpossible", timeout=TIMEOUT)
        assert (
            "names the sources themselves, which now hold the failed config"
            in (impossible["message"])
        )
        assert "held on the failed config" in impossible["message"]
        assert await events(kube, namespace, "RolledBack") == []  # posted instead, never too
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert _consumed_configmap(web) != "app"  # still on the failed change's copy


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
    kube: AdminClient, cluster: LocalCluster, namespace: str
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
