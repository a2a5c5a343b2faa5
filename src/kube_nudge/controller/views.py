"""Projections: the small, immutable views the caches keep instead of API objects.

A ConfigMap or Secret becomes per-key digests plus its kube-nudge settings (never its
payload); an opted-in workload becomes what it consumes plus the hash it currently runs.
Objects that project to None (workloads that did not opt in) are not kept at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kube_nudge.kube.resources import Resource
from kube_nudge.model import (
    CONFIG_HASH,
    Consumption,
    SourceKind,
    SourceRef,
    SourceSettings,
    SourceState,
    TemplatePath,
    WorkloadSettings,
    consume_all,
    discover,
    get_pod_spec,
    merge,
    parse_source,
    parse_workload,
    source_state,
    template_annotation,
)
from kube_nudge.model.annotations import DEBOUNCE, MAX_ROLLOUTS

#: Written on the workload's own metadata when kube-nudge adopts a workload: the hash of
#: the config its pods already run. Adoption never touches the pod template, so opting in
#: (or migrating hundreds of workloads with --compat) restarts nothing.
BASELINE_HASH = "kube-nudge.io/baseline-hash"

#: Written on the workload's metadata with each rollout: when kube-nudge rolled it recently
#: (Unix seconds, oldest first). The flap cap reads it, so a restart or a new leader does
#: not forget how often a flapping config has already rolled the workload.
ROLLED_AT = "kube-nudge.io/rolled-at"
_MAX_ROLLED_AT = 100  # a malformed or hostile annotation costs at most this many numbers


@dataclass(frozen=True, slots=True)
class SourceView:
    """What the controller keeps of one ConfigMap or Secret."""

    state: SourceState
    settings: SourceSettings
    errors: tuple[str, ...]
    uid: str = ""  # kept only when there are errors to report on the object


def project_source(obj: Mapping[str, Any]) -> SourceView:
    """Digest a ConfigMap/Secret object; the payload is not referenced afterwards."""
    metadata = obj.get("metadata") or {}
    settings, errors = parse_source(metadata.get("annotations"))
    uid = str(metadata.get("uid") or "") if errors else ""
    return SourceView(source_state(obj), settings, tuple(errors), uid)


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A workload resource and where its pod template lives."""

    resource: Resource
    template_path: TemplatePath

    def __str__(self) -> str:
        return str(self.resource)


@dataclass(frozen=True, slots=True)
class Defaults:
    """Controller-wide defaults that workload annotations override."""

    debounce: float
    max_rollouts: int
    rollout_window: float
    compat: bool = False


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """What the controller keeps of one opted-in workload."""

    uid: str
    settings: WorkloadSettings
    errors: tuple[str, ...]
    consumed: Mapping[SourceRef, Consumption]
    has_template: bool
    template_hash: str | None
    baseline_hash: str | None
    rolled_at: tuple[float, ...] = ()

    @property
    def applied_hash(self) -> str | None:
        """The hash of the config the pods run: the template's, else the adopted baseline."""
        return self.template_hash or self.baseline_hash


def project_workload(
    obj: Mapping[str, Any], kind: WorkloadKind, defaults: Defaults
) -> WorkloadView | None:
    """Reduce a workload to a view, or None when it has not opted in."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    namespace = str(metadata.get("namespace") or "")
    settings, errors = parse_workload(annotations, namespace, compat=defaults.compat)
    if not settings.enabled:
        return None
    settings = _apply_defaults(settings, annotations, defaults)
    pod_spec = get_pod_spec(obj, kind.template_path)
    consumed = discover(pod_spec, namespace) if pod_spec is not None else {}
    consumed = merge(consumed, consume_all(settings.extra, "annotation"))
    consumed = {ref: use for ref, use in consumed.items() if ref not in settings.exclude}
    baseline = annotations.get(BASELINE_HASH)
    return WorkloadView(
        uid=str(metadata.get("uid") or ""),
        settings=settings,
        errors=tuple(errors),
        consumed=MappingProxyType(consumed),
        has_template=pod_spec is not None,
        template_hash=template_annotation(obj, kind.template_path, CONFIG_HASH),
        baseline_hash=baseline if isinstance(baseline, str) else None,
        rolled_at=parse_rolled_at(annotations.get(ROLLED_AT)),
    )


def parse_rolled_at(value: Any) -> tuple[float, ...]:
    """The timestamps of ``kube-nudge.io/rolled-at``, sorted; anything unreadable is
    skipped (it only ever makes the flap cap more lenient)."""
    if not isinstance(value, str):
        return ()
    stamps = []
    for part in value.split(",", _MAX_ROLLED_AT)[:_MAX_ROLLED_AT]:
        with contextlib.suppress(ValueError):
            stamp = float(part)
            if math.isfinite(stamp) and stamp > 0:
                stamps.append(stamp)
    return tuple(sorted(stamps))


def _apply_defaults(
    settings: WorkloadSettings, annotations: Mapping[str, Any], defaults: Defaults
) -> WorkloadSettings:
    # The model's defaults are the product's; --debounce/--max-rollouts replace them for
    # workloads that don't set their own annotation.
    changes: dict[str, Any] = {}
    if DEBOUNCE not in annotations:
        changes["debounce"] = defaults.debounce
    if MAX_ROLLOUTS not in annotations:
        changes["max_rollouts"] = defaults.max_rollouts
        changes["rollout_window"] = defaults.rollout_window
    return dataclasses.replace(settings, **changes) if changes else settings


def source_kind(resource: Resource) -> SourceKind:
    """configmaps → CONFIGMAP, secrets → SECRET."""
    return SourceKind.CONFIGMAP if resource.plural == "configmaps" else SourceKind.SECRET
