"""The shared writes and ``kube-nudge status`` name no strategy: what a rollout owes another
strategy (removing its record of a change delivered in place, taking its stand-ins off the
template) and when a pod last re-read its config come from the strategies' hooks, through
the registry. Each is shown here with a strategy that exists only in this test."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, cast

import pytest

from kube_nudge.controller.writer import WorkloadWriter
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.workloads import BUILTIN_KINDS, Target
from kube_nudge.model import CONFIG_HASH, Apply, Assessment, SourceKind, assess
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.registry import (
    build_strategies,
    pod_reloaded_at,
    register,
    rollout_duties,
    unregister,
)
from kube_nudge.strategies.writes import AdoptsBaseline, roll
from tests.unit.fakes import KEY, NS, PostedEvents, desired, sources, workload

DEPLOYMENT = BUILTIN_KINDS[0]
IN_PLACE = "example.com/in-place"
RELOADED = "example.com/reloaded"
COPIES = "example.com/copies"


class InPlace(AdoptsBaseline):
    """Delivers in place: a record a rollout supersedes, and when a pod reloaded."""

    name = "in-place"
    capped = True
    delivers = True
    superseded_by_rollouts = (IN_PLACE,)

    @staticmethod
    def pod_reloaded_at(annotations: Mapping[str, Any]) -> float | None:
        value = annotations.get(RELOADED)
        return float(value) if isinstance(value, str) else None

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        raise NotImplementedError


class StandIns(InPlace):
    """Names stand-ins: takes them off when its template carries its mapping."""

    name = "stand-ins"
    asked: list[Mapping[str, str | None]] = []

    @staticmethod
    def leave_stand_ins(
        target: Target, workload: JSON, plan: Apply, recorded: Mapping[str, str | None]
    ) -> dict[str, Any] | None:
        StandIns.asked.append(recorded)
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        if COPIES not in annotations:
            return None
        return {"left": annotations[COPIES], "metadata": {"annotations": dict(recorded)}}


class FakeClient:
    """Answers every GET with ``workload``; keeps the body of every PATCH."""

    def __init__(self, workload: JSON) -> None:
        self.workload = workload
        self.patches: list[dict[str, Any]] = []

    async def get(self, path: str, **params: str) -> JSON:
        return self.workload

    async def request(self, method: str, path: str, **kwargs: Any) -> JSON:
        self.patches.append(kwargs["body"])
        return {}


@pytest.fixture
def plugins() -> Iterator[None]:
    StandIns.asked.clear()
    register(InPlace)
    register(StandIns)
    yield
    unregister(InPlace.name)
    unregister(StandIns.name)


def _context(client: FakeClient) -> StrategyContext:
    events = cast(BackgroundEvents, PostedEvents())
    context = StrategyContext(cast(KubeClient, client), events, Metrics(), KEY)
    # As the controller gets them: the registry fills in what rollouts owe the strategies.
    [built] = [s for n, s in build_strategies(context).items() if n == InPlace.name]
    return cast(InPlace, built)._context


def _fresh(template_annotations: dict[str, str]) -> JSON:
    return {
        "metadata": {"uid": "u1", "resourceVersion": "7"},
        "spec": {"template": {"metadata": {"annotations": template_annotations}}},
    }


async def _roll(client: FakeClient, stand_ins: bool) -> None:
    view = workload(template_hash="v1-old")
    if stand_ins:
        view = replace(view, stand_ins=frozenset({(SourceKind.CONFIGMAP, "app-1a2b")}))
    data = sources(LEVEL="debug")
    plan = Apply(desired(view, data), {}, (1.0,), had_baseline=False)
    target = Target(DEPLOYMENT, NS, "web", view)
    context, changes = _context(client), WorkloadChanges()
    roll(context, target, plan, assess(view, data.get, KEY), changes)
    await WorkloadWriter(context).write(target, changes)  # as the reconciler's pass ends


def test_the_registry_collects_what_every_rollout_owes(plugins: None) -> None:
    duties = rollout_duties()
    assert IN_PLACE in duties.superseded
    named = {getattr(strategy, "name", None) for strategy in duties.stand_ins}
    assert StandIns.name in named and InPlace.name not in named


async def test_a_rollout_removes_a_record_of_a_change_delivered_in_place(plugins: None) -> None:
    client = FakeClient(_fresh({}))
    await _roll(client, stand_ins=False)
    [patch] = client.patches
    assert patch["metadata"]["annotations"][IN_PLACE] is None
    assert CONFIG_HASH in patch["spec"]["template"]["metadata"]["annotations"]


async def test_stand_ins_are_taken_off_by_the_strategy_that_names_them(plugins: None) -> None:
    client = FakeClient(_fresh({COPIES: "app-1a2b=app"}))
    await _roll(client, stand_ins=True)
    [patch] = client.patches
    assert patch["left"] == "app-1a2b=app"
    [recorded] = StandIns.asked
    assert recorded[IN_PLACE] is None  # what every rollout records, handed to the hook


async def test_with_no_stand_ins_left_the_rollout_is_the_plain_one_read_fresh(
    plugins: None,
) -> None:
    client = FakeClient(_fresh({}))
    await _roll(client, stand_ins=True)
    [patch] = client.patches
    assert StandIns.asked and "left" not in patch
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["metadata"]["annotations"][IN_PLACE] is None
    assert CONFIG_HASH in patch["spec"]["template"]["metadata"]["annotations"]


def test_status_asks_the_strategies_when_a_pod_reloaded(plugins: None) -> None:
    assert pod_reloaded_at({RELOADED: "5.5"}) == 5.5
    assert pod_reloaded_at({}) is None
