"""The annotation contract: every annotation kube-nudge reads or writes, in one place, and
parsers turning them into settings plus readable error messages.

Parsing never raises. Each invalid annotation yields one message naming the
annotation and the (truncated) bad value, and its field falls back to the default,
so one mistake never hides another. Values are stripped of surrounding whitespace.
All annotations are parsed even when the workload is not opted in.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

from kube_nudge.model import compat
from kube_nudge.model.compat import IGNORE as RELOADER_IGNORE
from kube_nudge.model.compat import MATCH as RELOADER_MATCH
from kube_nudge.model.compat import SOURCE_SWITCHES, WORKLOAD_SWITCHES, translate_workload
from kube_nudge.model.quoting import show
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.selectors import check_label_selector
from kube_nudge.model.sharing import shared
from kube_nudge.model.windows import RolloutWindow, parse_window

__all__ = [
    "ADOPT",
    "APPROVAL",
    "APPROVED_AT",
    "BASELINE_HASH",
    "COMPAT_RELOADER",
    "COMPAT_WAVE",
    "CONFIGMAPS",
    "CONFIG_HASH",
    "DEBOUNCE",
    "DEFAULT_DEBOUNCE",
    "DEFAULT_MAX_ROLLOUTS",
    "DEFAULT_ROLLOUT_WINDOW",
    "DEFAULT_STRATEGY",
    "ENABLED",
    "EXCLUDE",
    "FAILED",
    "FALSE_SPELLINGS",
    "HOT_DEADLINE",
    "HOT_FALLBACK",
    "HOT_RELOAD",
    "IGNORE",
    "KEY_ID",
    "LOADED_AT",
    "MAX_ROLLOUTS",
    "ON_FAILURE",
    "ON_FAILURE_ROLLBACK",
    "POD_SELECTOR",
    "PREFIX",
    "PROGRESS_DEADLINE",
    "RELEASED_AT",
    "RELOAD_FAILED_AT",
    "ROLLED_AT",
    "ROLLED_TO",
    "ROLLOUT_ORDER",
    "ROLLOUT_WINDOW",
    "SECRETS",
    "SHARE_ALL",
    "SHARE_WITH",
    "SNAPSHOTS",
    "SNAPSHOT_FOR",
    "SNAPSHOT_LABEL",
    "SNAPSHOT_OF",
    "STRATEGIES",
    "STRATEGY",
    "STRATEGY_SNAPSHOT",
    "TRUE_SPELLINGS",
    "SourceSettings",
    "WorkloadDefaults",
    "WorkloadSettings",
    "cross_namespace_allowed",
    "format_failed",
    "format_hash_at",
    "format_rolled_at",
    "is_dns_label",
    "is_dns_subdomain",
    "mistyped_opt_in",
    "parse_bool",
    "parse_duration",
    "parse_failed",
    "parse_hash_at",
    "parse_rolled_at",
    "parse_source",
    "parse_workload",
]

PREFIX: Final = "kube-nudge.io/"

#: The spellings every boolean annotation accepts: kube-nudge's (`enabled`, `ignore`) and,
#: with --compat, Reloader's and Wave's switches (`compat.WORKLOAD_SWITCHES`,
#: `compat.SOURCE_SWITCHES`). They are Go's `strconv.ParseBool`, which Reloader reads its own
#: annotations with, so a value that opted a workload in under Reloader opts it in here.
#: Anything else (`"yes"`, `"on"`, `"enabled"`) is an error: a Warning Event
#: `InvalidAnnotation` and a log line, and the annotation counts as unset.
TRUE_SPELLINGS: Final = ("true", "True", "TRUE", "t", "T", "1")
FALSE_SPELLINGS: Final = ("false", "False", "FALSE", "f", "F", "0")

# On the workload.
ENABLED: Final = PREFIX + "enabled"
CONFIGMAPS: Final = PREFIX + "configmaps"
SECRETS: Final = PREFIX + "secrets"
EXCLUDE: Final = PREFIX + "exclude"
DEBOUNCE: Final = PREFIX + "debounce"
MAX_ROLLOUTS: Final = PREFIX + "max-rollouts"
STRATEGY: Final = PREFIX + "strategy"
ADOPT: Final = PREFIX + "adopt"
ADOPT_ROLL_STALE: Final = "roll-stale"
ADOPT_NEVER_ROLL: Final = "never-roll"
#: Safe releases (see `model.gates`): roll after every workload of a lower order that
#: consumes the same changed source completed healthy.
ROLLOUT_ORDER: Final = PREFIX + "rollout-order"
#: How long a rollout may take before kube-nudge calls it failed (a duration).
PROGRESS_DEADLINE: Final = PREFIX + "progress-deadline"
#: "required": a change waits for `kube-nudge approve` (or APPROVED_AT) before rolling.
APPROVAL: Final = PREFIX + "approval"
APPROVAL_REQUIRED: Final = "required"
#: When changes may roll: days and hours in a time zone (see `model.windows`).
ROLLOUT_WINDOW: Final = PREFIX + "rollout-window"
#: What to do when a rollout fails: "hold" (stop the line; the default) or "rollback"
#: (strategy `snapshot` only: back to the copies the previous revision used).
ON_FAILURE: Final = PREFIX + "on-failure"
ON_FAILURE_HOLD: Final = "hold"
ON_FAILURE_ROLLBACK: Final = "rollback"
#: Strategy `hot`: when pods don't report a successful reload of a hot change within
#: HOT_DEADLINE (or report a failed one), "rollout" (the default) rolls the workload, "warn"
#: only posts a Warning Event.
HOT_FALLBACK: Final = PREFIX + "hot-fallback"
HOT_FALLBACK_ROLLOUT: Final = "rollout"
HOT_FALLBACK_WARN: Final = "warn"
HOT_DEADLINE: Final = PREFIX + "hot-deadline"
COMPAT_WAVE: Final = compat.WAVE_ON  # opt-ins honoured with --compat (see model/compat.py)
COMPAT_RELOADER: Final = compat.AUTO

# On the pod template, written by the controller.
CONFIG_HASH: Final = PREFIX + "config-hash"
#: Strategy `snapshot`: which immutable copy stands for which source in this template,
#: `{"configmap/app-1a2b3c4d5e6f": "app"}`. It travels with every revision, so an undo
#: brings back the copies of its time (see `model.snapshots`).
SNAPSHOTS: Final = PREFIX + "snapshots"

# On the workload's own metadata, written by the controller.
#: The hash of the config the pods already run, recorded when kube-nudge adopts a workload.
#: Adoption never touches the pod template, so opting in (or migrating hundreds of workloads
#: with --compat) restarts nothing; the first rollout removes it.
BASELINE_HASH: Final = PREFIX + "baseline-hash"
#: When kube-nudge rolled the workload recently (Unix seconds, oldest first). The flap cap
#: reads it, so a restart or a new leader does not forget how often a flapping config has
#: already rolled the workload.
ROLLED_AT: Final = PREFIX + "rolled-at"
#: Which installation key made the recorded hashes (see `hashing.key_id`). A workload whose
#: hashes were made under another key (the key Secret was lost or replaced) is re-baselined,
#: not rolled: its hash changed, its config did not.
KEY_ID: Final = PREFIX + "key-id"
#: Written by an operator (`kube-nudge release`, or kubectl annotate) on the workload's
#: metadata: Unix seconds from which the flap cap counts rollouts again, releasing a
#: workload the cap holds.
RELEASED_AT: Final = PREFIX + "released-at"
#: Strategy `snapshot`: the config hash kube-nudge last rolled the workload to. A template
#: whose own hash differs while this one still equals the desired hash was reverted on
#: purpose (`kubectl rollout undo`): kube-nudge leaves it until the config changes again.
ROLLED_TO: Final = PREFIX + "rolled-to"

#: Written by an operator (`kube-nudge approve`, or kubectl annotate): Unix seconds. A
#: change of the consumed data made before it is approved.
APPROVED_AT: Final = PREFIX + "approved-at"
#: `<config hash>@<unix seconds>`: the rollout to that hash failed then. Kept on the
#: workload so that a restart or a new leader still stops the line (and notifies once).
FAILED: Final = PREFIX + "failed"

#: Strategy `hot`: `<config hash>@<unix seconds>` of a change delivered without a rollout
#: and not yet confirmed by the pods' agents (removed once every pod reloaded it, or by
#: the fallback). The time is when the change was delivered: a reload at or after it counts.
HOT_RELOAD: Final = PREFIX + "hot-reload"

# On pods, written by the `kube-nudge agent` sidecar (its own copies of these names: the
# agent imports nothing of the controller; a unit test keeps them equal).
#: Unix seconds of the app's last successful reload.
LOADED_AT: Final = PREFIX + "loaded-at"
#: Unix seconds of the last reload that failed (validation, signal or HTTP call).
RELOAD_FAILED_AT: Final = PREFIX + "reload-failed-at"

# On the copies the `snapshot` strategy makes.
#: Label, "true": informers leave copies out; `kubectl get cm -l kube-nudge.io/snapshot`.
SNAPSHOT_LABEL: Final = PREFIX + "snapshot"
#: Annotation: the source a copy copies, e.g. `configmap/app`.
SNAPSHOT_OF: Final = PREFIX + "snapshot-of"
#: Label: the uid of the workload a copy was made for (each workload has its own copies, so
#: a thousand workloads reading one ConfigMap never contend for one object).
SNAPSHOT_FOR: Final = PREFIX + "snapshot-for"

# On a ConfigMap or Secret.
IGNORE: Final = PREFIX + "ignore"
SHARE_WITH: Final = PREFIX + "share-with"
SHARE_ALL: Final = "*"
#: A label selector (`app=web`): when the data changes, kube-nudge evicts the matching pods
#: of the source's namespace that started before the change (see `model.replacement`).
POD_SELECTOR: Final = PREFIX + "pod-selector"

DEFAULT_DEBOUNCE: Final = 2.0
MAX_DEBOUNCE: Final = 3600.0
DEFAULT_MAX_ROLLOUTS: Final = 3
MAX_MAX_ROLLOUTS: Final = 1000
DEFAULT_ROLLOUT_WINDOW: Final = 300.0
MIN_ROLLOUT_WINDOW: Final = 1.0
MAX_ROLLOUT_WINDOW: Final = 86400.0
MIN_PROGRESS_DEADLINE: Final = 1.0
MAX_PROGRESS_DEADLINE: Final = 86400.0
MAX_ROLLOUT_ORDER: Final = 1_000_000
DEFAULT_HOT_DEADLINE: Final = 120.0
MIN_HOT_DEADLINE: Final = 5.0
MAX_HOT_DEADLINE: Final = 3600.0
STRATEGY_ROLLOUT: Final = "rollout"
STRATEGY_SNAPSHOT: Final = "snapshot"
DEFAULT_STRATEGY: Final = STRATEGY_ROLLOUT
#: Strategy names the model accepts when no registry is given (the app passes the
#: registry's names through `WorkloadDefaults.strategies`).
STRATEGIES: Final = (STRATEGY_ROLLOUT,)
_MAX_ROLLED_AT = 100  # a malformed or hostile annotation costs at most this many numbers

_KINDS: Final = frozenset(kind.value for kind in SourceKind)
_MAX_DURATION_CHARS = 64
_MAX_NS = 2**63 - 1  # Go's time.Duration range
_UNIT_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(_DNS_LABEL)
_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_MAX_ROLLOUTS_RE = re.compile(r"([0-9]{1,10})/(.*)", re.DOTALL)

_T = TypeVar("_T")
_NO_REFS: frozenset[SourceRef] = frozenset()
_NO_NAMESPACES: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class WorkloadSettings:
    """What a workload's annotations ask of the controller."""

    enabled: bool
    extra: tuple[SourceRef, ...]
    """Sources named by annotation, sorted: consumed whole and not optional."""
    exclude: frozenset[SourceRef]
    debounce: float
    """Seconds to wait for further changes before rolling."""
    max_rollouts: int
    rollout_window: float
    """At most `max_rollouts` rollouts per `rollout_window` seconds."""
    strategy: str
    roll_stale_on_adoption: bool = True
    """`kube-nudge.io/adopt`: roll at first sight when the pods started before the config
    they consume last changed (`roll-stale`, the default), or never (`never-roll`)."""
    only_kinds: frozenset[SourceKind] | None = None
    """With --compat (Reloader's per-type auto): only sources of these kinds count."""
    only_named: frozenset[SourceRef] | None = None
    """With --compat (Reloader's reload lists): only these sources count."""
    only_matched: bool = False
    """With --compat (Reloader's search): only sources with Reloader's `match` count."""
    rollout_order: int | None = None
    """`kube-nudge.io/rollout-order`; None: not ordered (neither waits nor is waited for)."""
    progress_deadline: float | None = None
    """`kube-nudge.io/progress-deadline` in seconds; None: the workload's own, or 10 min."""
    approval_required: bool = False
    rollback_on_failure: bool = False
    window: RolloutWindow | None = None
    """`kube-nudge.io/rollout-window`: changes roll only while it is open."""
    hot_fallback_rollout: bool = True
    """Strategy `hot`: roll when a hot change isn't reloaded in time (else only warn)."""
    hot_deadline: float = DEFAULT_HOT_DEADLINE
    """Strategy `hot`: seconds the pods have to report reloading a hot change."""


@dataclass(frozen=True, slots=True)
class WorkloadDefaults:
    """Controller-wide defaults (from flags) that a workload's annotations override, and
    the strategy names that exist. Passed in once; nothing re-reads raw annotations later."""

    debounce: float = DEFAULT_DEBOUNCE
    max_rollouts: int = DEFAULT_MAX_ROLLOUTS
    rollout_window: float = DEFAULT_ROLLOUT_WINDOW
    strategy: str = DEFAULT_STRATEGY
    strategies: tuple[str, ...] = field(default=STRATEGIES)
    compat: bool = False
    """Also opt in workloads annotated for Wave or Reloader."""


_PRODUCT_DEFAULTS = WorkloadDefaults()


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """What a ConfigMap's or Secret's annotations ask of the controller."""

    ignore: bool
    share_with: frozenset[str]
    """Namespaces whose workloads may name this source; `*` means all."""
    matched: bool = False
    """With --compat: Reloader's `match` annotation (counts for `search` workloads)."""
    pod_selector: str | None = None
    """`kube-nudge.io/pod-selector`: the pods to replace when the data changes; None: none."""


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
    errors: list[str] = []
    enabled = _field(ann, ENABLED, parse_bool, None, errors)
    peers = None
    if defaults.compat:
        switches = {name: _field(ann, name, parse_bool, False, errors)
                    for name in WORKLOAD_SWITCHES if name in ann}  # fmt: skip
        peers = translate_workload(ann, switches)
    if enabled is None:
        enabled = peers is not None and peers.enabled

    def sources(name: str, kind: SourceKind) -> tuple[SourceRef, ...]:
        return _field(ann, name, lambda n, v: _parse_sources(n, v, kind, namespace), (), errors)

    extra = set(sources(CONFIGMAPS, SourceKind.CONFIGMAP) + sources(SECRETS, SourceKind.SECRET))
    only_named = None
    if peers is not None:
        named = _peer_sources(peers.configmaps, SourceKind.CONFIGMAP, namespace, errors)
        named += _peer_sources(peers.secrets, SourceKind.SECRET, namespace, errors)
        extra.update(named)
        only_named = frozenset(named) if peers.named_only else None
        errors.extend(peers.errors)
    exclude = _field(ann, EXCLUDE, lambda n, v: _parse_exclude(n, v, namespace), _NO_REFS, errors)
    debounce = _field(ann, DEBOUNCE, _parse_debounce, defaults.debounce, errors)
    max_rollouts, window = _field(
        ann,
        MAX_ROLLOUTS,
        _parse_max_rollouts,
        (defaults.max_rollouts, defaults.rollout_window),
        errors,
    )
    strategy = _field(
        ann, STRATEGY, lambda n, v: _parse_strategy(n, v, defaults.strategies),
        defaults.strategy, errors,
    )  # fmt: skip
    adopt = _field(ann, ADOPT, _parse_adopt, ADOPT_ROLL_STALE, errors)
    order = _field(ann, ROLLOUT_ORDER, _parse_order, None, errors)
    deadline = _field(ann, PROGRESS_DEADLINE, _parse_progress_deadline, None, errors)
    approval = _field(ann, APPROVAL, _parse_approval, "", errors)
    release_window = _field(ann, ROLLOUT_WINDOW, parse_window, None, errors)
    on_failure = _field(ann, ON_FAILURE, _parse_on_failure, ON_FAILURE_HOLD, errors)
    hot_fallback = _field(ann, HOT_FALLBACK, _parse_hot_fallback, HOT_FALLBACK_ROLLOUT, errors)
    hot_deadline = _field(ann, HOT_DEADLINE, _parse_hot_deadline, DEFAULT_HOT_DEADLINE, errors)
    if on_failure == ON_FAILURE_ROLLBACK and strategy != STRATEGY_SNAPSHOT:
        errors.append(
            f'{ON_FAILURE} "{ON_FAILURE_ROLLBACK}" needs {STRATEGY}: {STRATEGY_SNAPSHOT} (with '
            f"{strategy!r} the earlier config is gone once the source is edited); holding on "
            "failure instead"
        )
        on_failure = ON_FAILURE_HOLD
    settings = WorkloadSettings(
        enabled=enabled,
        extra=tuple(sorted(extra)),
        exclude=exclude,
        debounce=debounce,
        max_rollouts=max_rollouts,
        rollout_window=window,
        strategy=strategy,
        roll_stale_on_adoption=adopt == ADOPT_ROLL_STALE,
        only_kinds=peers.kinds if peers is not None else None,
        only_named=only_named,
        only_matched=peers is not None and peers.matched_only,
        rollout_order=order,
        progress_deadline=deadline,
        approval_required=approval == APPROVAL_REQUIRED,
        rollback_on_failure=on_failure == ON_FAILURE_ROLLBACK,
        window=release_window,
        hot_fallback_rollout=hot_fallback == HOT_FALLBACK_ROLLOUT,
        hot_deadline=hot_deadline,
    )
    return shared(settings, _WORKLOAD_SETTINGS), errors


def _peer_sources(
    items: tuple[str, ...], kind: SourceKind, namespace: str, errors: list[str]
) -> list[SourceRef]:
    refs = []
    for item in items:
        ref = _source_ref(kind, item, namespace)
        if ref is None:
            errors.append(f"--compat: invalid {kind} name {show(item)} in a Reloader/Wave list")
        else:
            refs.append(ref)
    return refs


_SOURCE_SETTINGS: dict[SourceSettings, SourceSettings] = {}
_WORKLOAD_SETTINGS: dict[WorkloadSettings, WorkloadSettings] = {}


def parse_source(
    annotations: Mapping[str, str] | None, *, compat: bool = False
) -> tuple[SourceSettings, list[str]]:
    """Settings of a ConfigMap or Secret, and one error message per bad annotation. With
    `compat`, Reloader's ignore annotation also ignores it, and its match annotation is read."""
    ann: Mapping[str, object] = annotations if isinstance(annotations, Mapping) else {}
    errors: list[str] = []
    ignore = _field(ann, IGNORE, parse_bool, None, errors)
    switches = {name: _field(ann, name, parse_bool, False, errors)
                for name in SOURCE_SWITCHES if compat and name in ann}  # fmt: skip
    if ignore is None and compat:
        ignore = switches.get(RELOADER_IGNORE, False)
    share_with = _field(ann, SHARE_WITH, _parse_share_with, _NO_NAMESPACES, errors)
    matched = compat and switches.get(RELOADER_MATCH, False)
    pod_selector = _field(ann, POD_SELECTOR, check_label_selector, None, errors)
    settings = SourceSettings(
        ignore=bool(ignore), share_with=share_with, matched=matched, pod_selector=pod_selector
    )
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


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration such as `0`, `500ms`, `1.5s` or `1m30s`.

    Follows Go's `time.ParseDuration`: an optional sign, then one or more
    number-unit pairs (units ns, us, µs, ms, s, m, h); a bare `0` needs no unit.
    Raises ValueError with a message quoting the (truncated) input.
    """
    if not isinstance(text, str) or len(text) > _MAX_DURATION_CHARS:
        raise ValueError(f"invalid duration {show(text)}: too long")
    body = text[1:] if text[:1] in ("-", "+") else text
    sign = -1 if text[:1] == "-" else 1
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {show(text)}: empty")
    total_ns, pos = 0, 0
    while pos < len(body):
        match = _COMPONENT.match(body, pos)
        if match is None or not (match[1] or match[2]):
            raise ValueError(
                f"invalid duration {show(text)}: expected a number and a unit "
                '(ns, us, ms, s, m, h) such as "500ms", "2s" or "1m30s"'
            )
        whole, fraction, unit = match[1], match[2] or "", _UNIT_NS[match[3]]
        # Integer nanoseconds, fractions truncated, as Go does.
        total_ns += int(whole or "0") * unit + int(fraction or "0") * unit // 10 ** len(fraction)
        pos = match.end()
    if total_ns > _MAX_NS:
        raise ValueError(f"invalid duration {show(text)}: out of range")
    return sign * total_ns / 1e9


def parse_rolled_at(value: object) -> tuple[float, ...]:
    """The timestamps of `kube-nudge.io/rolled-at`, sorted; anything unreadable is skipped
    (it only ever makes the flap cap more lenient)."""
    if not isinstance(value, str):
        return ()
    stamps = []
    for part in value.split(",", _MAX_ROLLED_AT)[:_MAX_ROLLED_AT]:
        with contextlib.suppress(ValueError):
            stamp = float(part)
            if math.isfinite(stamp) and stamp > 0:
                stamps.append(stamp)
    return tuple(sorted(stamps))


def format_rolled_at(stamps: tuple[float, ...] | list[float]) -> str:
    """The value of `kube-nudge.io/rolled-at` for `stamps` (millisecond precision)."""
    return ",".join(f"{t:.3f}" for t in stamps)


def _field(
    ann: Mapping[str, object],
    name: str,
    parse: Callable[[str, str], _T],
    default: _T,
    errors: list[str],
) -> _T:
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


def parse_bool(name: str, value: str) -> bool:
    """A boolean annotation's value, one of `TRUE_SPELLINGS` or `FALSE_SPELLINGS`;
    ValueError naming the annotation, the value and the spellings otherwise."""
    if value in TRUE_SPELLINGS:
        return True
    if value in FALSE_SPELLINGS:
        return False
    raise ValueError(
        f'{name} must be "true" or "false", got {show(value)} (also accepted: '
        f"{', '.join(TRUE_SPELLINGS[1:])} and {', '.join(FALSE_SPELLINGS[1:])})"
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


def _split(name: str, value: str) -> list[str]:
    if not value:
        return []
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise ValueError(f"{name} has an empty item in {show(value)}")
    return items


def _parse_sources(
    name: str, value: str, kind: SourceKind, namespace: str
) -> tuple[SourceRef, ...]:
    refs = []
    for item in _split(name, value):
        ref = _source_ref(kind, item, namespace)
        if ref is None:
            raise ValueError(
                f"{name} has an invalid item {show(item)}: "
                "want a name or namespace/name (lowercase DNS-1123)"
            )
        refs.append(ref)
    return tuple(refs)


def _parse_exclude(name: str, value: str, namespace: str) -> frozenset[SourceRef]:
    refs = set()
    for item in _split(name, value):
        kind_text, _, rest = item.partition("/")
        ref = None
        if kind_text in _KINDS:
            ref = _source_ref(SourceKind(kind_text), rest, namespace)
        if ref is None:
            raise ValueError(
                f"{name} has an invalid item {show(item)}: want configmap/name, "
                "secret/name, configmap/namespace/name or secret/namespace/name"
            )
        refs.add(ref)
    return frozenset(refs)


def _source_ref(kind: SourceKind, text: str, namespace: str) -> SourceRef | None:
    """`name` or `namespace/name`, or None if either part is not a valid Kubernetes name."""
    parts = text.split("/")
    if len(parts) == 1:
        parts = [namespace, *parts]
    if len(parts) != 2 or not _is_label(parts[0]) or not _is_subdomain(parts[1]):
        return None
    return SourceRef(kind, parts[0], parts[1])


def _parse_debounce(name: str, value: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= MAX_DEBOUNCE:
        raise ValueError(
            f'{name} must be a duration between 0s and 1h such as "500ms" or "2s", '
            f"got {show(value)}"
        )
    return seconds


def _parse_max_rollouts(name: str, value: str) -> tuple[int, float]:
    match = _MAX_ROLLOUTS_RE.fullmatch(value)
    count, window = 0, 0.0
    if match is not None:
        count = int(match[1])
        try:
            window = parse_duration(match[2])
        except ValueError:
            window = 0.0
    if not (1 <= count <= MAX_MAX_ROLLOUTS and MIN_ROLLOUT_WINDOW <= window <= MAX_ROLLOUT_WINDOW):
        raise ValueError(
            f'{name} must be "N/window" with N from 1 to {MAX_MAX_ROLLOUTS} and a window '
            f'between 1s and 24h such as "3/5m", got {show(value)}'
        )
    return count, window


def _parse_strategy(name: str, value: str, strategies: tuple[str, ...]) -> str:
    if value not in strategies:
        supported = ", ".join(f'"{s}"' for s in strategies)
        raise ValueError(f"{name} must be one of {supported}, got {show(value)}")
    return value


def _one_of(*choices: str) -> Callable[[str, str], str]:
    """A parser accepting exactly ``choices``; its message lists them."""
    wanted = " or ".join(f'"{c}"' for c in choices)

    def parse(name: str, value: str) -> str:
        if value not in choices:
            raise ValueError(f"{name} must be {wanted}, got {show(value)}")
        return value

    return parse


_parse_adopt = _one_of(ADOPT_ROLL_STALE, ADOPT_NEVER_ROLL)


def _parse_order(name: str, value: str) -> int:
    if not value.isdigit() or int(value) > MAX_ROLLOUT_ORDER:
        raise ValueError(
            f'{name} must be a whole number from 0 to {MAX_ROLLOUT_ORDER} such as "1" '
            f"(lower orders roll first), got {show(value)}"
        )
    return int(value)


def _duration_between(
    low: float, high: float, shown: str, example: str
) -> Callable[[str, str], float]:
    """A parser of a duration from ``low`` to ``high`` seconds (``shown``: "1s and 24h")."""

    def parse(name: str, value: str) -> float:
        try:
            seconds = parse_duration(value)
        except ValueError:
            seconds = -1.0
        if not low <= seconds <= high:
            raise ValueError(
                f'{name} must be a duration between {shown} such as "{example}", got {show(value)}'
            )
        return seconds

    return parse


_parse_progress_deadline = _duration_between(
    MIN_PROGRESS_DEADLINE, MAX_PROGRESS_DEADLINE, "1s and 24h", "10m"
)


_parse_approval = _one_of(APPROVAL_REQUIRED, "none")
_parse_on_failure = _one_of(ON_FAILURE_HOLD, ON_FAILURE_ROLLBACK)
_parse_hot_fallback = _one_of(HOT_FALLBACK_ROLLOUT, HOT_FALLBACK_WARN)

_parse_hot_deadline = _duration_between(MIN_HOT_DEADLINE, MAX_HOT_DEADLINE, "5s and 1h", "2m")


def parse_hash_at(value: object) -> tuple[str, float] | None:
    """`<config hash>@<unix seconds>` (`kube-nudge.io/failed`, `kube-nudge.io/hot-reload`)
    as (config hash, Unix seconds); None if absent or unreadable (which only ever forgets
    a record: a line is not stopped by garbage)."""
    if not isinstance(value, str):
        return None
    config_hash, _, stamp = value.rpartition("@")
    try:
        moment = float(stamp)
    except ValueError:
        return None
    return (config_hash, moment) if config_hash and math.isfinite(moment) else None


def format_hash_at(config_hash: str, moment: float) -> str:
    """`<config hash>@<unix seconds>`, as `parse_hash_at` reads it."""
    return f"{config_hash}@{moment:.3f}"


#: `kube-nudge.io/failed`: the rollout to that hash failed then.
parse_failed = parse_hash_at
format_failed = format_hash_at


def _parse_share_with(name: str, value: str) -> frozenset[str]:
    items = _split(name, value)
    for item in items:
        if item != SHARE_ALL and not _is_label(item):
            raise ValueError(
                f'{name} has an invalid item {show(item)}: want a namespace name or "*"'
            )
    return frozenset(items)


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label (a namespace's name): at most 63 of a-z, 0-9 and "-", alphanumeric
    at both ends."""
    return len(text) <= 63 and _LABEL_RE.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain (most objects' names): labels joined by ".", at most 253."""
    return len(text) <= 253 and _SUBDOMAIN_RE.fullmatch(text) is not None


_is_label = is_dns_label
_is_subdomain = is_dns_subdomain
