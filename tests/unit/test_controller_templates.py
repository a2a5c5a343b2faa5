"""The analysis templates in the caches (``controller/templates.py``): each kind watched once
API discovery serves it, listed before the caches say they are synced, read from the store
with no request (an edit seen as its watch event arrives, no TTL); and the Analyser's
reading of them: a template that may yet come is waited for, nothing written, and one that
can't come is the analysis's Error, naming why."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from kube_nudge.controller.analysis import TEMPLATE_WAIT, Analyser
from kube_nudge.controller.cache import Cache
from kube_nudge.controller.options import ControllerOptions
from kube_nudge.controller.templates import (
    Missing,
    TemplateObject,
    Templates,
    project_template,
)
from kube_nudge.controller.writer import WorkloadWriter
from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer
from kube_nudge.kube.resources import ANALYSISTEMPLATES, Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, Target
from kube_nudge.model.analysis import (
    KUBE_NUDGE_TEMPLATE,
    AnalysisPhase,
    AnalysisRecord,
    AnalysisRef,
    parse_record,
    read_template,
)
from kube_nudge.model.annotations import ANALYSIS_RUN
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.prometheus import PrometheusAccess, PrometheusClient
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges
from tests.unit.fakes import KEY, NS, FakeApi, FakeClock, RecordedEvents, workload

ACCESS = PrometheusAccess(("http://prometheus.monitoring:9090",))
ON = ControllerOptions(namespaces=(NS,), prometheus=ACCESS)
REF = AnalysisRef(KUBE_NUDGE_TEMPLATE, "web-health")
ARGO = AnalysisRef("AnalysisTemplate.argoproj.io", "web-health")
CLUSTER = AnalysisRef("ClusterAnalysisTemplate.argoproj.io", "web-health")
SUPPLIED = {"namespace": NS, "kind": "Deployment", "name": "web", "config-hash": "h1",
            "wave": "0"}  # fmt: skip
DISCOVERY = f"/apis/{ANALYSISTEMPLATES.api_version}"
SERVED = {"resources": [{"name": "analysistemplates", "kind": "AnalysisTemplate",
                         "namespaced": True}]}  # fmt: skip
END = {"type": "BOOKMARK",
       "object": {"metadata": {"resourceVersion": "9",
                               "annotations": {INITIAL_EVENTS_END: "true"}}}}  # fmt: skip


def template(address: str = "http://prometheus.monitoring:9090", limit: int = 0) -> JSON:
    """kube-nudge's AnalysisTemplate ``web-health`` as the API server returns it."""
    query = 'sum(rate(http_errors_total{namespace="{{args.namespace}}"}[1m]))'
    metric = {"name": "error-ratio", "interval": "5s", "count": 3, "failureLimit": limit,
              "successCondition": "result[0] < 0.05",
              "provider": {"prometheus": {"address": address, "query": query}}}  # fmt: skip
    return {
        "apiVersion": "kube-nudge.io/v1alpha1",
        "kind": "AnalysisTemplate",
        "metadata": {
            "name": "web-health",
            "namespace": NS,
            "resourceVersion": "7",
            "uid": "t",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{" * 4000},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"args": [{"name": "namespace"}], "metrics": [metric]},
        "status": {"note": "not read"},
    }


def restarts(resource: Resource) -> Any:
    return lambda reason: None


class Started:
    """The caches' side: runs the informers ``Templates`` hands over once served."""

    def __init__(self) -> None:
        self.informers: list[Informer[TemplateObject]] = []
        self.tasks: list[asyncio.Task[None]] = []

    def __call__(self, informers: Sequence[Informer[TemplateObject]]) -> None:
        self.informers += informers
        self.tasks += [asyncio.create_task(informer.run()) for informer in informers]

    async def stop(self, *more: asyncio.Task[None]) -> None:
        for task in [*self.tasks, *more]:
            task.cancel()
        await asyncio.gather(*self.tasks, *more, return_exceptions=True)


def test_what_is_kept_of_a_template_is_what_read_template_reads() -> None:
    kept = project_template(template())
    assert kept == {"kind": "AnalysisTemplate",
                    "metadata": {"namespace": NS, "name": "web-health"},
                    "spec": template()["spec"]}  # fmt: skip
    assert read_template(kept, SUPPLIED) == read_template(template(), SUPPLIED)
    assert project_template({"kind": "AnalysisTemplate", "metadata": {"name": "x"}}) == {
        "kind": "AnalysisTemplate", "metadata": {"namespace": None, "name": "x"},
    }  # fmt: skip  # no spec: read_template says so


async def test_a_template_is_listed_before_the_caches_sync_and_then_read_with_no_request() -> None:
    api = FakeApi(objects={DISCOVERY: SERVED})
    api.initial_events = [{"type": "ADDED", "object": template()}, END]
    started = Started()
    templates = Templates(api.as_client(), ON, started, restarts)
    assert templates.get(REF, NS) == Missing()  # not asked yet: looked at again, not an Error
    task = asyncio.create_task(templates.run())
    await asyncio.wait_for(templates.synced.wait(), 5)
    asked = list(api.requests)
    assert [path for _, path, _ in asked] == [DISCOVERY]  # once; Argo's kinds are not asked
    found = templates.get(REF, NS)
    assert not isinstance(found, Missing)
    assert read_template(found, SUPPLIED) == read_template(template(), SUPPLIED)
    assert templates.get(AnalysisRef(KUBE_NUDGE_TEMPLATE, "other"), NS) == Missing(
        "analysis template other not found (kube-nudge.io/analysis)"
    )
    assert api.requests == asked  # every read from the store
    await started.stop(task)


async def test_a_kind_rbac_does_not_let_us_list_is_an_error_and_never_holds_the_caches() -> None:
    """A template kind served but refused (403: RBAC grants only ``get``, a hand-rolled
    install): its analyses are an Error naming the grant, and the caches sync all the same,
    so every other workload still reloads."""
    api = FakeApi(objects={DISCOVERY: SERVED})
    api.streaming_error = ApiError(403, "Forbidden", "analysistemplates is forbidden")
    started = Started()
    templates = Templates(api.as_client(), ON, started, restarts)
    task = asyncio.create_task(templates.run())
    await asyncio.wait_for(templates.synced.wait(), 5)
    assert templates.get(REF, NS) == Missing(
        f"analysis template {REF}: kube-nudge may not list and watch {ANALYSISTEMPLATES} "
        "(403): grant get, list and watch on it (the chart does)"
    )
    await started.stop(task)


async def test_an_edited_template_is_read_as_its_watch_event_brings_it_no_ttl() -> None:
    api = FakeApi(objects={DISCOVERY: SERVED})
    api.initial_events = [{"type": "ADDED", "object": template(limit=0)}, END]
    started = Started()
    templates = Templates(api.as_client(), ON, started, restarts)
    task = asyncio.create_task(templates.run())
    await asyncio.wait_for(templates.synced.wait(), 5)
    [informer] = started.informers
    informer._apply((NS, "web-health"), project_template(template(limit=2)))  # MODIFIED
    found = templates.get(REF, NS)
    assert not isinstance(found, Missing)
    assert read_template(found, SUPPLIED).metrics[0].failure_limit == 2
    informer._apply((NS, "web-health"), None)  # DELETED
    assert templates.get(REF, NS) == Missing(
        "analysis template web-health not found (kube-nudge.io/analysis)"
    )
    await started.stop(task)


async def test_a_kind_not_served_is_an_error_until_its_crd_comes_then_watched() -> None:
    """The caches don't wait for it; discovery is asked again after 1, 2, 4 … s; once served,
    its informers start, and until they have listed a template is waited for, not missing."""
    api = FakeApi()  # 404 for the discovery of kube-nudge.io/v1alpha1: the CRD isn't there
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            api.objects[DISCOVERY] = SERVED  # the CRD is installed
        await asyncio.sleep(0)

    started = Started()
    templates = Templates(api.as_client(), ON, started, restarts, sleep=sleep,
                          first_retry=1.0, max_retry=2.0)  # fmt: skip
    task = asyncio.create_task(templates.run())
    await asyncio.wait_for(templates.synced.wait(), 5)
    assert templates.get(REF, NS) == Missing(
        "analysis template web-health: the API server does not serve "
        "analysistemplates.kube-nudge.io (is its CRD installed?)"
    )
    while not started.informers:
        await asyncio.sleep(0)
    assert sleeps == [1.0, 2.0, 2.0]  # capped at max_retry
    assert templates.get(REF, NS) == Missing()  # served, not listed yet: look again shortly
    [informer] = started.informers
    informer._apply((NS, "web-health"), project_template(template()))
    informer.synced.set()
    assert not isinstance(templates.get(REF, NS), Missing)
    await asyncio.sleep(0)
    assert not task.done()  # idles: the caches' task must not end
    await started.stop(task)


async def test_a_discovery_that_fails_is_no_answer_the_caches_wait_for_it() -> None:
    api = FakeApi(objects={DISCOVERY: SERVED})
    api.initial_events = [END]
    api.errors[DISCOVERY] = ApiError(503, "ServiceUnavailable", "etcd is down")
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        del api.errors[DISCOVERY]
        await asyncio.sleep(0)

    started = Started()
    templates = Templates(api.as_client(), ON, started, restarts, sleep=sleep)
    task = asyncio.create_task(templates.run())
    await asyncio.wait_for(templates.synced.wait(), 5)
    assert len(sleeps) == 1 and len(started.informers) == 1
    assert templates.get(REF, NS) == Missing("analysis template web-health not found "
                                             "(kube-nudge.io/analysis)")  # fmt: skip
    await started.stop(task)


async def test_the_caches_are_synced_only_once_the_template_kinds_are_answered() -> None:
    api = FakeApi(objects={DISCOVERY: SERVED})
    api.initial_events = [END]  # every informer's initial list: empty
    api.errors[DISCOVERY] = ApiError(503, "ServiceUnavailable", "etcd is down")
    cache = Cache(api.as_client(), ON, Metrics())
    assert Cache(api.as_client(), ControllerOptions(), Metrics()).templates is None  # off
    task = asyncio.create_task(cache.run())
    while not all(informer.synced.is_set() for informer in cache.informers()):
        await asyncio.sleep(0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not cache.synced.is_set() and cache.healthy  # asking discovery again, after 1 s
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(
    ("options", "informers", "unread"),
    [
        pytest.param(ON, {KUBE_NUDGE_TEMPLATE: [NS]},
                     {ARGO: "--argo-analysis-templates", CLUSTER: "--argo-analysis-templates"},
                     id="kube-nudge's own only"),
        pytest.param(ControllerOptions(namespaces=(NS, "pay"), prometheus=ACCESS,
                                       argo_analysis_templates=True),
                     {KUBE_NUDGE_TEMPLATE: [NS, "pay"], ARGO.kind: [NS, "pay"]},
                     {CLUSTER: "watches only some namespaces (--namespace)"},
                     id="namespace-scoped: no cluster-scoped kind"),
        pytest.param(ControllerOptions(prometheus=ACCESS, argo_analysis_templates=True),
                     {KUBE_NUDGE_TEMPLATE: [None], ARGO.kind: [None], CLUSTER.kind: [None]},
                     {}, id="cluster-wide: one informer of each"),
    ],
)  # fmt: skip
def test_the_kinds_read_and_where(
    options: ControllerOptions,
    informers: dict[str, list[str | None]],
    unread: dict[AnalysisRef, str],
) -> None:
    templates = Templates(FakeApi().as_client(), options, Started(), restarts)
    scopes = {kind: [i.config.namespace for i in group]
              for kind, group in templates.informers.items()}  # fmt: skip
    assert scopes == informers
    for ref, why in unread.items():
        missing = templates.get(ref, NS)
        assert isinstance(missing, Missing) and missing.why is not None and why in missing.why


# -- the Analyser reading them ---------------------------------------------------------------


class Read:
    """Templates as the Analyser reads them: what a test says ``get`` answers."""

    def __init__(self, answer: TemplateObject | Missing) -> None:
        self.answer = answer
        self.asked: list[tuple[AnalysisRef, str]] = []

    def get(self, ref: AnalysisRef, namespace: str) -> TemplateObject | Missing:
        self.asked.append((ref, namespace))
        return self.answer


async def step(read: Read) -> tuple[float | None, FakeApi, RecordedEvents]:
    """One look at web's analysis of config h1 (its rollout completed), ``read`` answering."""
    api, recorder, clock = FakeApi(), RecordedEvents(), FakeClock()
    events = BackgroundEvents(recorder.as_recorder(), on_failure=lambda: None)
    context = StrategyContext(api.as_client(), events, Metrics(), KEY, clock=clock)
    analyser = Analyser(context, PrometheusClient(ACCESS), context.metrics, templates=read)
    target = Target(BUILTIN_KINDS[0], NS, "web", workload())
    changes = WorkloadChanges()
    taken = await analyser.step(target, REF, "h1", AnalysisRecord("h1", None), changes)
    await WorkloadWriter(context).write(target, changes)  # as the reconciler's pass ends
    await events.flush()
    return taken.next_look, api, recorder


def recorded(api: FakeApi) -> list[AnalysisRecord | None]:
    """The analysis records the Analyser wrote (its PATCHes)."""
    return [parse_record(options["body"]["metadata"]["annotations"][ANALYSIS_RUN])
            for method, _, options in api.requests if method == "PATCH"]  # fmt: skip


async def test_a_template_that_may_yet_come_is_waited_for_with_nothing_written() -> None:
    next_look, api, recorder = await step(Read(Missing()))
    assert next_look == TEMPLATE_WAIT
    assert api.requests == [] and recorder.posted == []  # not even AnalysisStarted


async def test_a_template_that_cannot_come_is_the_analysis_error_naming_why() -> None:
    why = "analysis template web-health not found (kube-nudge.io/analysis)"
    next_look, api, recorder = await step(Read(Missing(why)))
    assert next_look is None
    [record] = recorded(api)
    assert record is not None and record.phase is AnalysisPhase.ERROR and record.verdict == why
    assert [reason for reason, _ in recorder.posted] == ["AnalysisStarted", "AnalysisError"]


async def test_the_cached_template_is_what_is_judged_with_no_request_to_read_it() -> None:
    """A template whose server isn't allowed is refused before any query: the verdict names
    the template read from the caches, and the one request is the record's PATCH."""
    read = Read(project_template(template(address="http://elsewhere:9090")))
    next_look, api, _ = await step(read)
    assert read.asked == [(REF, NS)]
    assert next_look is None and [m for m, _, _ in api.requests] == ["PATCH"]
    [record] = recorded(api)
    assert record is not None and record.phase is AnalysisPhase.ERROR
    assert record.verdict.startswith(
        f"refused: AnalysisTemplate {NS}/web-health: metric error-ratio"
    )
