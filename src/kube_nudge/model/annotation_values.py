"""The values of single annotations: the parsers the annotation table (`model.annotations`)
declares for one annotation each, with the limits and spellings they check, and
`go_duration`, how the table writes a duration. The parsers several annotations share
(durations, booleans, lists, names) are `model.parsing`.

Like those, each parser takes the annotation's name and its stripped value and raises
ValueError with a message naming both (the value truncated and escaped). The rules a flag
of ``kube-nudge run`` shares with an annotation (`debounce_seconds`, `rollout_cap`) raise
`Refused` instead, naming the part at fault, and their annotation's parser words it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kube_nudge.model.parsing import Refused, is_dns_label, parse_duration, source_ref, split_items
from kube_nudge.model.quoting import show
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.shapes import ParseContext, Parser
from kube_nudge.model.source_kinds import is_source_kind

__all__ = [
    "AUTO_DEBOUNCE",
    "MAX_DEBOUNCE",
    "MAX_MAX_ROLLOUTS",
    "MAX_ROLLOUT_ORDER",
    "MAX_ROLLOUT_WINDOW",
    "MIN_ROLLOUT_WINDOW",
    "SHARE_ALL",
    "debounce_seconds",
    "go_duration",
    "parse_debounce",
    "parse_exclude",
    "parse_max_rollouts",
    "parse_order",
    "parse_share_with",
    "parse_sources",
    "parse_strategy",
    "rollout_cap",
]

AUTO_DEBOUNCE: Final = "auto"
MAX_DEBOUNCE: Final = 3600.0
MAX_MAX_ROLLOUTS: Final = 1000
MIN_ROLLOUT_WINDOW: Final = 1.0
MAX_ROLLOUT_WINDOW: Final = 86400.0
MAX_ROLLOUT_ORDER: Final = 1_000_000
SHARE_ALL: Final = "*"


def parse_sources(kind: SourceKind) -> Callable[[ParseContext], Parser]:
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


def parse_exclude(context: ParseContext) -> Parser:
    """`kube-nudge.io/exclude`: kind/name or kind/namespace/name of ConfigMaps and Secrets."""

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


def parse_max_rollouts(name: str, value: str) -> tuple[int, float]:
    """The annotation's parser of `rollout_cap`."""
    try:
        return rollout_cap(value)
    except Refused:
        raise ValueError(
            f'{name} must be "N/window" with N from 1 to {MAX_MAX_ROLLOUTS} and a window '
            f'between 1s and 24h such as "3/5m", got {show(value)}'
        ) from None


def parse_strategy(context: ParseContext) -> Parser:
    """`kube-nudge.io/strategy`: one of the registered strategies' names."""
    strategies = context.defaults.strategies

    def parse(name: str, value: str) -> str:
        if value not in strategies:
            supported = ", ".join(f'"{s}"' for s in strategies)
            raise ValueError(f"{name} must be one of {supported}, got {show(value)}")
        return value

    return parse


def parse_order(name: str, value: str) -> int:
    """`kube-nudge.io/rollout-order`: a whole number from 0 to `MAX_ROLLOUT_ORDER`."""
    if not value.isdigit() or int(value) > MAX_ROLLOUT_ORDER:
        raise ValueError(
            f'{name} must be a whole number from 0 to {MAX_ROLLOUT_ORDER} such as "1" '
            f"(lower orders roll first), got {show(value)}"
        )
    return int(value)


def parse_share_with(name: str, value: str) -> frozenset[str]:
    """`kube-nudge.io/share-with`: namespace names, or `SHARE_ALL`."""
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
