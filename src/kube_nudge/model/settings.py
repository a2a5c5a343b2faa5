"""A workload's and a source's settings, parsed from their annotations by the declarations
of the annotation table (`model.annotations`): `parse_workload`, `parse_source`, whether a
workload may consume a source of another namespace (`cross_namespace_allowed`), and the
errors of a workload that meant to opt in and mistyped it (`mistyped_opt_in`). With
--compat, Reloader's and Wave's annotations are read beside kube-nudge's (`model.compat`).

Parsing never raises. Each invalid annotation yields one message naming the
annotation and the (truncated) bad value, and its field falls back to the default,
so one mistake never hides another. Values are stripped of surrounding whitespace.
All annotations are parsed even when the workload is not opted in. Equal settings share
one instance (`model.sharing`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube_nudge.model import compat
from kube_nudge.model.annotation_values import SHARE_ALL
from kube_nudge.model.annotations import (
    ENABLED,
    IGNORE,
    ON_FAILURE,
    ON_FAILURE_ROLLBACK,
    SECRETS,
    SOURCE_ANNOTATIONS,
    STRATEGY,
    WORKLOAD_ANNOTATIONS,
)
from kube_nudge.model.compat import IGNORE as RELOADER_IGNORE
from kube_nudge.model.compat import MATCH as RELOADER_MATCH
from kube_nudge.model.compat import SOURCE_SWITCHES, WORKLOAD_SWITCHES, translate_workload
from kube_nudge.model.parsing import FALSE_SPELLINGS, TRUE_SPELLINGS, parse_bool, source_ref
from kube_nudge.model.quoting import show
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.shapes import (
    NO_EXTRAS,
    Annotation,
    Extras,
    On,
    ParseContext,
    Parser,
    SourceSettings,
    WorkloadDefaults,
    WorkloadSettings,
)
from kube_nudge.model.sharing import shared

__all__ = ["cross_namespace_allowed", "mistyped_opt_in", "parse_source", "parse_workload"]


_PRODUCT_DEFAULTS = WorkloadDefaults()


def parse_workload(
    annotations: Mapping[str, object] | None,
    namespace: str,
    defaults: WorkloadDefaults = _PRODUCT_DEFAULTS,
) -> tuple[WorkloadSettings, list[str]]:
    """Settings of a workload in `namespace`, and one error message per bad annotation.

    Unset or invalid annotations take their value from `defaults`. With `defaults.compat`,
    the Wave and Reloader opt-in annotations also enable the workload unless
    `kube-nudge.io/enabled` is validly set.
    """
    ann: Mapping[str, object] = annotations if isinstance(annotations, Mapping) else {}
    context = ParseContext(namespace, defaults)
    peers = _Peers.read(ann, namespace) if defaults.compat else _Peers()
    errors: list[str] = []
    values = _parse_declared(ann, WORKLOAD_ANNOTATIONS, context, errors, peers.errors_after)
    if values["enabled"] is None:
        values["enabled"] = peers.workload is not None and peers.workload.enabled
    extra = {*values.pop("configmaps"), *values.pop("secrets"), *peers.named}
    rolling_back = [e.name for e in defaults.extensions if e.rolls_back]
    if values["rollback_on_failure"] and values["strategy"] not in rolling_back:
        errors.append(
            f'{ON_FAILURE} "{ON_FAILURE_ROLLBACK}" needs {STRATEGY}: {" or ".join(rolling_back)} '
            f"(with {values['strategy']!r} the earlier config is gone once the source is "
            "edited); holding on failure instead"
        )
        values["rollback_on_failure"] = False
    workload = peers.workload
    settings = WorkloadSettings(
        extra=tuple(sorted(extra)),
        only_kinds=workload.kinds if workload is not None else None,
        only_named=frozenset(peers.named) if workload is not None and workload.named_only else None,
        only_matched=workload is not None and workload.matched_only,
        extras=_strategy_settings(ann, context, errors),
        **values,
    )
    return shared(settings, _WORKLOAD_SETTINGS), errors


def _strategy_settings(
    ann: Mapping[str, object], context: ParseContext, errors: list[str]
) -> Extras:
    """What each registered strategy asks of the workload by its own annotations (parsed
    by the same loop, their messages after the model's), by strategy name."""
    items = []
    for extension in context.defaults.extensions:
        declared = [a for a in extension.annotations if a.on is On.WORKLOAD and a.field]
        if extension.settings is None or not declared:
            continue
        values = _parse_declared(ann, declared, context, errors, {})
        items.append((extension.name, shared(extension.settings(**values), _EXTRAS)))
    return shared(Extras(tuple(items)), _EXTRAS) if items else NO_EXTRAS


def _parse_declared(
    ann: Mapping[str, object],
    declared: Iterable[Annotation],
    context: ParseContext,
    errors: list[str],
    errors_after: Mapping[str, list[str]],
) -> dict[str, Any]:
    """Each of `declared` parsed from `ann`, by settings field; the messages of bad ones in
    `errors`, each followed by the --compat messages `errors_after` gives for its name."""
    values: dict[str, Any] = {}
    for annotation in declared:
        parse, default = annotation.parser(context), annotation.default_in(context)
        value = _field(ann, annotation.name, parse, default, errors)
        if isinstance(annotation.field, tuple):
            values.update(zip(annotation.field, value, strict=True))
        else:
            values[annotation.field] = value
        errors.extend(errors_after.get(annotation.name, ()))
    return values


@dataclass(frozen=True, slots=True)
class _Peers:
    """A workload's Reloader and Wave annotations (--compat), read before its own."""

    workload: compat.CompatWorkload | None = None
    named: tuple[SourceRef, ...] = ()
    """The sources Reloader's and Wave's lists name."""
    errors_after: Mapping[str, list[str]] = field(default_factory=dict)
    """Messages to report after those of the kube-nudge annotation named by the key."""

    @classmethod
    def read(cls, ann: Mapping[str, object], namespace: str) -> _Peers:
        """The peers' annotations of a workload in `namespace`."""
        switch_errors: list[str] = []
        switches = {name: _field(ann, name, parse_bool, False, switch_errors)
                    for name in WORKLOAD_SWITCHES if name in ann}  # fmt: skip
        workload = translate_workload(ann, switches)
        list_errors: list[str] = []
        named = _peer_sources(workload.configmaps, SourceKind.CONFIGMAP, namespace, list_errors)
        named += _peer_sources(workload.secrets, SourceKind.SECRET, namespace, list_errors)
        list_errors.extend(workload.errors)
        return cls(workload, tuple(named), {ENABLED: switch_errors, SECRETS: list_errors})


def _peer_sources(
    items: tuple[str, ...], kind: SourceKind, namespace: str, errors: list[str]
) -> list[SourceRef]:
    refs = []
    for item in items:
        ref = source_ref(kind, item, namespace)
        if ref is None:
            errors.append(f"--compat: invalid {kind} name {show(item)} in a Reloader/Wave list")
        else:
            refs.append(ref)
    return refs


_SOURCE_SETTINGS: dict[SourceSettings, SourceSettings] = {}
_WORKLOAD_SETTINGS: dict[WorkloadSettings, WorkloadSettings] = {}
_EXTRAS: dict[Any, Any] = {}


def parse_source(
    annotations: Mapping[str, str] | None, *, compat: bool = False
) -> tuple[SourceSettings, list[str]]:
    """Settings of a ConfigMap or Secret, and one error message per bad annotation. With
    `compat`, Reloader's ignore annotation also ignores it, and its match annotation is read."""
    ann: Mapping[str, object] = annotations if isinstance(annotations, Mapping) else {}
    switch_errors: list[str] = []
    switches = {name: _field(ann, name, parse_bool, False, switch_errors)
                for name in SOURCE_SWITCHES if compat and name in ann}  # fmt: skip
    errors: list[str] = []
    context = ParseContext("", _PRODUCT_DEFAULTS)
    values = _parse_declared(ann, SOURCE_ANNOTATIONS, context, errors, {IGNORE: switch_errors})
    if values["ignore"] is None:
        values["ignore"] = compat and switches.get(RELOADER_IGNORE, False)
    settings = SourceSettings(matched=compat and switches.get(RELOADER_MATCH, False), **values)
    return shared(settings, _SOURCE_SETTINGS), errors


def cross_namespace_allowed(
    workload_namespace: str, source_namespace: str, settings: SourceSettings
) -> bool:
    """Whether a workload in `workload_namespace` may consume a source it names by annotation."""
    return (
        workload_namespace == source_namespace
        or SHARE_ALL in settings.share_with
        or workload_namespace in settings.share_with
    )


def mistyped_opt_in(
    annotations: Mapping[str, object] | None,
    namespace: str,
    defaults: WorkloadDefaults = _PRODUCT_DEFAULTS,
) -> list[str]:
    """For a workload that is not opted in: its annotation errors when an opt-in annotation
    is set to something that is not a boolean (`kube-nudge.io/enabled: "yes"`, or with
    --compat `reloader.stakater.com/auto: "on"`), else none. Such a workload is left alone
    like any other that did not opt in, but its owner meant to opt in and must be told."""
    ann: Mapping[str, object] = annotations if isinstance(annotations, Mapping) else {}
    names = (ENABLED, *WORKLOAD_SWITCHES) if defaults.compat else (ENABLED,)
    for name in names:
        value = ann.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or value.strip() not in TRUE_SPELLINGS + FALSE_SPELLINGS:
            return parse_workload(ann, namespace, defaults)[1]
    return []


def _field(
    ann: Mapping[str, object], name: str, parse: Parser, default: Any, errors: list[str]
) -> Any:
    value = ann.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        errors.append(f"{name} must be a string")
        return default
    try:
        return parse(name, value.strip())
    except ValueError as exc:
        errors.append(str(exc))
        return default
