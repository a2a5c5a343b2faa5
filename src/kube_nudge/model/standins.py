"""Stand-ins: objects a pod template names in place of the ConfigMaps and Secrets it
consumes, and the template annotation that records which stands for which source (written
by the strategy that makes them, which names it in its ``StrategyModel.stand_ins``). Every
strategy must see through them, whichever a workload uses now: what a workload consumes are
the sources they stand for, and a rollout by another strategy names the sources again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kube_nudge.model.podtemplate import TemplatePath
from kube_nudge.model.references import Consumption, SourceKind, SourceRef, discover, merge
from kube_nudge.model.source_kinds import is_source_kind

__all__ = [
    "StandInMap",
    "format_stand_ins",
    "parse_stand_ins",
    "pod_spec_patch",
    "referenced_sources",
    "restore_sources",
]

_POD_SPEC_LISTS = ("volumes", "containers", "initContainers", "ephemeralContainers")

StandInMap = Mapping[tuple[SourceKind, str], str]
"""(kind, stand-in name) -> source name."""


def parse_stand_ins(text: object) -> dict[tuple[SourceKind, str], str]:
    """The template's stand-in-to-source mapping; anything unreadable is left out."""
    if not isinstance(text, str):
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    found: dict[tuple[SourceKind, str], str] = {}
    if isinstance(raw, dict):
        for stand_in, source in raw.items():
            kind_text, _, name = str(stand_in).partition("/")
            if is_source_kind(kind_text) and name and isinstance(source, str):
                found[(SourceKind(kind_text), name)] = source
    return found


def format_stand_ins(mapping: StandInMap) -> str:
    """The annotation value for `mapping` (sorted, compact)."""
    return json.dumps(
        {f"{kind.value}/{name}": source for (kind, name), source in sorted(mapping.items())},
        separators=(",", ":"),
    )


def restore_sources(
    consumed: Mapping[SourceRef, Consumption], mapping: StandInMap
) -> dict[SourceRef, Consumption]:
    """`consumed` with every stand-in replaced by the source it stands for."""
    restored: dict[SourceRef, Consumption] = {}
    for ref, use in consumed.items():
        source = mapping.get((ref.kind, ref.name))
        original = ref if source is None else SourceRef(ref.kind, ref.namespace, source)
        restored = merge(restored, {original: use})
    return restored


def referenced_sources(
    pod_spec: Mapping[str, Any], mapping: StandInMap, namespace: str
) -> set[SourceRef]:
    """The sources a pod spec references, through stand-ins or directly."""
    return set(restore_sources(discover(pod_spec, namespace), mapping))


def pod_spec_patch(
    path: TemplatePath,
    old_spec: Mapping[str, Any],
    new_spec: Mapping[str, Any],
    template_annotations: Mapping[str, str | None],
) -> dict[str, Any]:
    """A merge patch setting the template's annotations and every reference list of the
    pod spec that differs (a merge patch replaces a list whole: send it with the
    workload's resourceVersion, so it never overwrites an edit made since it was read)."""
    template: dict[str, Any] = {"metadata": {"annotations": dict(template_annotations)}}
    changed = {f: new_spec.get(f) for f in _POD_SPEC_LISTS if new_spec.get(f) != old_spec.get(f)}
    if changed:
        template["spec"] = changed
    patch: dict[str, Any] = template
    for segment in reversed(path):
        patch = {segment: patch}
    return patch
