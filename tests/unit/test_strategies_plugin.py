"""A strategy is a plugin: a package of its own plus a registry entry is all it takes.

The toy strategy (tests/unit/toy_strategy, registered with ``registry.register``) is
accepted by the annotation, decided for and acted on by an unchanged controller, and its
hooks are wired: its own ConfigMaps are left out of the source cache, its webhook is
served. Nothing outside its package names it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx2 as httpx
import pytest

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.controller.following import RolloutFollower
from kube_nudge.controller.reconciler import WorkloadKey
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.workloads import ARGO_ROLLOUTS, BUILTIN_KINDS, Target
from kube_nudge.model import SourceKind, WorkloadView, parse_workload
from kube_nudge.model.tracking import Phase, Tracking
from kube_nudge.reporting import status
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import Strategy
from kube_nudge.strategies.changes import WorkloadChanges
from kube_nudge.strategies.registry import (
    contract,
    owned_source_labels,
    product_defaults,
    register,
    strategy_names,
    unregister,
    webhooks,
)
from tests.unit.fakes import (
    KEY,
    NS,
    FakeClock,
    PostedEvents,
    configmap,
    desired,
    sources,
    workload,
)
from tests.unit.httpx_support import HttpxTransport
from tests.unit.toy_strategy import GREETING, OWN_LABEL, RUNS, ToyStrategy, ToyWebhook, toy_settings

DEPLOYMENT = BUILTIN_KINDS[0]
APP_KEY: WorkloadKey = (DEPLOYMENT, NS, "app")


@pytest.fixture
def toy() -> Iterator[type[ToyStrategy]]:
    ToyStrategy.calls.clear()
    register(ToyStrategy)
    yield ToyStrategy
    unregister(ToyStrategy.name)


@pytest.fixture
async def controller(toy: type[ToyStrategy]) -> AsyncIterator[Controller]:
    http = httpx.AsyncClient(
        base_url="https://api.invalid"
    )  # never reached: the toy writes nothing
    client = KubeClient(HttpxTransport(http))
    made = Controller(
        client,
        ControllerOptions(namespaces=(NS,)),
        hmac_key=KEY,
        metrics=Metrics(),
        recorder=EventRecorder(client),
        clock=FakeClock(),
    )
    made.synced.set()
    yield made
    await http.aclose()


def toy_workload(**recorded: str) -> WorkloadView:
    """The fakes' Deployment, choosing the toy strategy, with what it records as given."""
    return workload(strategy="toy", defaults=product_defaults(), **recorded)  # type: ignore[arg-type]


def seen(controller: Controller, view: WorkloadView, level: str) -> None:
    """The caches as the informers would fill them: the workload and ConfigMap app."""
    controller.cache._workloads[DEPLOYMENT][0].store[(NS, "app")] = view
    controller.cache._sources[SourceKind.CONFIGMAP].informers[0].store[(NS, "app")] = configmap(
        LEVEL=level
    )


def test_a_registered_strategy_is_one_the_annotation_accepts(toy: type[ToyStrategy]) -> None:
    assert "toy" in strategy_names()
    settings, errors = parse_workload({"kube-nudge.io/strategy": "toy"}, NS, product_defaults())
    assert (settings.strategy, errors) == ("toy", [])


def test_its_own_annotation_is_declared_and_parsed_into_its_own_settings(
    toy: type[ToyStrategy],
) -> None:
    [declared] = [a for a in contract() if a.name == GREETING]
    assert contract()[-1] is declared  # after the model's and the built-in strategies'
    annotations = {"kube-nudge.io/strategy": "toy", GREETING: "howdy"}
    settings, errors = parse_workload(annotations, NS, product_defaults())
    assert (toy_settings(settings).greeting, errors) == ("howdy", [])
    settings, errors = parse_workload({**annotations, GREETING: "hi"}, NS, product_defaults())
    assert toy_settings(settings).greeting == "hello"
    assert errors == [f'{GREETING} must be "hello" or "howdy", got "hi"']


def test_unregistered_it_is_gone_again() -> None:
    assert "toy" not in strategy_names()
    assert OWN_LABEL not in owned_source_labels()
    assert GREETING not in {a.name for a in contract()}

    class Rollout(ToyStrategy):
        name = "rollout"

    with pytest.raises(ValueError, match="registered already"):
        register(Rollout)


async def test_the_controller_decides_for_it_and_it_acts(controller: Controller) -> None:
    view = toy_workload()
    assert (view.settings.strategy, view.errors) == ("toy", ())
    seen(controller, view, "info")
    assert (await controller.reconciler.reconcile(APP_KEY)).action == "adopted"
    first = desired(view, sources(LEVEL="info"))
    # Maintaining: it looks after its objects when nothing changes the workload; after
    # adopting, at the next look (what the adoption wrote is then in the caches).
    assert ToyStrategy.calls == [f"adopt app {first}"]
    # Its baseline is back through the watch; then the config changes.
    seen(controller, toy_workload(baseline=first), "debug")
    assert (await controller.reconciler.reconcile(APP_KEY)).action == "rolled"
    second = desired(view, sources(LEVEL="debug"))
    assert second != first
    assert ToyStrategy.calls[-1] == f"apply app {second}"
    # The pods run it: nothing to do but look after its own objects.
    seen(controller, toy_workload(template_hash=second), "debug")
    assert (await controller.reconciler.reconcile(APP_KEY)).action == "none"
    assert ToyStrategy.calls[2:] == ["maintain app"]


async def test_the_controller_asks_its_own_hold(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`decide` asks the workload's strategy for a hold of its own (``StrategyModel.hold``),
    here the toy's on its own setting: no change is applied."""
    monkeypatch.setattr(controller.events, "post", PostedEvents().post)
    first = desired(toy_workload(), sources(LEVEL="info"))
    annotations = {"kube-nudge.io/strategy": "toy", GREETING: "howdy"}
    howdy, _ = parse_workload(annotations, NS, product_defaults())
    seen(controller, replace(toy_workload(baseline=first), settings=howdy), "debug")
    outcome = await controller.reconciler.reconcile(APP_KEY)
    assert (outcome.action, outcome.state) == ("held", "held-invalid")
    assert not any(call.startswith("apply") for call in ToyStrategy.calls)


async def test_its_own_objects_are_no_sources_and_its_webhook_is_served(
    controller: Controller,
) -> None:
    project = controller.cache._sources[SourceKind.CONFIGMAP].informers[0].project
    mine = {"metadata": {"name": "c", "namespace": NS, "labels": {OWN_LABEL: "1"}}, "data": {}}
    assert project(mine) is None
    assert project({"metadata": {"name": "c", "namespace": NS}}) is not None  # any other is
    served = [hook for hook in webhooks(controller, lambda: KEY) if isinstance(hook, ToyWebhook)]
    assert len(served) == 1 and served[0].host is controller and served[0].hmac_key() == KEY


def test_kube_nudge_status_counts_a_pod_by_the_config_it_delivered(
    toy: type[ToyStrategy],
) -> None:
    assert status._running_hash({RUNS: "v1-toy", "kube-nudge.io/config-hash": "v1-old"}) == "v1-toy"
    assert status._running_hash({"kube-nudge.io/config-hash": "v1-old"}) == "v1-old"


async def said_failed(
    follower: RolloutFollower, target: Target, failed: Tracking, strategy: Strategy
) -> None:
    """What the follower says of ``failed``, once its record is written (not sent here)."""
    changes = WorkloadChanges()
    follower._record_failure(target, failed, strategy, changes)
    await changes.run_effects()


async def test_a_failed_rollout_names_the_strategies_that_can_roll_back(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconciler names no strategy: the RolloutFailed advice lists those among its own
    that roll back (``RollingBack``), and each says what it goes back to."""
    reconciler = controller.reconciler
    posted = PostedEvents()
    monkeypatch.setattr(controller.events, "post", posted.post)

    target = Target(DEPLOYMENT, NS, "app", toy_workload())
    failed = Tracking(Phase.FAILED, config_hash="v1-new", detail="0 of 1 updated")
    follower = reconciler.follower
    await said_failed(follower, target, failed, reconciler.strategies["toy"])
    assert posted.events[-1][3].endswith(
        "; kube-nudge cannot roll it back: strategy toy keeps no copy of the earlier "
        "config (revert the source, or use strategy snapshot)"
    )
    await said_failed(follower, target, failed, reconciler.strategies["snapshot"])
    assert posted.events[-1][3].endswith(
        "; not rolled back (kube-nudge.io/on-failure: rollback would; or kubectl rollout undo)"
    )
    # A kind whose revisions kube-nudge doesn't read: no strategy is offered instead.
    rollout = Target(ARGO_ROLLOUTS, NS, "app", toy_workload())
    for name in ("toy", "snapshot"):
        await said_failed(follower, rollout, failed, reconciler.strategies[name])
        assert posted.events[-1][3].endswith(
            "; kube-nudge cannot roll back a Rollout: it reads no revisions of that kind "
            "(revert the source)"
        )
