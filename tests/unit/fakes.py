"""Test doubles and builders shared by unit tests: a fake clock, the one fake API client,
the caches as views in dicts, Event sinks that keep what they are given, and one Deployment
consuming ConfigMap ``app`` (as the model projects them) with the installation key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from kube_nudge.controller.reader import Inputs, WorkloadKey
from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.events import EventRecorder, ObjectRef
from kube_nudge.model import (
    BASELINE_HASH,
    CONFIG_HASH,
    ROLLED_AT,
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadDefaults,
    WorkloadView,
    assess,
    project_source,
    project_workload,
)
from kube_nudge.model.annotations import KEY_ID
from kube_nudge.model.records import format_rolled_at
from kube_nudge.model.tracking import failure_recorded
from kube_nudge_dev import manifests


class FakeClock:
    """A clock that moves only when told to (both wall and monotonic time)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def monotonic(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


class FakeApi:
    """Stands in for ``KubeClient`` (``as_client``): answers from what a test puts in, raises
    where it says, and records every call. A list returns ``lists`` of the collection's
    resource in one page; a GET, ``objects`` by path (else 404); a write, nothing; a watch
    asking for its initial events gets ``initial_events`` (or ``streaming_error``), and then
    every watch stays open with nothing more to say."""

    def __init__(
        self,
        lists: Mapping[str, list[JSON]] | None = None,
        objects: Mapping[str, JSON] | None = None,
        *,
        version: str = "1",
        namespace: str = "default",
    ) -> None:
        self.lists = dict(lists or {})
        """Each resource's items, by the last segment of its collection's path (``pods``)."""
        self.objects = dict(objects or {})
        """What a GET of each path answers."""
        self.errors: dict[str, ApiError] = {}
        """What a GET of, or any other request to, each path raises."""
        self.initial_events: list[JSON] = []
        self.streaming_error: ApiError | None = None
        self.version = version
        """The resourceVersion lists answer with."""
        self.default_namespace = namespace
        self.listed: list[tuple[str, Mapping[str, str | int] | None]] = []
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.watches: list[tuple[dict[str, Any], str]] = []

    def as_client(self) -> KubeClient:
        """Itself, typed as the client it stands in for."""
        return cast(KubeClient, self)

    async def list_pages(
        self, path: str, params: Mapping[str, str | int] | None = None, *, limit: int = 500
    ) -> AsyncIterator[tuple[list[JSON], str]]:
        self.listed.append((path, params))
        yield [dict(item) for item in self.lists.get(path.rsplit("/", 1)[-1], [])], self.version

    async def get(self, path: str, **params: str | int) -> JSON:
        return await self.request("GET", path, params=params or None)

    async def request(self, method: str, path: str, **options: Any) -> JSON:
        self.requests.append((method, path, options))
        if path in self.errors:
            raise self.errors[path]
        if method != "GET":
            return {}
        if path not in self.objects:
            raise ApiError(404, "NotFound", f"{path} not found")
        return self.objects[path]

    async def watch(
        self, path: str, params: Mapping[str, Any], *, resource_version: str, **_: Any
    ) -> AsyncIterator[JSON]:
        self.watches.append((dict(params), resource_version))
        if params.get("sendInitialEvents") == "true":
            if self.streaming_error is not None:
                raise self.streaming_error
            for event in self.initial_events:
                yield event
        await asyncio.Event().wait()
        yield {}  # pragma: no cover

    async def aclose(self) -> None:
        pass


class CachedViews:
    """Stands in for the controller's caches (a ``Reader``): the workloads and sources a test
    puts in, and which workloads consume a source, as the caches' index has it (from each
    view's ``consumed``)."""

    def __init__(
        self,
        workloads: dict[WorkloadKey, WorkloadView],
        sources: dict[SourceRef, SourceView] | None = None,
    ) -> None:
        self.workloads = workloads
        self.sources = sources if sources is not None else {}

    def source(self, ref: SourceRef) -> SourceView | None:
        return self.sources.get(ref)

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        return self.workloads.get(key)

    def inputs(self, key: WorkloadKey) -> Inputs | None:
        view = self.workloads.get(key)
        return Inputs(view, {r: self.source(r) for r in view.consumed}) if view else None

    def consumers(self, ref: SourceRef) -> list[tuple[WorkloadKey, WorkloadView]]:
        return [(key, view) for key, view in self.workloads.items() if ref in view.consumed]

    def source_keys(self, kind: SourceKind) -> list[tuple[str, str]]:
        return [(ref.namespace, ref.name) for ref in self.sources if ref.kind is kind]

    def workload_keys(self) -> list[WorkloadKey]:
        return list(self.workloads)

    def failed(self, key: WorkloadKey) -> bool:
        view = self.workloads.get(key)
        return view is not None and failure_recorded(view)

    def any_failed(self) -> bool:
        return any(self.failed(key) for key in self.workloads)


class RecordedEvents:
    """Stands in for the API-posting recorder: keeps (reason, message) pairs."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    async def record(
        self, obj: ObjectRef, event_type: str, reason: str, message: str,
        *, at: float | None = None,
    ) -> bool:  # fmt: skip
        self.posted.append((reason, message))
        return True

    def as_recorder(self) -> EventRecorder:
        """Itself, typed as the recorder it stands in for (only ``record`` is called)."""
        return cast(EventRecorder, self)


class PostedEvents:
    """Stands in for the background Events: keeps (uid, type, reason, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def post(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        self.events.append((ref.uid, event_type, reason, message))


KEY = b"k" * 32  # the installation key
NS = "shop"
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
PATH = ("spec", "template")  # a Deployment's pod template
CAP = WorkloadDefaults(max_rollouts=3, rollout_window=6.0)  # a flap cap of 3 per 6 s


def stored(obj: JSON, *, namespace: str = NS, uid: str = "u") -> JSON:
    """``obj`` (from ``kube_nudge_dev.manifests``, the one manifest builder) as the API server
    would answer it: in ``namespace``, with a uid."""
    obj["metadata"].update(namespace=namespace, uid=uid)
    return obj


def workload(
    *,
    key_id: str | None = None,
    adopt: str | None = None,
    released_at: float = 0.0,
    template_hash: str | None = None,
    baseline: str | None = None,
    rolled_at: tuple[float, ...] = (),
    key: str = "LEVEL",
    strategy: str | None = None,
    template: bool = True,
    defaults: WorkloadDefaults = CAP,
) -> WorkloadView:
    """An opted-in Deployment in ``NS`` whose container reads ``key`` of ConfigMap ``app``
    (by env), with what it records as given."""
    annotations = {"kube-nudge.io/enabled": "true"}
    if baseline:
        annotations[BASELINE_HASH] = baseline
    if rolled_at:
        annotations[ROLLED_AT] = format_rolled_at(list(rolled_at))
    if strategy:
        annotations["kube-nudge.io/strategy"] = strategy
    if key_id:
        annotations[KEY_ID] = key_id
    if adopt:
        annotations["kube-nudge.io/adopt"] = adopt
    if released_at:
        annotations["kube-nudge.io/released-at"] = format_rolled_at([released_at])
    pod_annotations = {CONFIG_HASH: template_hash} if template_hash else {}
    obj = manifests.deployment(
        "web", spec=manifests.env_consumer(key), annotations=annotations,
        template_annotations=pod_annotations,
    )  # fmt: skip
    stored(obj, uid="u1")
    if not template:
        del obj["spec"]["template"]
    view = project_workload(obj, PATH, defaults)
    assert view is not None
    return view


def configmap(changed: str | None = None, **data: str) -> SourceView:
    """ConfigMap ``app`` with ``data``, its data last written at ``changed`` (RFC 3339)."""
    obj = stored(manifests.configmap("app", data))
    if changed:
        obj["metadata"]["managedFields"] = [{"time": changed, "fieldsV1": {"f:data": {}}}]
    return project_source(obj)


def sources(**data: str) -> dict[SourceRef, SourceView]:
    """The source cache: ConfigMap ``app`` with ``data``, or nothing without data."""
    return {APP: configmap(**data)} if data else {}


def desired(view: WorkloadView, data: dict[SourceRef, SourceView]) -> str:
    """The hash ``view`` should run with ``data`` as its sources, under ``KEY``."""
    return assess(view, data.get, KEY).desired
