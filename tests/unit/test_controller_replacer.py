"""The pod replacer's passes against a fake API: it stops at the first refusal, waits for the
replacements, warns once about pods without a controller, reports once at the end; and the
handler table hands it only the sources that name pods."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kube_nudge.controller.handlers import (
    EventHandlers,
    OptInErrors,
    RunnerEvents,
    SourceEvents,
    WorkloadEvents,
)
from kube_nudge.controller.replacer import POLL, PodReplacer
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.resources import CONFIGMAPS, PODS
from kube_nudge.model import SourceKind, SourceRef, SourceView, project_source
from kube_nudge.model.replacement import STALL_AFTER
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from tests.unit.fakes import FakeApi, FakeClock, PostedEvents

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


def cluster(pods: list[dict[str, Any]], budgets: list[dict[str, Any]]) -> FakeApi:
    """Pods and budgets to list, and the source's metadata (for the Event's uid)."""
    return FakeApi(
        {"pods": pods, "poddisruptionbudgets": budgets},
        {CONFIGMAPS.path(NS, "app"): {"metadata": {"uid": "uid-app"}}},
    )


def refuse(api: FakeApi, *names: str) -> None:
    """Evictions of these pods are refused with 429 (a budget)."""
    for name in names:
        api.errors[PODS.path(NS, name, "eviction")] = ApiError(
            429, "TooManyRequests", "Cannot evict pod as it would violate ..."
        )


def evicted(api: FakeApi) -> list[tuple[str, Any]]:
    """The evictions asked for so far (pod name, delete options); pods are listed by the
    source's selector, and an eviction is never retried by the client on a 429."""
    for path, params in api.listed:
        if not path.endswith("/poddisruptionbudgets"):
            assert params == {"labelSelector": "app=web"}
    writes = [(method, path, options) for method, path, options in api.requests if method != "GET"]
    assert all(
        (method, options["retry_throttled"]) == ("POST", False) for method, _, options in writes
    )
    return [(path.split("/")[-2], options["body"]["deleteOptions"]) for _, path, options in writes]


def source(selector: str = "app=web") -> SourceView:
    return project_source({
        "metadata": {"name": "app", "namespace": NS, "creationTimestamp": CHANGED,
                     "annotations": {"kube-nudge.io/pod-selector": selector}},
        "data": {"A": "2"},
    })  # fmt: skip


def replacer(api: FakeApi, posted: PostedEvents, metrics: Metrics, clock: FakeClock) -> PodReplacer:
    view = source()
    return PodReplacer(
        api.as_client(), cast(BackgroundEvents, posted), metrics,
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
    api = cluster(pods, [{"spec": {"selector": {"matchLabels": {"app": "web"}}}}])
    refuse(api, "web-b")
    posted, metrics, clock = PostedEvents(), Metrics(), FakeClock()
    pods_replacer = replacer(api, posted, metrics, clock)

    assert await pods_replacer.replace(REF) == POLL
    # oldest first, this very pod (uid), no further once the budget refused
    assert evicted(api) == [
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
    api.lists["pods"] = [{**p, "metadata": {**p["metadata"], "deletionTimestamp": CHANGED}}
                if p["metadata"]["name"] == "web-a" else p for p in pods]  # fmt: skip
    assert await pods_replacer.replace(REF) == POLL
    assert len(evicted(api)) == 2 and len(posted.events) == 1

    # web-a gone, its replacement not created yet: the floor waits for it
    api.lists["pods"] = [p for p in pods if p["metadata"]["name"] != "web-a"]
    clock.advance(POLL)
    assert await pods_replacer.replace(REF) == POLL
    assert len(evicted(api)) == 2

    # every owned pod fresh: done, reported once with what was evicted
    api.lists["pods"] = [pods[3], running_pod("web-x", "2026-01-01T00:00:20Z"), pods[4]]
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
    api = cluster(pods, [])
    pods_replacer = replacer(api, PostedEvents(), Metrics(), FakeClock())
    assert await pods_replacer.replace(REF) == POLL
    assert [name for name, _ in evicted(api)] == ["web-a"]


async def test_a_wait_that_lasts_is_warned_about_once() -> None:
    """A matching pod that never gets Ready holds the replacement: after STALL_AFTER a
    Warning names it, once per wait."""
    stuck = running_pod("web-stuck", "2026-01-01T00:00:20Z", ready=False)
    old = running_pod("web-a", "2026-01-01T00:00:01Z")
    older = running_pod("web-b", "2026-01-01T00:00:02Z")
    api = cluster([old, older, stuck], [])
    posted, clock = PostedEvents(), FakeClock()
    pods_replacer = replacer(api, posted, Metrics(), clock)

    assert await pods_replacer.replace(REF) == POLL
    clock.advance(STALL_AFTER - 1)
    assert await pods_replacer.replace(REF) == POLL
    assert posted.events == [] and evicted(api) == []
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
    api.lists["pods"] = [old, older, fresh]
    assert await pods_replacer.replace(REF) == POLL
    assert [name for name, _ in evicted(api)] == ["web-a"]

    # web-a's replacement never gets Ready: a new wait, warned about in its turn
    api.lists["pods"] = [older, fresh, running_pod("web-c", "2026-01-01T00:00:30Z", ready=False)]
    assert await pods_replacer.replace(REF) == POLL
    clock.advance(STALL_AFTER)
    assert await pods_replacer.replace(REF) == POLL
    assert [event[2] for event in posted.events] == ["PodReplacementStalled"] * 2
    assert "(pods not Ready: web-c)" in posted.events[1][3]
    assert [name for name, _ in evicted(api)] == ["web-a"]


def test_the_handler_table_hands_the_replacer_only_sources_that_name_pods() -> None:
    """controller-runtime's predicate: a source with no ``pod-selector`` before or after its
    change never reaches the replacer (its consumers still hear of it); one that gains,
    keeps or loses its selector does (to be queued, or forgotten)."""
    seen: list[tuple[SourceView | None, SourceView | None]] = []
    consumers: list[SourceRef] = []
    table = EventHandlers(
        sources=cast(SourceEvents, lambda resource, ref, old, new: consumers.append(ref)),
        source_pods=lambda ref, old, new: seen.append((old, new)),
        workloads=cast(WorkloadEvents, None), opt_in_errors=cast(OptInErrors, None),
        runners=cast(RunnerEvents, None),
    )  # fmt: skip
    plain = project_source({"metadata": {"name": "app", "namespace": NS}, "data": {"A": "1"}})
    ignored = project_source({
        "metadata": {"name": "app", "namespace": NS, "annotations": {
            "kube-nudge.io/pod-selector": "app=web", "kube-nudge.io/ignore": "true"}},
    })  # fmt: skip
    named = source()
    changes = [(None, plain), (plain, plain), (plain, None), (plain, ignored),
               (plain, named), (named, named), (named, plain), (named, None)]  # fmt: skip
    for old, new in changes:
        table.source_changed(CONFIGMAPS, REF, old, new)
    assert seen == changes[4:]
    assert consumers == [REF] * len(changes)
