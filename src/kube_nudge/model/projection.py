"""Projections: the small, immutable views the caches keep instead of API objects.

A ConfigMap or Secret becomes per-key digests plus its kube-nudge settings (never its
payload); an opted-in workload becomes what it consumes plus what kube-nudge recorded on
it. Objects that project to None (workloads that did not opt in) are not kept at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kube_nudge.model.annotations import (
    BASELINE_HASH,
    CONFIG_HASH,
    KEY_ID,
    ROLLED_AT,
    SourceSettings,
    WorkloadDefaults,
    WorkloadSettings,
    parse_rolled_at,
    parse_source,
    parse_workload,
)
from kube_nudge.model.hashing import SourceState, source_state
from kube_nudge.model.podtemplate import TemplatePath, get_pod_spec, template_annotation
from kube_nudge.model.references import Consumption, SourceRef, consume_all, discover, merge
from kube_nudge.model.visibility import without_excluded

__all__ = ["SourceView", "WorkloadView", "project_source", "project_workload"]


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

    @property
    def applied_hash(self) -> str | None:
        """The hash of the config the pods run: an adopted baseline, else the template's.
        (A baseline is recorded only when the template has no usable hash: at first sight,
        or after a key change; the next rollout removes it.)"""
        return self.baseline_hash or self.template_hash

    def same_but_records(self, other: WorkloadView) -> bool:
        """True if nothing but what kube-nudge records (hashes, rollout times) differs:
        a watch event of our own write, with nothing to reconcile."""
        return (
            self.namespace, self.uid, self.template_path, self.settings, self.errors,
            self.consumed, self.has_template,
        ) == (
            other.namespace, other.uid, other.template_path, other.settings, other.errors,
            other.consumed, other.has_template,
        )  # fmt: skip


def project_workload(
    obj: Mapping[str, Any], template_path: TemplatePath, defaults: WorkloadDefaults
) -> WorkloadView | None:
    """Reduce a workload to a view, or None when it has not opted in."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    namespace = str(metadata.get("namespace") or "")
    settings, errors = parse_workload(annotations, namespace, defaults)
    if not settings.enabled:
        return None
    pod_spec = get_pod_spec(obj, template_path)
    consumed = discover(pod_spec, namespace) if pod_spec is not None else {}
    consumed = merge(consumed, consume_all(settings.extra, "annotation"))
    baseline = annotations.get(BASELINE_HASH)
    return WorkloadView(
        namespace=namespace,
        uid=str(metadata.get("uid") or ""),
        template_path=template_path,
        settings=settings,
        errors=tuple(errors),
        consumed=MappingProxyType(without_excluded(consumed, settings.exclude)),
        has_template=pod_spec is not None,
        template_hash=template_annotation(obj, template_path, CONFIG_HASH),
        baseline_hash=baseline if isinstance(baseline, str) else None,
        rolled_at=parse_rolled_at(annotations.get(ROLLED_AT)),
        key_id=key if isinstance(key := annotations.get(KEY_ID), str) else None,
    )
