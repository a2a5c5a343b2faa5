"""The pod replacer's passes against a fake API: it stops at the first refusal, waits for the
replacements, warns once about pods without a controller, reports once at the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from kube_nudge.controller.replacer import POLL, PodReplacer
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.model import SourceKind, SourceRef, SourceView, project_source
from kube_nudge.model.replacement import STALL_AFTER
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from tests.unit.fakes import FakeClock, PostedEvents

NS = "team"
REF = SourceRef(SourceKind.CONFIGMAP, NS, "app")
CHANGED = "2026-01-01T00:00:10Z"


def running_pod(
    name: str, started: str, *, owned: bool = True, ready: bool = True
) -> dict[str, Any]:
    owners = [{"kind": "ReplicaSet", "name": "web", "controller": True}] if owned else []
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"app": "web"},
                     "ownerReferences": owners},
        "status": {"phase": "Running", "startTime": started,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }  # fmt: skip


class FakeApi:
    """Pods and budgets to list; evictions recorded, or refused with 429 for some pods."""

    def __init__(self, pods: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> None:
        self.pods, self.budgets = pods, budgets
        self.refuse: set[str] = set()
        self.evictions: list[tuple[str, Any]] = []

    async def list_pages(
        self, path: str, params: Mapping[str, str | int] | None = None
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        if path.endswith("/poddisruptionbudgets"):
            yield self.budgets, "1"
        else:
            assert params == {"labelSelector": "app=web"}
            yield self.pods, "1"

    async def request(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        if method == "GET":  # the source's metadata, for the Event's uid
            return {"metadata": {"uid": "uid-app"}}
        assert (method, options["retry_throttled"]) == ("POST", False)
        name = path.split("/")[-2]
        self.evictions.append((name, options["body"]["deleteOptions"]))
        if name in self.refuse:
            raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate ...")
        return {}


def source(selector: str = "app=web") -> SourceView:
    return project_source({
        "metadata": {"name": "app", "namespace": NS, "creationTimestamp": CHANGED,
                     "annotations": {"kube-nudge.io/pod-selector": selector}},
        "data": {"A": "2"},
    })  # fmt: skip


def replacer(api: FakeApi, posted: PostedEvents, metrics: Metrics, clock: FakeClock) -> PodReplacer:
    view = source()
    return PodReplacer(
        cast(KubeClient, api), cast(BackgroundEvents, posted), metrics,
        source=lambda ref: view if ref == REF else None, sources=lambda: [REF],
        synced=asyncio.Event(), clock=clock,
    )  # fmt: skip


async def test_a_pass_stops_at_the_first_refusal_then_waits_then_reports_once() -> None:
    pods = [
        running_pod("web-b", "2026-01-01T00:00:02Z"),
        running_pod("web-a", "2026-01-01T00:00:01Z"),
        running_pod("web-c", "2026-01-01T00:00:03Z"),
        running_pod("bare", "2026-01-01T00:00:01Z", owned=False),
        running_pod("web-new", CHANGED),  # the same second: fresh
    ]
    api = FakeApi(pods, [{"spec": {"selector": {"matchLabels": {"app": "web"}}}}])
    api.refuse = {"web-b"}
    posted, metrics, clock = PostedEvents(), Metrics(), FakeClock()
    pods_replacer = replacer(api, posted, metrics, clock)

    assert await pods_replacer.replace(REF) == POLL
    # oldest first, this very pod (uid), no further once the budget refused
    assert api.evictions == [
        ("web-a", {"preconditions": {"uid": "uid-web-a"}}),
        ("web-b", {"preconditions": {"uid": "uid-web-b"}}),
    ]
    assert metrics.pod_evictions.labels(outcome="evicted")._value.get() == 1
    assert metrics.pod_evictions.labels(outcome="blocked")._value.get() == 1
    [warning] = posted.events
    assert warning[:3] == ("uid-app", "Warning", "PodNotReplaced")
    assert "have no controller to replace them: bare;" in warning[3]
    assert metrics.pods_not_replaced._value.get() == 1

    # web-a is on its way out: wait, and warn no more
    api.pods = [{**p, "metadata": {**p["metadata"], "deletionTimestamp": CHANGED}}
                if p["metadata"]["name"] == "web-a" else p for p in pods]  # fmt: skip
    assert await pods_replacer.replace(REF) == POLL
    assert len(api.evictions) == 2 and len(posted.events) == 1

    # web-a gone, its replacement not created yet: the floor waits for it
    api.pods = [p for p in pods if p["metadata"]["name"] != "web-a"]
    clock.advance(POLL)
    assert await pods_replacer.replace(REF) == POLL
    assert len(api.evictions) == 2

    # every owned pod fresh: done, reported once with what was evicted
    api.pods = [pods[3], running_pod("web-x", "2026-01-01T00:00:20Z"), pods[4]]
    assert await pods_replacer.replace(REF) is None
    assert posted.events[1:] == [
        ("uid-app", "Normal", "PodsReplaced",
         "replaced 1 pod matching app=web that started before the data changed (evicted, "
         "PodDisruptionBudgets respected)"),
    ]  # fmt: skip


async def test_without_a_budget_one_pod_per_pass() -> None:
    pods = [
        running_pod("web-a", "2026-01-01T00:00:01Z"),
        running_pod("web-b", "2026-01-01T00:00:02Z"),
    ]
    api = FakeApi(pods, [])
    pods_replacer = replacer(api, PostedEvents(), Metrics(), FakeClock())
    assert await pods_replacer.replace(REF) == POLL
    assert [name for name, _ in api.evictions] == ["web-a"]


async def test_a_wait_that_lasts_is_warned_about_once() -> None:
    """A matching pod that never gets Ready holds the replacement: after STALL_AFTER a
    Warning names it, once per wait."""
    stuck = running_pod("web-stuck", "2026-01-01T00:00:20Z", ready=False)
    old = running_pod("web-a", "2026-01-01T00:00:01Z")
    older = running_pod("web-b", "2026-01-01T00:00:02Z")
    api = FakeApi([old, older, stuck], [])
    posted, clock = PostedEvents(), FakeClock()
    pods_replacer = replacer(api, posted, Metrics(), clock)

    assert await pods_replacer.replace(REF) == POLL
    clock.advance(STALL_AFTER - 1)
    assert await pods_replacer.replace(REF) == POLL
    assert posted.events == [] and api.evictions == []
    clock.advance(1)
    assert await pods_replacer.replace(REF) == POLL
    clock.advance(STALL_AFTER)
    assert await pods_replacer.replace(REF) == POLL
    assert posted.events == [
        ("uid-app", "Warning", "PodReplacementStalled",
         "replacing pods matching kube-nudge.io/pod-selector app=web has waited 5 min "
         "(pods not Ready: web-stuck); it goes on by itself once that clears"),
    ]  # fmt: skip

    fresh = running_pod("web-stuck", "2026-01-01T00:00:20Z")  # Ready at last
    api.pods = [old, older, fresh]
    assert await pods_replacer.replace(REF) == POLL
    assert [name for name, _ in api.evictions] == ["web-a"]

    # web-a's replacement never gets Ready: a new wait, warned about in its turn
    api.pods = [older, fresh, running_pod("web-c", "2026-01-01T00:00:30Z", ready=False)]
    assert await pods_replacer.replace(REF) == POLL
    clock.advance(STALL_AFTER)
    assert await pods_replacer.replace(REF) == POLL
    assert [event[2] for event in posted.events] == ["PodReplacementStalled"] * 2
    assert "(pods not Ready: web-c)" in posted.events[1][3]
    assert [name for name, _ in api.evictions] == ["web-a"]
