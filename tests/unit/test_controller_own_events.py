"""A workload's own events (its status updates, an unrelated edit of its annotations) as
the controller queues them: they never open a debounce window that a later config change
could ride in, so that change still waits its whole window; a workload that records no
hash is looked at at once, like one seen for the first time."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx2 as httpx
import pytest

from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.controller.reconciler import WorkloadKey
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.resources import CONFIGMAPS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import SourceView, WorkloadView
from kube_nudge.model.analysis import KUBE_NUDGE_TEMPLATE, AnalysisRef
from kube_nudge.model.progress import Progress
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.registry import product_defaults
from tests.unit.fakes import APP, KEY, NS, FakeClock, configmap, desired, sources, workload
from tests.unit.httpx_support import HttpxTransport

DEPLOYMENT = BUILTIN_KINDS[0]
WEB: WorkloadKey = (DEPLOYMENT, NS, "app")
DEBOUNCE = 5.0


@pytest.fixture
async def controller() -> AsyncIterator[tuple[Controller, FakeClock]]:
    clock = FakeClock(0.0)
    http = httpx.AsyncClient(base_url="https://api.invalid")
    client = KubeClient(HttpxTransport(http))
    options = dataclasses.replace(
        ControllerOptions(namespaces=(NS,)), defaults=product_defaults(debounce=DEBOUNCE)
    )
    made = Controller(
        client, options, hmac_key=KEY, metrics=Metrics(), recorder=EventRecorder(client),
        clock=clock,
    )  # fmt: skip
    made.synced.set()
    yield made, clock
    await http.aclose()


def debounced(view: WorkloadView, *, progress: str = "1 of 1 updated") -> WorkloadView:
    """``view`` with the test's debounce and a rollout status (what status updates move)."""
    settings = dataclasses.replace(view.settings, debounce=DEBOUNCE)
    return dataclasses.replace(
        view, settings=settings, progress=Progress(done=True, deadline_exceeded=False,
                                                   detail=progress),
    )  # fmt: skip


def seen(controller: Controller, view: WorkloadView) -> None:
    """Put ``view`` in the workload cache, as its informer does before the handler."""
    informer = controller.cache._workloads[DEPLOYMENT][0]  # the cache itself
    informer.store[(NS, "app")] = view


def workload_event(
    controller: Controller, old: WorkloadView | None, new: WorkloadView | None
) -> None:
    """What the workload informer calls on a watch event: the cache's index, then the
    handlers."""
    controller.cache._workloads[DEPLOYMENT][0].handler((NS, "app"), old, new)


def change_config(controller: Controller, before: str, after: str) -> None:
    controller.cache._sources[APP.kind].informers[0].handler(  # the source informer's handler
        (APP.namespace, APP.name), configmap(LEVEL=before), configmap(LEVEL=after)
    )


async def test_a_status_update_opens_no_window_a_config_change_could_ride_in(
    controller: tuple[Controller, FakeClock],
) -> None:
    """The issue's sequence: the workload's own event at 0, a config change at 3.01 s under
    a 5 s debounce. The change waits its whole window (8.01), not the 2 s left of a window
    the status update would have opened."""
    ctl, clock = controller
    adopted = debounced(workload(template_hash="h1"))
    seen(ctl, adopted)
    workload_event(ctl, None, adopted)  # first sight: at once
    assert ctl.queue.ready_at(WEB) == 0.0
    await ctl.queue.get()
    ctl.queue.done(WEB)
    clock.advance(10.0)
    now = clock.monotonic()
    status = debounced(adopted, progress="1 of 1 updated, 1 available")
    seen(ctl, status)
    workload_event(ctl, adopted, status)
    assert ctl.queue.ready_at(WEB) == now + DEBOUNCE  # looked at, a debounce later
    clock.advance(3.01)
    change_config(ctl, "info", "debug")
    assert ctl.queue.ready_at(WEB) == pytest.approx(now + 3.01 + DEBOUNCE)
    clock.advance(1.0)
    later = debounced(status, progress="1 of 1 updated, 2 available")
    seen(ctl, later)
    workload_event(ctl, status, later)  # neither shortens it
    change_config(ctl, "debug", "warn")  # nor restarts it
    assert ctl.queue.ready_at(WEB) == pytest.approx(now + 3.01 + DEBOUNCE)


async def test_a_workload_that_records_no_hash_anymore_is_looked_at_at_once(
    controller: tuple[Controller, FakeClock],
) -> None:
    """A template edit that drops kube-nudge's hash: the next look adopts what the sources
    hold then, so it must be now, as at first sight (the restarted pods read it now)."""
    ctl, clock = controller
    rolled = debounced(workload(template_hash="h1"))
    seen(ctl, rolled)
    workload_event(ctl, None, rolled)
    await ctl.queue.get()
    ctl.queue.done(WEB)
    clock.advance(10.0)
    dropped = debounced(workload())
    seen(ctl, dropped)
    workload_event(ctl, rolled, dropped)
    assert ctl.queue.ready_at(WEB) == clock.monotonic()


async def test_a_completed_rollout_whose_analysis_starts_is_looked_at_at_once(
    controller: tuple[Controller, FakeClock],
) -> None:
    """The gate's schedule runs from the analysis's start: the status that completes a gated
    rollout is looked at now, not a debounce later; an ungated one still waits; and a config
    change's open window is not shortened by it."""
    ctl, clock = controller
    gate = AnalysisRef(KUBE_NUDGE_TEMPLATE, "error-rate")
    for analysis, due in ((gate, 0.0), (None, DEBOUNCE)):
        settings = dataclasses.replace(workload().settings, analysis=analysis)
        rolling = debounced(dataclasses.replace(workload(template_hash="h1"), settings=settings))
        rolling = dataclasses.replace(rolling, progress=Progress(False, False, "0 of 1 updated"))
        seen(ctl, rolling)
        workload_event(ctl, None, rolling)
        await ctl.queue.get()
        ctl.queue.done(WEB)
        clock.advance(10.0)
        done = debounced(rolling)
        seen(ctl, done)
        workload_event(ctl, rolling, done)
        assert ctl.queue.ready_at(WEB) == clock.monotonic() + due, analysis
        clock.advance(due)
        await ctl.queue.get()
        ctl.queue.done(WEB)
    clock.advance(10.0)
    change_config(ctl, "info", "debug")  # a window opens for the gated workload
    window_end = ctl.queue.ready_at(WEB)
    assert window_end == pytest.approx(clock.monotonic() + DEBOUNCE)
    again = dataclasses.replace(done, progress=Progress(False, False, "0 of 1 updated"))
    seen(ctl, again)
    workload_event(ctl, done, again)
    seen(ctl, done)
    workload_event(ctl, again, done)
    assert ctl.queue.ready_at(WEB) == window_end


def source_seen(controller: Controller, view: SourceView) -> None:
    """Put the ConfigMap's view in the source cache, as its informer does."""
    controller.cache._sources[APP.kind].informers[0].store[(APP.namespace, APP.name)] = view


async def test_an_early_pass_inside_a_window_does_not_roll_the_change_it_holds(
    controller: tuple[Controller, FakeClock],
) -> None:
    """A follow-up or retry taken while a config change's window is open does nothing with
    the change (no write: this client's API server doesn't exist); the window's end does."""
    ctl, clock = controller
    running = desired(workload(), sources(LEVEL="info"))
    adopted = debounced(workload(template_hash=running))
    seen(ctl, adopted)
    source_seen(ctl, configmap(LEVEL="info"))
    workload_event(ctl, None, adopted)
    await ctl.queue.get()
    assert (await ctl.reconciler.reconcile(WEB)).action == "none"  # runs what's desired
    ctl.queue.done(WEB)
    source_seen(ctl, configmap(LEVEL="debug"))
    change_config(ctl, "info", "debug")  # its window: 5 s
    ctl.queue.add(WEB)  # a follow-up, now
    assert await ctl.queue.get() == WEB
    outcome = await ctl.reconciler.reconcile(WEB)
    assert outcome.action == "none"
    ctl.queue.done(WEB)
    assert ctl.queue.ready_at(WEB) == pytest.approx(clock.monotonic() + DEBOUNCE)


async def test_the_queue_and_cache_gauges_read_the_state_when_scraped(
    controller: tuple[Controller, FakeClock],
) -> None:
    ctl, _ = controller

    def sample(name: str, **labels: str) -> float | None:
        return ctl.metrics.registry.get_sample_value(name, labels)

    assert sample("kube_nudge_queue_depth") == 0
    view = debounced(workload(template_hash="h1"))
    seen(ctl, view)
    source_seen(ctl, configmap(LEVEL="info"))
    workload_event(ctl, None, view)
    assert sample("kube_nudge_queue_depth") == 1
    assert sample("kube_nudge_objects_tracked", resource=str(DEPLOYMENT.resource)) == 1
    assert sample("kube_nudge_objects_tracked", resource=str(CONFIGMAPS)) == 1
    await ctl.queue.get()
    ctl.queue.done(WEB)
    assert sample("kube_nudge_queue_depth") == 0


async def test_the_echo_a_pass_was_held_back_for_brings_it_back(
    controller: tuple[Controller, FakeClock],
) -> None:
    """A pass that found the cache behind its own write did nothing; the write's echo, even
    one recognised as our own with nothing else changed, queues the workload again."""
    ctl, clock = controller
    rolled = dataclasses.replace(debounced(workload(template_hash="h1")), resource_version=7)
    seen(ctl, rolled)
    workload_event(ctl, None, rolled)
    await ctl.queue.get()
    ctl.queue.done(WEB)
    ctl.reconciler.context.expectations.wrote(WEB, {"metadata": {"resourceVersion": "8"}})
    ctl.book.remember(WEB)  # as a pass's page starts it
    ctl.book.applying(WEB, "rollout", "h2")
    assert ctl.book.lagging(WEB, rolled) is not None  # a pass held back
    clock.advance(10.0)
    echo = dataclasses.replace(rolled, template_hash="h2", resource_version=8)
    assert rolled.same_but_records(echo)
    seen(ctl, echo)
    workload_event(ctl, rolled, echo)
    assert ctl.queue.ready_at(WEB) == clock.monotonic() + DEBOUNCE  # as its own event


async def test_the_echo_of_a_write_no_pass_waited_for_queues_nothing(
    controller: tuple[Controller, FakeClock],
) -> None:
    ctl, _ = controller
    rolled = dataclasses.replace(debounced(workload(template_hash="h1")), resource_version=7)
    seen(ctl, rolled)
    workload_event(ctl, None, rolled)
    await ctl.queue.get()
    ctl.queue.done(WEB)
    ctl.reconciler.context.expectations.wrote(WEB, {"metadata": {"resourceVersion": "8"}})
    ctl.book.remember(WEB)  # as a pass's page starts it
    ctl.book.applying(WEB, "rollout", "h2")
    echo = dataclasses.replace(rolled, template_hash="h2", resource_version=8)
    seen(ctl, echo)
    workload_event(ctl, rolled, echo)
    assert ctl.queue.ready_at(WEB) is None
