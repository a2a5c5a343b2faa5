"""The annotation contract: every annotation kube-nudge reads or writes, declared once as
data in `ANNOTATIONS` (name, what it goes on, who writes it, parser, default, range, one
line of documentation), and the parsing of a workload's and a source's settings from them.

Adding an annotation a user sets on a workload takes its declaration below (which also
makes its name constant) and the field of `WorkloadSettings` it fills; the annotation table
(`tools/readme_annotations.py`) and `kube-nudge annotations` follow from the declaration.
The shapes (`Annotation`, the settings, `WorkloadDefaults`) are `model.shapes`, a leaf,
re-exported here with what they are parsed from; the formats of kube-nudge's records on a
workload (`rolled-at`, `failed`) are `model.records`.

Parsing never raises. Each invalid annotation yields one message naming the
annotation and the (truncated) bad value, and its field falls back to the default,
so one mistake never hides another. Values are stripped of surrounding whitespace.
All annotations are parsed even when the workload is not opted in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kube_nudge.model import compat
from kube_nudge.model.analysis import TEMPLATE_KINDS, parse_analysis_ref
from kube_nudge.model.compat import IGNORE as RELOADER_IGNORE
from kube_nudge.model.compat import MATCH as RELOADER_MATCH
from kube_nudge.model.compat import SOURCE_SWITCHES, WORKLOAD_SWITCHES, translate_workload
from kube_nudge.model.parsing import (
    FALSE_SPELLINGS,
    TRUE_SPELLINGS,
    Refused,
    duration_between,
    is_dns_label,
    is_dns_subdomain,
    one_of,
    parse_bool,
    parse_duration,
    source_ref,
    split_items,
)
from kube_nudge.model.quoting import show
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.selectors import check_label_selector
from kube_nudge.model.shapes import (
    DEFAULT_DEBOUNCE,
    DEFAULT_MAX_ROLLOUTS,
    DEFAULT_ROLLOUT_WINDOW,
    DEFAULT_STRATEGY,
    DEFAULT_STRATEGY_NAMES,
    NO_EXTRAS,
    STRATEGY_ROLLOUT,
    Annotation,
    By,
    Extras,
    On,
    ParseContext,
    Parser,
    SourceSettings,
    WorkloadDefaults,
    WorkloadSettings,
)
from kube_nudge.model.sharing import shared
from kube_nudge.model.source_kinds import is_source_kind
from kube_nudge.model.windows import parse_window

# The annotation and label names (ENABLED, DEBOUNCE, ...) are module constants too, made by
# their declarations below; `ANNOTATIONS` lists them all.
__all__ = [
    "ANALYSIS",
    "ANALYSIS_RUN",
    "ANNOTATIONS",
    "AUTO_DEBOUNCE",
    "DEFAULT_DEBOUNCE",
    "DEFAULT_MAX_ROLLOUTS",
    "DEFAULT_ROLLOUT_WINDOW",
    "DEFAULT_STRATEGY",
    "DEFAULT_STRATEGY_NAMES",
    "FALSE_SPELLINGS",
    "ON_FAILURE_ROLLBACK",
    "PREFIX",
    "SHARE_ALL",
    "SOURCE_ANNOTATIONS",
    "TRUE_SPELLINGS",
    "WORKLOAD_ANNOTATIONS",
    "Annotation",
    "By",
    "On",
    "Refused",
    "SourceSettings",
    "WorkloadDefaults",
    "WorkloadSettings",
    "cross_namespace_allowed",
    "debounce_seconds",
    "go_duration",
    "is_dns_label",
    "is_dns_subdomain",
    "mistyped_opt_in",
    "parse_bool",
    "parse_debounce",
    "parse_duration",
    "parse_source",
    "parse_workload",
    "rollout_cap",
]

PREFIX: Final = "kube-nudge.io/"

AUTO_DEBOUNCE: Final = "auto"
MAX_DEBOUNCE: Final = 3600.0
MAX_MAX_ROLLOUTS: Final = 1000
MIN_ROLLOUT_WINDOW: Final = 1.0
MAX_ROLLOUT_WINDOW: Final = 86400.0
MIN_PROGRESS_DEADLINE: Final = 1.0
MAX_PROGRESS_DEADLINE: Final = 86400.0
MAX_ROLLOUT_ORDER: Final = 1_000_000
ADOPT_ROLL_STALE: Final = "roll-stale"
ADOPT_NEVER_ROLL: Final = "never-roll"
APPROVAL_REQUIRED: Final = "required"
ON_FAILURE_HOLD: Final = "hold"
ON_FAILURE_ROLLBACK: Final = "rollback"
SHARE_ALL: Final = "*"
COMPAT_WAVE: Final = compat.WAVE_ON  # opt-ins honoured with --compat (see model/compat.py)
COMPAT_RELOADER: Final = compat.AUTO

_NO_REFS: frozenset[SourceRef] = frozenset()
_NO_NAMESPACES: frozenset[str] = frozenset()


# -- Parsers of one annotation each ------------------------------------------------------


def _parse_sources(kind: SourceKind) -> Callable[[ParseContext], Parser]:
    """`kube-nudge.io/configmaps` / `secrets`: names or namespace/names of `kind`."""

    def parser(context: ParseContext) -> Parser:
        def parse(name: str, value: str) -> tuple[SourceRef, ...]:
            refs = []
            for item in split_items(name, value):
                ref = source_ref(kind, item, context.namespace)
                if ref is None:
                    raise ValueError(
                        f"{name} has an invalid item {show(item)}: "
                        "want a name or namespace/name (lowercase DNS-1123)"
                    )
                refs.append(ref)
            return tuple(refs)

        return parse

    return parser


def _parse_exclude(context: ParseContext) -> Parser:
    def parse(name: str, value: str) -> frozenset[SourceRef]:
        refs = set()
        for item in split_items(name, value):
            kind_text, _, rest = item.partition("/")
            ref = None
            if is_source_kind(kind_text):
                ref = source_ref(SourceKind(kind_text), rest, context.namespace)
            if ref is None:
                raise ValueError(
                    f"{name} has an invalid item {show(item)}: want configmap/name, "
                    "secret/name, configmap/namespace/name or secret/namespace/name"
                )
            refs.add(ref)
        return frozenset(refs)

    return parse


def debounce_seconds(value: str) -> float | None:
    """The debounce rule the annotation and ``--debounce`` share: ``auto`` (None) or a
    duration from 0 to 1h. Refused: part "duration" (not one; the reason says why) or
    "range"."""
    if value == AUTO_DEBOUNCE:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise Refused("duration", str(exc)) from None
    if not 0 <= seconds <= MAX_DEBOUNCE:
        raise Refused("range")
    return seconds


def parse_debounce(name: str, value: str) -> float | None:
    """The annotation's parser of `debounce_seconds` (its value comes stripped)."""
    try:
        return debounce_seconds(value)
    except Refused:
        raise ValueError(
            f'{name} must be "auto" or a duration between 0s and 1h such as "500ms" or "2s", '
            f"got {show(value)}"
        ) from None


def rollout_cap(value: str) -> tuple[int, float]:
    """The flap cap's rule the annotation and ``--max-rollouts`` share: ``N/window`` (e.g.
    ``3/5m``) → (N, seconds), N from 1 to 1000 and a window from 1s to 24h. Refused, by
    part: "form" (not ASCII digits, "/" and the rest), "count" (N out of range), "window"
    (no duration; the reason says why), "window range"."""
    count, sep, window = value.partition("/")
    if not sep or not count.isascii() or not count.isdigit():
        raise Refused("form")
    # Leading zeros are allowed (as the chart's schema allows them); the length bound keeps
    # int() cheap on a hostile value.
    significant = count.lstrip("0") or "0"
    too_long = len(significant) > len(str(MAX_MAX_ROLLOUTS))
    if too_long or not 1 <= int(significant) <= MAX_MAX_ROLLOUTS:
        raise Refused("count")
    try:
        seconds = parse_duration(window)
    except ValueError as exc:
        raise Refused("window", str(exc)) from None
    if not MIN_ROLLOUT_WINDOW <= seconds <= MAX_ROLLOUT_WINDOW:
        raise Refused("window range")
    return int(significant), seconds


def _parse_max_rollouts(name: str, value: str) -> tuple[int, float]:
    try:
        return rollout_cap(value)
    except Refused:
        raise ValueError(
            f'{name} must be "N/window" with N from 1 to {MAX_MAX_ROLLOUTS} and a window '
            f'between 1s and 24h such as "3/5m", got {show(value)}'
        ) from None


def _parse_strategy(context: ParseContext) -> Parser:
    strategies = context.defaults.strategies

    def parse(name: str, value: str) -> str:
        if value not in strategies:
            supported = ", ".join(f'"{s}"' for s in strategies)
            raise ValueError(f"{name} must be one of {supported}, got {show(value)}")
        return value

    return parse


def _parse_order(name: str, value: str) -> int:
    if not value.isdigit() or int(value) > MAX_ROLLOUT_ORDER:
        raise ValueError(
            f'{name} must be a whole number from 0 to {MAX_ROLLOUT_ORDER} such as "1" '
            f"(lower orders roll first), got {show(value)}"
        )
    return int(value)


def _parse_share_with(name: str, value: str) -> frozenset[str]:
    items = split_items(name, value)
    for item in items:
        if item != SHARE_ALL and not is_dns_label(item):
            raise ValueError(
                f'{name} has an invalid item {show(item)}: want a namespace name or "*"'
            )
    return frozenset(items)


def go_duration(seconds: float) -> str:
    """`seconds` as the shortest Go duration of whole hours, minutes or seconds."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


_go = go_duration


# -- The contract: every annotation, declared once (the annotation table has this order; a
# workload's error messages come in it)

_DECLARED: list[Annotation] = []


def _declare(annotation: Annotation) -> str:
    """Add `annotation` to the contract; its name (for the module constant)."""
    _DECLARED.append(annotation)
    return annotation.name


_BOOLEAN: Final = "true or false"

# A table: one declaration a paragraph, its fields as dense as the table row they make.
# fmt: off

# Set by users on the workload.
ENABLED: Final = _declare(Annotation(
    PREFIX + "enabled", On.WORKLOAD, By.USER,
    "opt in; every ConfigMap/Secret the pod template uses is discovered",
    values=_BOOLEAN, shown_default="false", field="enabled", parse=parse_bool,
))
CONFIGMAPS: Final = _declare(Annotation(
    PREFIX + "configmaps", On.WORKLOAD, By.USER,
    "also consume these ConfigMaps (all keys), e.g. for apps reading them through the API",
    values="names, comma-separated; ns/name for another namespace (see share-with)",
    shown_default="none", field="configmaps",
    parse_in=_parse_sources(SourceKind.CONFIGMAP), default=(),
))
SECRETS: Final = _declare(Annotation(
    PREFIX + "secrets", On.WORKLOAD, By.USER, "the same for Secrets",
    values="names, comma-separated; ns/name for another namespace (see share-with)",
    shown_default="none", field="secrets",
    parse_in=_parse_sources(SourceKind.SECRET), default=(),
))
EXCLUDE: Final = _declare(Annotation(
    PREFIX + "exclude", On.WORKLOAD, By.USER, "never roll for these sources",
    values="configmap/NAME or secret/NAME, comma-separated; NAME may be ns/name",
    shown_default="none", field="exclude", parse_in=_parse_exclude, default=_NO_REFS,
))
DEBOUNCE: Final = _declare(Annotation(
    PREFIX + "debounce", On.WORKLOAD, By.USER,
    "how long a change waits for further changes before rolling: auto waits until the "
    "workload's sources were quiet for 50 ms (1 s after client-side kubectl apply), at most "
    "2 s; a duration is a fixed window from the first change; 0 rolls at once",
    values=f"auto, or a duration from 0s to {_go(MAX_DEBOUNCE)}",
    shown_default="auto (--debounce)", field="debounce",
    parse=parse_debounce, default_from=lambda defaults: defaults.debounce,
))
MAX_ROLLOUTS: Final = _declare(Annotation(
    PREFIX + "max-rollouts", On.WORKLOAD, By.USER,
    "flap cap: at most N rollouts per window; beyond it the workload is held",
    values=f"N/WINDOW: N from 1 to {MAX_MAX_ROLLOUTS}, a window from "
    f"{_go(MIN_ROLLOUT_WINDOW)} to {_go(MAX_ROLLOUT_WINDOW)}",
    shown_default=f"{DEFAULT_MAX_ROLLOUTS}/{_go(DEFAULT_ROLLOUT_WINDOW)} (--max-rollouts)",
    field=("max_rollouts", "rollout_window"), parse=_parse_max_rollouts,
    default_from=lambda defaults: (defaults.max_rollouts, defaults.rollout_window),
))
STRATEGY: Final = _declare(Annotation(
    PREFIX + "strategy", On.WORKLOAD, By.USER,
    # The registry's contract adds each registered strategy's name and words to these.
    "how to apply a change: rollout writes the hash on the pod template",
    values=STRATEGY_ROLLOUT,
    shown_default=f"{DEFAULT_STRATEGY} (--strategy)", field="strategy",
    parse_in=_parse_strategy, default_from=lambda defaults: defaults.strategy,
))
ADOPT: Final = _declare(Annotation(
    PREFIX + "adopt", On.WORKLOAD, By.USER,
    "at first sight, roll pods that started before their config last changed, or never",
    values=f"{ADOPT_ROLL_STALE} or {ADOPT_NEVER_ROLL}", shown_default=ADOPT_ROLL_STALE,
    field="roll_stale_on_adoption",
    parse=one_of({ADOPT_ROLL_STALE: True, ADOPT_NEVER_ROLL: False}), default=True,
))
ROLLOUT_ORDER: Final = _declare(Annotation(
    PREFIX + "rollout-order", On.WORKLOAD, By.USER,
    "for one source change, lower orders roll first; a higher order starts only when every "
    "lower-order consumer of the same changed source completed healthy",
    values=f"0 to {MAX_ROLLOUT_ORDER}", shown_default="unset: not ordered",
    field="rollout_order", parse=_parse_order,
))
PROGRESS_DEADLINE: Final = _declare(Annotation(
    PREFIX + "progress-deadline", On.WORKLOAD, By.USER,
    "how long a rollout may take before kube-nudge calls it failed",
    values=f"a duration from {_go(MIN_PROGRESS_DEADLINE)} to {_go(MAX_PROGRESS_DEADLINE)}",
    shown_default="the Deployment's progressDeadlineSeconds, else 10m",
    field="progress_deadline",
    parse=duration_between(MIN_PROGRESS_DEADLINE, MAX_PROGRESS_DEADLINE, "1s and 24h", "10m"),
))
APPROVAL: Final = _declare(Annotation(
    PREFIX + "approval", On.WORKLOAD, By.USER,
    "required: a change waits for kube-nudge approve before rolling",
    values=f"{APPROVAL_REQUIRED} or none", shown_default="none", field="approval_required",
    parse=one_of({APPROVAL_REQUIRED: True, "none": False}), default=False,
))
ROLLOUT_WINDOW: Final = _declare(Annotation(
    PREFIX + "rollout-window", On.WORKLOAD, By.USER,
    "changes roll only while the window is open",
    values="[DAYS] HH:MM-HH:MM[; ...] [ZONE], e.g. Mon-Fri 09:00-17:00 Europe/Berlin",
    shown_default="always open", field="window", parse=parse_window,
))
ON_FAILURE: Final = _declare(Annotation(
    PREFIX + "on-failure", On.WORKLOAD, By.USER,
    "when a rollout fails: hold (stop the line) or rollback (strategies that keep earlier "
    "configs only: back to the previous revision's copies)",
    values=f"{ON_FAILURE_HOLD} or {ON_FAILURE_ROLLBACK}", shown_default=ON_FAILURE_HOLD,
    field="rollback_on_failure",
    parse=one_of({ON_FAILURE_HOLD: False, ON_FAILURE_ROLLBACK: True}), default=False,
))
ANALYSIS: Final = _declare(Annotation(
    PREFIX + "analysis", On.WORKLOAD, By.USER,
    "after its rollout of a change completes, the metrics of this analysis template are "
    "measured; the rollout counts as complete (for the next rollout-order, RolloutComplete) "
    "only once they pass, and as failed when they fail",
    values=f"NAME (kube-nudge's AnalysisTemplate), or {TEMPLATE_KINDS[1]}/NAME or "
    f"{TEMPLATE_KINDS[2]}/NAME (Argo Rollouts')",
    shown_default="none: judged by readiness only", field="analysis",
    parse=parse_analysis_ref,
))
APPROVED_AT: Final = _declare(Annotation(
    PREFIX + "approved-at", On.WORKLOAD_METADATA, By.USER,
    "written by kube-nudge approve KIND/NAME: changes of the data made before it (or in the "
    "same whole second) are approved",
    values="Unix seconds",
))
RELEASED_AT: Final = _declare(Annotation(
    PREFIX + "released-at", On.WORKLOAD_METADATA, By.USER,
    "written by kube-nudge release KIND/NAME: the flap cap counts only rollouts after it, "
    "so a held workload rolls its latest config now",
    values="Unix seconds",
))

# Set by users on a ConfigMap or Secret.
IGNORE: Final = _declare(Annotation(
    PREFIX + "ignore", On.SOURCE, By.USER,
    "changes to it never trigger anything (it is left out of every hash, so adding or "
    "removing this annotation is itself one change)",
    values=_BOOLEAN, shown_default="false", field="ignore", parse=parse_bool,
))
SHARE_WITH: Final = _declare(Annotation(
    PREFIX + "share-with", On.SOURCE, By.USER,
    "namespaces whose workloads may name it in configmaps/secrets",
    values=f"namespaces, comma-separated; {SHARE_ALL} for all",
    shown_default="its own namespace only", field="share_with", parse=_parse_share_with,
    default=_NO_NAMESPACES,
))
POD_SELECTOR: Final = _declare(Annotation(
    PREFIX + "pod-selector", On.SOURCE, By.USER,
    "when its data changes, evict the matching pods of its namespace that started before "
    "the change (PodDisruptionBudgets respected); no workload annotation needed",
    values="a label selector, e.g. app=web", shown_default="none", field="pod_selector",
    parse=check_label_selector,
))

# Written by the controller.
ANALYSIS_RUN: Final = _declare(Annotation(
    PREFIX + "analysis-run", On.WORKLOAD_METADATA, By.CONTROLLER,
    "the analysis of the config last rolled: when it started, what each metric measured and "
    "counted, and its verdict (a restarted controller goes on from it)",
    values="JSON",
))
CONFIG_HASH: Final = _declare(Annotation(
    PREFIX + "config-hash", On.POD_TEMPLATE, By.CONTROLLER,
    "the hash of the consumed config the pods run; writing it rolls the workload",
))
#: Adoption never touches the pod template, so opting in (or migrating hundreds of workloads
#: with --compat) restarts nothing; the first rollout removes it.
BASELINE_HASH: Final = _declare(Annotation(
    PREFIX + "baseline-hash", On.WORKLOAD_METADATA, By.CONTROLLER,
    "on adoption: the hash of the config the pods already run; removed when the template "
    "first gets its hash",
))
#: The flap cap reads it, so a restart or a new leader does not forget how often a
#: flapping config has already rolled the workload.
ROLLED_AT: Final = _declare(Annotation(
    PREFIX + "rolled-at", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each rollout: the recent rollout times, for the flap cap",
    values="Unix seconds, comma-separated, oldest first",
))
#: A workload whose hashes were made under another key (the key Secret was lost or
#: replaced) is re-baselined, not rolled: its hash changed, its config did not.
KEY_ID: Final = _declare(Annotation(
    PREFIX + "key-id", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each adoption and rollout: which installation key made the recorded hashes "
    "(reveals nothing about the key)",
    values="8 hex digits of an HMAC under the key",
))
#: Kept on the workload so that a restart or a new leader still stops the line (and
#: notifies once).
FAILED: Final = _declare(Annotation(
    PREFIX + "failed", On.WORKLOAD_METADATA, By.CONTROLLER,
    "when a rollout fails, so a restart or a new leader keeps the line stopped and "
    "announces nothing twice",
    values="HASH@UNIX_SECONDS",
))
#: Copied by the Deployment controller onto the new ReplicaSet, where
#: `kubectl rollout history` shows it in its CHANGE-CAUSE column.
CHANGE_CAUSE: Final = _declare(Annotation(
    "kubernetes.io/change-cause", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each rollout: why, so kubectl rollout history shows it",
    values="e.g. kube-nudge: secret/db keys [password] changed",
))

# fmt: on

#: Every annotation and label of the contract, in the order of the annotation table.
ANNOTATIONS: Final = tuple(_DECLARED)
#: What `parse_workload` reads, in the order its messages come.
WORKLOAD_ANNOTATIONS: Final = tuple(a for a in ANNOTATIONS if a.on is On.WORKLOAD and a.field)
#: What `parse_source` reads.
SOURCE_ANNOTATIONS: Final = tuple(a for a in ANNOTATIONS if a.on is On.SOURCE and a.field)


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
