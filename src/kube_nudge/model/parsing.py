"""Parsers of annotation values that several annotations share: Go durations, booleans,
comma-separated lists, choices and Kubernetes names. Each takes the annotation's name and
its stripped value and raises ValueError with a message naming both (the value truncated
and escaped), which becomes one line of an `InvalidAnnotation` Event."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from kube_nudge.model.quoting import show
from kube_nudge.model.references import SourceKind, SourceRef

__all__ = [
    "FALSE_SPELLINGS",
    "TRUE_SPELLINGS",
    "Refused",
    "duration_between",
    "is_dns_label",
    "is_dns_subdomain",
    "one_of",
    "parse_bool",
    "parse_duration",
    "source_ref",
    "split_items",
]

#: The spellings every boolean annotation accepts: kube-nudge's (`enabled`, `ignore`) and,
#: with --compat, Reloader's and Wave's switches (`compat.WORKLOAD_SWITCHES`,
#: `compat.SOURCE_SWITCHES`). They are Go's `strconv.ParseBool`, which Reloader reads its own
#: annotations with, so a value that opted a workload in under Reloader opts it in here.
#: Anything else (`"yes"`, `"on"`, `"enabled"`) is an error: a Warning Event
#: `InvalidAnnotation` and a log line, and the annotation counts as unset.
TRUE_SPELLINGS: Final = ("true", "True", "TRUE", "t", "T", "1")
FALSE_SPELLINGS: Final = ("false", "False", "FALSE", "f", "F", "0")

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

_T = TypeVar("_T")


class Refused(ValueError):
    """A value its rule refuses, naming the ``part`` of it at fault, so callers that word
    their messages their own way share the rule: an annotation's parser says it in one
    sentence, a flag of ``kube-nudge run`` says it by part. The message is the reason
    (``parse_duration``'s own for a part that is no duration), or the part when none."""

    def __init__(self, part: str, reason: str = "") -> None:
        super().__init__(reason or part)
        self.part = part


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


def split_items(name: str, value: str) -> list[str]:
    """The comma-separated items of `value` (none if empty); ValueError on an empty item."""
    if not value:
        return []
    items = [item.strip() for item in value.split(",")]
    if not all(items):
        raise ValueError(f"{name} has an empty item in {show(value)}")
    return items


def one_of(choices: Mapping[str, _T]) -> Callable[[str, str], _T]:
    """A parser accepting exactly the keys of `choices`, giving their values; its message
    lists the keys."""
    wanted = " or ".join(f'"{c}"' for c in choices)

    def parse(name: str, value: str) -> _T:
        if value not in choices:
            raise ValueError(f"{name} must be {wanted}, got {show(value)}")
        return choices[value]

    return parse


def duration_between(
    low: float, high: float, shown: str, example: str
) -> Callable[[str, str], float]:
    """A parser of a duration from `low` to `high` seconds (`shown`: "1s and 24h")."""

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


def source_ref(kind: SourceKind, text: str, namespace: str) -> SourceRef | None:
    """`name` or `namespace/name`, or None if either part is not a valid Kubernetes name."""
    parts = text.split("/")
    if len(parts) == 1:
        parts = [namespace, *parts]
    if len(parts) != 2 or not is_dns_label(parts[0]) or not is_dns_subdomain(parts[1]):
        return None
    return SourceRef(kind, parts[0], parts[1])


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label (a namespace's name): at most 63 of a-z, 0-9 and "-", alphanumeric
    at both ends."""
    return len(text) <= 63 and _LABEL_RE.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain (most objects' names): labels joined by ".", at most 253."""
    return len(text) <= 253 and _SUBDOMAIN_RE.fullmatch(text) is not None
