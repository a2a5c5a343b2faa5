"""Which of the sources a workload consumes count for it: the one place that applies
`kube-nudge.io/exclude`, `kube-nudge.io/ignore` and cross-namespace `kube-nudge.io/share-with`.

The reconciler (reading its caches), the desired-hash oracle (reading the API) and any
status report call these same functions, so they can never disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from kube_nudge.model.references import Consumption, SourceRef
from kube_nudge.model.settings import cross_namespace_allowed
from kube_nudge.model.shapes import SourceSettings, WorkloadSettings

__all__ = ["SettingsLookup", "Visibility", "counted", "visible_sources", "without_excluded"]

SettingsLookup = Callable[[SourceRef], SourceSettings | None]
"""The settings of a source, or None when it does not exist (or is not watched)."""


@dataclass(frozen=True, slots=True)
class Visibility:
    """The consumed sources that count, and those refused for not being shared."""

    visible: Mapping[SourceRef, Consumption]
    refused: tuple[SourceRef, ...]


def without_excluded(
    consumed: Mapping[SourceRef, Consumption], exclude: Collection[SourceRef]
) -> dict[SourceRef, Consumption]:
    """`consumed` minus the sources the workload excludes by annotation."""
    return {ref: use for ref, use in consumed.items() if ref not in exclude}


def counted(
    consumed: Mapping[SourceRef, Consumption], settings: WorkloadSettings
) -> dict[SourceRef, Consumption]:
    """The consumed sources the workload's own settings let count: exclusions, and with
    --compat Reloader's per-type auto and named reload lists."""
    return {
        ref: use
        for ref, use in without_excluded(consumed, settings.exclude).items()
        if (settings.only_kinds is None or ref.kind in settings.only_kinds)
        and (settings.only_named is None or ref in settings.only_named)
    }


def visible_sources(
    consumed: Mapping[SourceRef, Consumption],
    namespace: str,
    exclude: Collection[SourceRef],
    settings_of: SettingsLookup,
    *,
    only_matched: bool = False,
) -> Visibility:
    """Apply exclusions, ignored sources and cross-namespace grants for a workload in
    `namespace` (and with `only_matched`, Reloader's search/match under --compat). A source
    of another namespace that doesn't exist is refused exactly like one that isn't shared,
    so a refusal never reveals whether it exists."""
    visible: dict[SourceRef, Consumption] = {}
    refused: list[SourceRef] = []
    for ref, use in without_excluded(consumed, exclude).items():
        settings = settings_of(ref)
        if ref.namespace != namespace and (
            settings is None or not cross_namespace_allowed(namespace, ref.namespace, settings)
        ):
            refused.append(ref)
        elif only_matched and (settings is None or not settings.matched):
            continue  # search: only sources annotated with Reloader's match count
        elif settings is None or not settings.ignore:
            visible[ref] = use
    return Visibility(visible, tuple(sorted(refused)))
