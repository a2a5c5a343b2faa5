"""Projections: the small, immutable views the caches keep instead of API objects.

A ConfigMap or Secret becomes per-key digests plus its kube-nudge settings (never its
payload); an opted-in workload becomes what it consumes plus what kube-nudge recorded on
it. Objects that project to None (workloads that did not opt in) are not kept at all.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from kube_nudge.model.analysis import AnalysisRecord, parse_record
from kube_nudge.model.annotations import (
    ANALYSIS_RUN,
    APPROVED_AT,
    BASELINE_HASH,
    CONFIG_HASH,
    FAILED,
    KEY_ID,
    RELEASED_AT,
    ROLLED_AT,
)
from kube_nudge.model.hashing import SourceState, source_state
from kube_nudge.model.podtemplate import TemplatePath, get_pod_spec, template_annotation
from kube_nudge.model.progress import Progress, progress_of
from kube_nudge.model.records import parse_failed, parse_rolled_at
from kube_nudge.model.references import (
    Consumption,
    SourceKind,
    SourceRef,
    consume_all,
    discover,
    merge,
)
from kube_nudge.model.runners import template_elsewhere
from kube_nudge.model.settings import parse_source, parse_workload
from kube_nudge.model.shapes import (
    NO_EXTRAS,
    Extras,
    SourceSettings,
    StrategyShape,
    WorkloadDefaults,
    WorkloadSettings,
)
from kube_nudge.model.sharing import shared
from kube_nudge.model.source_kinds import kind_enabled
from kube_nudge.model.standins import parse_stand_ins, restore_sources
from kube_nudge.model.visibility import counted

__all__ = [
    "SourceView",
    "WorkloadView",
    "data_changed_at",
    "data_write",
    "parse_timestamp",
    "pod_selector",
    "project_source",
    "project_workload",
    "resource_version",
]


@dataclass(frozen=True, slots=True)
class SourceView:
    """What the controller keeps of one ConfigMap or Secret."""

    state: SourceState
    settings: SourceSettings
    errors: tuple[str, ...]
    uid: str = ""  # kept only when there are errors to report on the object
    data_changed_at: float | None = None
    """When its data last changed (Unix seconds, from managedFields), if known."""
    resource_version: int = 0
    """Named in Events, so a rollout can be traced to the exact object version (an int:
    a few bytes less per cached source than the string)."""
    writers: tuple[str, ...] = ()
    """The field managers of its latest data write (several when they share its second):
    their pace sets the quiet window of the change (model/pacing.py)."""


_DATA_FIELDS = ("f:data", "f:binaryData", "f:stringData")


def project_source(obj: Mapping[str, Any], *, compat: bool = False) -> SourceView:
    """Digest a ConfigMap/Secret object; the payload is not referenced afterwards."""
    metadata = obj.get("metadata") or {}
    settings, errors = parse_source(metadata.get("annotations"), compat=compat)
    uid = str(metadata.get("uid") or "") if errors else ""
    changed_at, writers = data_write(metadata)
    return SourceView(
        source_state(obj), settings, tuple(errors), uid, changed_at,
        resource_version(metadata), writers,
    )  # fmt: skip


def data_changed_at(metadata: Mapping[str, Any]) -> float | None:
    """The latest time a field manager changed the data of a ConfigMap/Secret: the API
    server updates an entry's ``time`` whenever that manager changes a field it owns.
    Falls back to the creation time; None when neither can be read."""
    return data_write(metadata)[0]


def data_write(
    metadata: Mapping[str, Any], data_fields: tuple[str, ...] = _DATA_FIELDS
) -> tuple[float | None, tuple[str, ...]]:
    """``data_changed_at`` and the managers of that latest data write (interned: a handful
    of tools write every object). ``data_fields``: the top-level fields that hold the data
    (``f:status`` for a Secrets Store CSI pod status)."""
    latest: float | None = None
    writers: list[str] = []
    for entry in metadata.get("managedFields") or ():
        fields = entry.get("fieldsV1") if isinstance(entry, Mapping) else None
        if isinstance(fields, Mapping) and any(name in fields for name in data_fields):
            stamp = parse_timestamp(entry.get("time"))
            manager = entry.get("manager")
            if stamp is None:
                continue
            if latest is None or stamp > latest:
                latest, writers = stamp, []
            if stamp == latest and isinstance(manager, str) and manager:
                writers.append(sys.intern(manager[:128]))
    if latest is None:
        return parse_timestamp(metadata.get("creationTimestamp")), ()
    # One tuple per set of writers for all sources (memory: ~50 bytes per source).
    return latest, shared(tuple(sorted(set(writers))), _WRITERS)


_WRITERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def parse_timestamp(value: object) -> float | None:
    """An RFC 3339 timestamp of the API (``2026-11-23T00:28:48Z``) as Unix seconds."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """What the controller keeps of one opted-in workload."""

    namespace: str
    uid: str
    template_path: TemplatePath
    settings: WorkloadSettings
    errors: tuple[str, ...]
    consumed: Mapping[SourceRef, Consumption]
    """Every source the pod template or annotations consume, exclusions applied."""
    has_template: bool
    template_hash: str | None
    baseline_hash: str | None
    rolled_at: tuple[float, ...] = ()
    key_id: str | None = None
    """The key the recorded hashes were made under; None if not recorded (older releases)."""
    pod_selector: str | None = None
    """The label selector of its pods (from ``spec.selector``), if it has one."""
    released_at: float = 0.0
    """`kube-nudge.io/released-at`: the flap cap ignores rollouts before it."""
    rolled_to: str | None = None
    """With a strategy that uses stand-ins: the hash kube-nudge last rolled it to (its
    `StrategyModel.rolled_to` annotation)."""
    stand_ins: frozenset[tuple[SourceKind, str]] = frozenset()
    """(kind, name) of the stand-ins its template references instead of sources
    (`model.standins`), whichever strategy it uses now."""
    direct_sources: frozenset[SourceRef] = frozenset()
    """With a strategy that uses stand-ins: sources its template names directly."""
    progress: Progress | None = None
    """Its own controller's rollout progress; None if kube-nudge can't follow its kind."""
    failed: tuple[str, float] | None = None
    """`kube-nudge.io/failed`: (config hash, when) of the last rollout that failed."""
    approved_at: float = 0.0
    """`kube-nudge.io/approved-at`: changes of the data before it are approved."""
    extras: Extras = NO_EXTRAS
    """What the registered strategies keep of its metadata annotations, by strategy name
    (`StrategyModel.view`; each reads its own with an accessor of its package)."""
    template_elsewhere: str | None = None
    """Where its pod template lives when it has none of its own: ``Deployment/web`` for an
    Argo Rollout with ``spec.workloadRef`` (``model.runners``)."""
    generation: int = field(default=0, compare=False)
    """Its ``metadata.generation``: whether a workload running its template has seen the
    latest (``model.runners``). Not compared by ``same_but_records``: kube-nudge's own
    writes move it."""
    analysis_run: AnalysisRecord | None = None
    """`kube-nudge.io/analysis-run` of a workload with `kube-nudge.io/analysis`: its
    latest analysis (``model.analysis``)."""
    resource_version: int = field(default=0, compare=False)
    """Its ``metadata.resourceVersion`` as an integer (0 if not one): whether the cache has
    caught up with kube-nudge's own last write of it (``runtime.expectations``). Not
    compared: every write moves it."""

    @property
    def applied_hash(self) -> str | None:
        """The hash of the config kube-nudge last brought the pods to: an adopted baseline,
        else (a strategy using stand-ins) the hash it last rolled to, else the template's. (A
        baseline is recorded only when the template has no usable hash: at first sight, or
        after a key change; the next rollout removes it. A template naming stand-ins can
        differ from `rolled_to` after an undo, which is not kube-nudge's to reverse.)"""
        return self.baseline_hash or self.rolled_to or self.template_hash

    @property
    def rolled_back(self) -> bool:
        """The template was reverted to an earlier config (stand-ins brought back by an undo)."""
        return self.rolled_to is not None and self.template_hash not in (None, self.rolled_to)

    def same_but_records(self, other: WorkloadView) -> bool:
        """True if nothing but what kube-nudge records (hashes, rollout times) differs:
        a watch event of our own write, with nothing to reconcile."""
        return (
            self.namespace, self.uid, self.template_path, self.settings, self.errors,
            self.consumed, self.has_template, self.released_at, self.progress,
            self.approved_at, self.template_elsewhere,
        ) == (
            other.namespace, other.uid, other.template_path, other.settings, other.errors,
            other.consumed, other.has_template, other.released_at, other.progress,
            other.approved_at, other.template_elsewhere,
        )  # fmt: skip


# Shared by every cached workload instead of one each: an empty frozenset is 216 bytes, and
# most workloads consume their sources the same way (`Consumption` holds up to three
# frozensets of key names). In the memory scenario's shape: 2,633 to 1,311 bytes a view.
_NONE: frozenset[Any] = frozenset()
_CONSUMPTIONS: dict[Consumption, Consumption] = {}


def project_workload(
    obj: Mapping[str, Any],
    template_path: TemplatePath,
    defaults: WorkloadDefaults,
    *,
    opted_out_too: bool = False,
    kind: str = "",
) -> WorkloadView | None:
    """Reduce a workload to a view, or None when it has not opted in (unless
    `opted_out_too`: audits look at every workload; `settings.enabled` then tells).
    `kind`, its group-kind (``Deployment.apps`` ...), tells how to read its rollout
    progress."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    namespace = sys.intern(str(metadata.get("namespace") or ""))  # shared with the cache's key
    settings, errors = parse_workload(annotations, namespace, defaults)
    if not settings.enabled and not opted_out_too:
        return None
    pod_spec = get_pod_spec(obj, template_path)
    consumed = discover(pod_spec, namespace) if pod_spec is not None else {}
    # A kind its flag leaves off (a CSI class without --csi-secrets) is consumed by no one.
    consumed = {r: u for r, u in consumed.items() if kind_enabled(r.kind, defaults)}
    # A template may name stand-ins: what it consumes are the sources they stand for.
    stand_ins = _stand_ins(obj, template_path, defaults)
    direct: frozenset[SourceRef] = _NONE
    own = _stand_in_strategy(settings.strategy, defaults)
    if own is not None:
        direct = frozenset(ref for ref in consumed if (ref.kind, ref.name) not in stand_ins)
    consumed = restore_sources(consumed, stand_ins) if stand_ins else consumed
    consumed = merge(consumed, consume_all(settings.extra, "annotation"))
    rolled_to = annotations.get(own.rolled_to) if own is not None and own.rolled_to else None
    baseline = annotations.get(BASELINE_HASH)
    return WorkloadView(
        namespace=namespace,
        uid=str(metadata.get("uid") or ""),
        template_path=template_path,
        settings=settings,
        errors=tuple(errors),
        consumed=MappingProxyType(
            {ref: shared(use, _CONSUMPTIONS) for ref, use in counted(consumed, settings).items()}
        ),
        has_template=pod_spec is not None,
        template_hash=template_annotation(obj, template_path, CONFIG_HASH),
        baseline_hash=baseline if isinstance(baseline, str) else None,
        rolled_at=parse_rolled_at(annotations.get(ROLLED_AT)),
        key_id=key if isinstance(key := annotations.get(KEY_ID), str) else None,
        pod_selector=pod_selector(obj),
        released_at=max(parse_rolled_at(annotations.get(RELEASED_AT)), default=0.0),
        rolled_to=rolled_to if isinstance(rolled_to, str) else None,
        stand_ins=frozenset(stand_ins) if stand_ins else _NONE,
        direct_sources=direct,
        progress=progress_of(kind, obj),
        failed=parse_failed(annotations.get(FAILED)),
        approved_at=max(parse_rolled_at(annotations.get(APPROVED_AT)), default=0.0),
        extras=_view_extras(annotations, settings, pod_spec, defaults),
        template_elsewhere=template_elsewhere(kind, obj) if pod_spec is None else None,
        generation=_generation(metadata),
        analysis_run=parse_record(annotations.get(ANALYSIS_RUN)) if settings.analysis else None,
        resource_version=resource_version(metadata),
    )


def resource_version(metadata: Mapping[str, Any]) -> int:
    """An object's ``metadata.resourceVersion`` as an integer; 0 when absent or not one."""
    version = str(metadata.get("resourceVersion") or "")
    return int(version) if version.isdigit() else 0


def _generation(metadata: Mapping[str, Any]) -> int:
    generation = metadata.get("generation")
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else 0


def _stand_ins(
    obj: Mapping[str, Any], template_path: TemplatePath, defaults: WorkloadDefaults
) -> dict[tuple[SourceKind, str], str]:
    """The stand-in-to-source mapping the template records, as the first strategy that
    names stand-ins and finds its annotation on it reads it; none without one."""
    for extension in defaults.extensions:
        if extension.stand_ins and (
            found := parse_stand_ins(template_annotation(obj, template_path, extension.stand_ins))
        ):
            return found
    return {}


def _stand_in_strategy(strategy: str, defaults: WorkloadDefaults) -> StrategyShape | None:
    """The strategy called `strategy` if it points templates at stand-ins, else None."""
    for extension in defaults.extensions:
        if extension.name == strategy and extension.stand_ins:
            return extension
    return None


def _view_extras(
    annotations: Mapping[str, Any],
    settings: WorkloadSettings,
    pod_spec: Mapping[str, Any] | None,
    defaults: WorkloadDefaults,
) -> Extras:
    """What each registered strategy keeps of a workload's metadata annotations and pod
    spec."""
    items = []
    for extension in defaults.extensions:
        kept = extension.view(annotations, settings, pod_spec) if extension.view else None
        if kept:
            items.append((extension.name, kept))
    return Extras(tuple(items)) if items else NO_EXTRAS


def pod_selector(obj: Mapping[str, Any]) -> str | None:
    """``spec.selector`` as a label-selector string, or None if absent or unreadable."""
    spec = obj.get("spec")
    selector = spec.get("selector") if isinstance(spec, Mapping) else None
    if not isinstance(selector, Mapping):
        return None
    parts = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression.get("key"), expression.get("operator")
        values = ",".join(str(v) for v in expression.get("values") or ())
        text = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": f"{key}",
            "DoesNotExist": f"!{key}",
        }.get(str(operator))
        if text is None or not isinstance(key, str):
            return None
        parts.append(text)
    return ",".join(parts) or None
