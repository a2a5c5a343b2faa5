"""Test doubles and builders shared by unit tests: a fake clock, Event sinks that keep what
they are given, and one Deployment consuming ConfigMap ``app`` (as the model projects them)
with the installation key."""

from __future__ import annotations

from typing import cast

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
    env = [{"name": key, "valueFrom": {"configMapKeyRef": {"name": "app", "key": key}}}]
    spec: dict[str, object] = {}
    if template:
        spec["template"] = {
            "metadata": {"annotations": pod_annotations},
            "spec": {"containers": [{"name": "c", "env": env}]},
        }
    obj = {"metadata": {"namespace": NS, "uid": "u1", "annotations": annotations}, "spec": spec}
    view = project_workload(obj, PATH, defaults)
    assert view is not None
    return view


def configmap(changed: str | None = None, **data: str) -> SourceView:
    """ConfigMap ``app`` with ``data``, its data last written at ``changed`` (RFC 3339)."""
    metadata: dict[str, object] = {"name": "app", "namespace": NS}
    if changed:
        metadata["managedFields"] = [{"time": changed, "fieldsV1": {"f:data": {}}}]
    return project_source({"metadata": metadata, "data": data})


def sources(**data: str) -> dict[SourceRef, SourceView]:
    """The source cache: ConfigMap ``app`` with ``data``, or nothing without data."""
    return {APP: configmap(**data)} if data else {}


def desired(view: WorkloadView, data: dict[SourceRef, SourceView]) -> str:
    """The hash ``view`` should run with ``data`` as its sources, under ``KEY``."""
    return assess(view, data.get, KEY).desired
