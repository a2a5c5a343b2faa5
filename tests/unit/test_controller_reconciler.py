"""The reconciler's read → decide → act → remember loop, with the watch echo of its own
write arriving at the worst moment: before the write's response."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest

from kube_nudge.controller.book import RolloutBook
from kube_nudge.controller.reconciler import Reconciler, WorkloadKey
from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.workloads import BUILTIN_KINDS, Target
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    SourceRef,
    SourceView,
    WorkloadView,
    assess,
)
from kube_nudge.model.annotations import FAILED
from kube_nudge.model.progress import Progress
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.expectations import EXPECTATION_TTL, WriteExpectations
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import Strategy, StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.registry import Strategies
from tests.unit.fakes import (
    KEY,
    NS,
    CachedViews,
    FakeApi,
    FakeClock,
    RecordedEvents,
    sources,
    workload,
)

DEPLOYMENT = BUILTIN_KINDS[0]
KEY_OF_APP: WorkloadKey = (DEPLOYMENT, NS, "app")


class EchoingApi(FakeApi):
    """The API server, whose watch echo of a PATCH reaches the cache before the PATCH's
    response does: ``on_patch`` runs during the request, and its answer is the response."""

    def __init__(self) -> None:
        super().__init__()
        self.on_patch: Callable[[], Awaitable[JSON]] | None = None

    async def request(self, method: str, path: str, **options: Any) -> JSON:
        answer = await super().request(method, path, **options)
        if method == "PATCH" and self.on_patch is not None:
            return await self.on_patch()
        return answer


class EchoFirstStrategy:
    """A strategy whose write's watch echo reaches the cache before its response does."""

    name = "rollout"
    capped = True

    def __init__(self, cluster: dict[WorkloadKey, WorkloadView]) -> None:
        self.cluster = cluster
        self.reconciler: Reconciler | None = None
        self.writes: list[str] = []
        self.pending: WorkloadView | None = None
        """What the workload looks like once the pass's PATCH is made."""

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        self.writes.append(f"adopt {plan.config_hash}")
        self._write(changes, workload(baseline=plan.config_hash))

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        self.writes.append(f"apply {plan.config_hash}")
        self._write(changes, workload(template_hash=plan.config_hash))

    def _write(self, changes: WorkloadChanges, view: WorkloadView) -> None:
        changes.annotate({"test.kube-nudge.io/written": "yes"})
        self.pending = view

    async def during_patch(self) -> JSON:
        """The PATCH is made: its echo comes first."""
        if self.pending is not None:
            view, self.pending = self.pending, None
            self._echo(view)
        return {}

    def _echo(self, view: WorkloadView) -> None:
        self.cluster[KEY_OF_APP] = view
        assert self.reconciler is not None
        assert self.reconciler.book.observed(KEY_OF_APP, view)  # recognised as our own write


def reconciler_over(
    data: dict[SourceRef, SourceView], api: FakeApi | None = None
) -> tuple[Reconciler, EchoFirstStrategy, RecordedEvents]:
    cluster = {KEY_OF_APP: workload()}
    strategy = EchoFirstStrategy(cluster)
    recorder = RecordedEvents()
    reconciler = reconciler_of(CachedViews(cluster, data), strategy, recorder, api)
    strategy.reconciler = reconciler
    return reconciler, strategy, recorder


def reconciler_of(
    reader: CachedViews, strategy: Strategy, recorder: RecordedEvents, api: FakeApi | None = None
) -> Reconciler:
    """A reconciler over ``reader`` with ``strategy`` as strategy rollout, its Events kept
    by ``recorder`` (no API server: nothing but the strategy writes, and ``api`` answers
    the reconciler's own)."""
    events = BackgroundEvents(recorder.as_recorder(), on_failure=lambda: None)
    clock = FakeClock()
    if api is None:
        api = EchoingApi()
        api.on_patch = getattr(strategy, "during_patch", None)
    client = api.as_client()
    context = StrategyContext(client, events, Metrics(), KEY, clock=clock,
                              expectations=WriteExpectations(clock))  # fmt: skip
    strategies = Strategies({"rollout": strategy})
    book = RolloutBook(reader.workload, capped=strategies.capped, metrics=context.metrics,
                       clock=context.clock, expectations=context.expectations)  # fmt: skip
    return Reconciler(reader, strategies, book, context)


async def test_missing_config_at_first_sight_adopts_once_then_holds_despite_an_early_echo() -> None:
    reconciler, strategy, recorder = reconciler_over({})
    outcome = await reconciler.reconcile(KEY_OF_APP)
    await reconciler.context.events.flush()
    assert outcome.state == "held-missing"
    assert len(strategy.writes) == 1 and strategy.writes[0].startswith("adopt ")
    assert recorder.posted[-1] == ("ConfigMissing", "not rolling: configmap/app not found")
    # Level-triggered: the next pass over the unchanged cluster only holds again.
    again = await reconciler.reconcile(KEY_OF_APP)
    assert again.state == "held-missing"
    assert len(strategy.writes) == 1


async def test_present_config_at_first_sight_adopts_once_despite_an_early_echo() -> None:
    reconciler, strategy, _ = reconciler_over(sources(LEVEL="info"))
    outcome = await reconciler.reconcile(KEY_OF_APP)
    assert outcome.action == "adopted"
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "none"
    assert len(strategy.writes) == 1


class CancelledMidWrite(EchoFirstStrategy):
    """The replica stops leading while the write is in flight: the task is cancelled."""

    async def during_patch(self) -> JSON:
        raise asyncio.CancelledError


async def test_a_write_cancelled_in_flight_is_not_remembered_as_done() -> None:
    data = sources(LEVEL="info")
    reconciler, strategy, _ = reconciler_over(data)
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "adopted"
    data.update(sources(LEVEL="debug"))
    cancelling = CancelledMidWrite(strategy.cluster)
    cancelling.reconciler = reconciler
    reconciler.strategies = {"rollout": cancelling}
    api = cast(EchoingApi, reconciler.context.client)
    api.on_patch = cancelling.during_patch
    with pytest.raises(asyncio.CancelledError):
        await reconciler.reconcile(KEY_OF_APP)
    # The next leader term reconciles again: the change is still to be written.
    reconciler.strategies = {"rollout": strategy}
    api.on_patch = strategy.during_patch
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "rolled"
    assert strategy.writes[-1].startswith("apply ")


PENDING = 40
"""The resourceVersion at which the workload carries a record its strategy confirms."""


class ConfirmingStrategy(EchoFirstStrategy):
    """Maintains its own record as strategy hot does: a change delivered in place is
    confirmed once (an Event, a count), and the write that removes the record is answered
    at the next resourceVersion, whose watch echo the test delivers when it chooses."""

    def __init__(self, cluster: dict[WorkloadKey, WorkloadView]) -> None:
        super().__init__(cluster)
        self.confirmed = 0

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        if target.view.resource_version == PENDING:
            self.confirmed += 1
            changes.annotate({"test.kube-nudge.io/delivered": None})
        return None

    async def during_patch(self) -> JSON:
        if self.pending is not None:
            return await super().during_patch()
        return {"metadata": {"resourceVersion": str(PENDING + 1)}}  # no echo yet


async def test_a_pass_over_a_cache_behind_its_own_write_waits_for_the_echo() -> None:
    cluster = {KEY_OF_APP: workload()}
    strategy = ConfirmingStrategy(cluster)
    reconciler = reconciler_of(CachedViews(cluster, sources(LEVEL="info")), strategy,
                               RecordedEvents())  # fmt: skip
    strategy.reconciler = reconciler
    adopted = await reconciler.reconcile(KEY_OF_APP)
    # Its own objects are looked at once the caches show the adoption, not before.
    assert (adopted.action, adopted.requeue_after, strategy.confirmed) == ("adopted", 1.0, 0)
    cluster[KEY_OF_APP] = dataclasses.replace(cluster[KEY_OF_APP], resource_version=PENDING)
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "none"
    assert strategy.confirmed == 1
    # The cache still shows the record the confirmation wrote away: nothing is done again.
    lagging = await reconciler.reconcile(KEY_OF_APP)
    assert (lagging.action, lagging.follow_up) == ("lagging", EXPECTATION_TTL)
    assert strategy.confirmed == 1
    echo = dataclasses.replace(cluster[KEY_OF_APP], resource_version=PENDING + 1)
    cluster[KEY_OF_APP] = echo
    assert reconciler.book.caught_up(KEY_OF_APP, echo)  # wakes the pass held back
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "none"
    assert strategy.confirmed == 1


async def test_an_echo_that_never_comes_holds_a_workload_back_only_for_the_ttl() -> None:
    cluster = {KEY_OF_APP: workload()}
    strategy = ConfirmingStrategy(cluster)
    reconciler = reconciler_of(CachedViews(cluster, sources(LEVEL="info")), strategy,
                               RecordedEvents())  # fmt: skip
    strategy.reconciler = reconciler
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "adopted"
    cluster[KEY_OF_APP] = dataclasses.replace(cluster[KEY_OF_APP], resource_version=PENDING)
    await reconciler.reconcile(KEY_OF_APP)
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "lagging"
    clock = reconciler.context.clock
    assert isinstance(clock, FakeClock)
    clock.advance(EXPECTATION_TTL)
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "none"
    assert strategy.confirmed == 2  # the cache is trusted again, as it was before the write


LOW: WorkloadKey = (DEPLOYMENT, NS, "low")
HIGH: WorkloadKey = (DEPLOYMENT, NS, "high")


def ordered(order: int, view: WorkloadView, *, done: bool, observed: bool) -> WorkloadView:
    """``view`` with a rollout order and its own controller's progress."""
    progress = Progress(done=done, deadline_exceeded=False, detail="", observed=observed)
    settings = dataclasses.replace(view.settings, rollout_order=order)
    return dataclasses.replace(view, settings=settings, progress=progress)


class EchoThenSiblingStrategy:
    """Rolls "low"; its echo (a template whose status its controller has not observed yet)
    reaches the cache, and "high" is reconciled, all before low's write returns."""

    name = "rollout"
    capped = True

    def __init__(self, cluster: dict[WorkloadKey, WorkloadView]) -> None:
        self.cluster = cluster
        self.reconciler: Reconciler | None = None
        self.writes: list[str] = []
        self.high_while_low_in_flight: Any = None
        self.low_echo: WorkloadView | None = None

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        raise AssertionError("adopted in the set-up")

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        self.writes.append(target.name)
        changes.annotate({"test.kube-nudge.io/written": "yes"})
        if target.name == "low":
            self.low_echo = ordered(1, workload(template_hash=plan.config_hash,
                                                rolled_at=plan.rolled_at),
                                    done=False, observed=False)  # fmt: skip

    async def during_patch(self) -> JSON:
        """Low's PATCH is made: its echo comes, and high is reconciled, before it returns."""
        assert self.reconciler is not None
        echo, self.low_echo = self.low_echo, None
        if echo is not None:
            self.cluster[LOW] = echo
            self.reconciler.book.observed(LOW, echo)
            self.high_while_low_in_flight = await self.reconciler.reconcile(HIGH)
        return {}


async def test_a_higher_order_waits_while_the_lower_ones_new_template_is_not_yet_observed() -> None:
    data = sources(LEVEL="info")
    cluster: dict[WorkloadKey, WorkloadView] = {}
    strategy = EchoThenSiblingStrategy(cluster)
    reconciler = reconciler_of(CachedViews(cluster, data), strategy, RecordedEvents())
    strategy.reconciler = reconciler
    # Both completed an earlier rollout of the config in the cluster (followed as COMPLETE).
    current = assess(workload(), data.get, KEY).desired
    for key, order in ((LOW, 1), (HIGH, 2)):
        cluster[key] = ordered(order, workload(template_hash=current, rolled_at=(1.0,)),
                               done=True, observed=True)  # fmt: skip
        reconciler.book.observed(key, cluster[key])
        assert (await reconciler.reconcile(key)).action == "none"
    data.update(sources(LEVEL="debug"))
    assert (await reconciler.reconcile(LOW)).action == "rolled"
    # Low's status says nothing yet about its new template: it is rolling, not complete.
    assert strategy.high_while_low_in_flight.state == "held-order"
    assert strategy.writes == ["low"]


async def test_a_rollout_whose_failure_could_not_be_recorded_is_announced_when_it_completes() -> (
    None
):
    """The pass that finds a rollout failed records that on the workload; when that write
    fails, the rollout is still followed as rolling, so if it then completes after all, its
    completion is announced (a recorded failure stays a failure: ``track``)."""
    data = sources(LEVEL="info")
    api = FakeApi()
    path = DEPLOYMENT.resource.path(NS, "app")
    api.errors[path] = ApiError(500, "InternalError", "etcd is down")
    reconciler, strategy, recorder = reconciler_over(data, api)
    rolled_to = assess(workload(), data.get, KEY).desired
    rolled_at = reconciler.context.clock.now() - 10

    def status(done: bool, exceeded: bool) -> WorkloadView:
        progress = Progress(done=done, deadline_exceeded=exceeded, detail="1/2", observed=True)
        view = workload(template_hash=rolled_to, rolled_at=(rolled_at,))
        return dataclasses.replace(view, progress=progress)

    for view, action in [(status(False, False), "none"), (status(False, True), "failed"),
                         (status(True, False), "none")]:  # fmt: skip
        strategy.cluster[KEY_OF_APP] = view
        assert (await reconciler.reconcile(KEY_OF_APP)).action == action
    await reconciler.context.events.flush()
    assert [method for method, p, _ in api.requests if p == path] == ["PATCH"]  # the record
    assert [reason for reason, _ in recorder.posted] == ["WriteFailed", "RolloutComplete"]
    assert strategy.writes == []


class UpkeepRefused(EchoFirstStrategy):
    """A maintaining strategy whose look at its own objects the API refuses (403)."""

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        raise ApiError(403, "Forbidden", "replicasets is forbidden")


async def test_a_failure_is_recorded_even_when_the_strategys_upkeep_then_fails() -> None:
    """What the read step gathered (the failure's record, which holds the line) is written
    when the strategy's part fails before sending anything: one PATCH, then the Event."""
    data = sources(LEVEL="info")
    api = FakeApi()
    cluster: dict[WorkloadKey, WorkloadView] = {}
    strategy = UpkeepRefused(cluster)
    recorder = RecordedEvents()
    reconciler = reconciler_of(CachedViews(cluster, data), strategy, recorder, api)
    rolled_to = assess(workload(), data.get, KEY).desired
    progress = Progress(done=False, deadline_exceeded=True, detail="0/2", observed=True)
    view = workload(template_hash=rolled_to, rolled_at=(reconciler.context.clock.now() - 9,))
    cluster[KEY_OF_APP] = dataclasses.replace(view, progress=progress)
    assert (await reconciler.reconcile(KEY_OF_APP)).action == "failed"
    await reconciler.context.events.flush()
    [(method, _, options)] = [r for r in api.requests if r[1].endswith("/deployments/app")]
    assert method == "PATCH"
    assert options["body"]["metadata"]["annotations"][FAILED].startswith(rolled_to)
    assert [reason for reason, _ in recorder.posted] == ["RolloutFailed", "WriteFailed"]
