"""The workload's config hash, and what a workload would miss if it rolled now.

Hash format: ``v1-`` followed by 40 lowercase hex digits, the first 160 bits of
HMAC-SHA256(key, encoding). The HMAC key keeps low-entropy Secret values from being
guessed from the annotation; the version prefix lets a later encoding coexist.

The encoding covers exactly, for each consumed source in sorted order: its kind,
namespace and name, whether it is present, whether all keys or a listed set are
consumed, and for each consumed key (sorted) its name and its digest or an "absent"
marker. Every variable-length field is length-prefixed and every list is
count-prefixed, so two different inputs never encode the same. Keys that are not
consumed, and the order of anything, do not affect the hash.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Mapping
from typing import Any

from kube_nudge.model.digests import Digest, key_digests
from kube_nudge.model.references import Consumption, SourceRef
from kube_nudge.model.sourcestate import ABSENT, SourceState

__all__ = [
    "ABSENT",
    "HASH_HEX_DIGITS",
    "HASH_VERSION",
    "SourceState",
    "canonical_encoding",
    "changed_keys",
    "config_hash",
    "consumed_digests",
    "key_id",
    "missing_requirements",
    "source_state",
]

HASH_VERSION = "v1"
HASH_HEX_DIGITS = 40

_MAGIC = b"kube-nudge/config-hash/v1"
_ALL_KEYS, _LISTED_KEYS = b"\x00", b"\x01"
_KEY_ABSENT, _KEY_PRESENT = b"\x00", b"\x01"


def source_state(obj: Mapping[str, Any] | None) -> SourceState:
    """State of a source from its JSON object, or ABSENT for None."""
    if obj is None:
        return ABSENT
    return SourceState(present=True, digests=key_digests(obj))


def consumed_digests(consumption: Consumption, state: SourceState) -> dict[str, Digest | None]:
    """Digest of each consumed key, sorted by key; None marks a listed key that is absent."""
    digests = state.digests if state.present else {}
    if consumption.keys is None:
        return {key: digests[key] for key in sorted(digests)}
    return {key: digests.get(key) for key in sorted(consumption.keys)}


def canonical_encoding(
    consumed: Mapping[SourceRef, Consumption], states: Mapping[SourceRef, SourceState]
) -> bytes:
    """The unambiguous byte string that `config_hash` authenticates."""
    parts = [_field(_MAGIC), _count(len(consumed))]
    for ref in sorted(consumed):
        consumption = consumed[ref]
        state = states.get(ref, ABSENT)
        parts += [_text(ref.kind), _text(ref.namespace), _text(ref.name)]
        parts.append(b"\x01" if state.present else b"\x00")
        parts.append(_ALL_KEYS if consumption.keys is None else _LISTED_KEYS)
        digests = consumed_digests(consumption, state)
        parts.append(_count(len(digests)))
        for key, digest in digests.items():
            parts.append(_text(key))
            parts.append(_KEY_ABSENT if digest is None else _KEY_PRESENT + _field(digest))
    return b"".join(parts)


def config_hash(
    key: bytes,
    consumed: Mapping[SourceRef, Consumption],
    states: Mapping[SourceRef, SourceState],
) -> str:
    """`v1-<40 hex>` over the consumed part of the sources; refs missing from states are absent."""
    mac = hmac.new(key, canonical_encoding(consumed, states), hashlib.sha256)
    return f"{HASH_VERSION}-{mac.hexdigest()[:HASH_HEX_DIGITS]}"


def key_id(key: bytes) -> str:
    """A short public name of the installation key: 8 hex digits of an HMAC under it, so
    it identifies the key without revealing anything that would help to guess it."""
    return hmac.new(key, b"kube-nudge/key-id", hashlib.sha256).hexdigest()[:8]


def missing_requirements(
    consumed: Mapping[SourceRef, Consumption],
    states: Mapping[SourceRef, SourceState],
    *,
    namespace: str | None = None,
) -> list[str]:
    """Sorted problems that would stop new pods from starting or mounting their volumes.

    Sources in `namespace` are shown as `kind/name`, others as `kind/namespace/name`.
    Messages name keys, never values.
    """
    problems: list[str] = []
    for ref, consumption in consumed.items():
        state = states.get(ref, ABSENT)
        label = ref.display(namespace)
        if not state.present:
            if not consumption.optional or consumption.required_keys:
                problems.append(f"{label} not found")
            continue
        problems += [
            f"{label} has no key {key!r}"
            for key in sorted(consumption.required_keys)
            if key not in state.digests
        ]
    return sorted(problems)


def changed_keys(
    consumed: Mapping[SourceRef, Consumption],
    old_states: Mapping[SourceRef, SourceState],
    new_states: Mapping[SourceRef, SourceState],
) -> dict[SourceRef, list[str]]:
    """Consumed keys whose digest differs (added, removed or changed), per source.

    A source that appeared or disappeared is listed even when no key differs.
    """
    changes: dict[SourceRef, list[str]] = {}
    for ref in sorted(consumed):
        old_state, new_state = old_states.get(ref, ABSENT), new_states.get(ref, ABSENT)
        old = consumed_digests(consumed[ref], old_state)
        new = consumed_digests(consumed[ref], new_state)
        keys = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
        if keys or old_state.present != new_state.present:
            changes[ref] = keys
    return changes


def _count(n: int) -> bytes:
    return struct.pack(">Q", n)


def _field(data: bytes) -> bytes:
    return _count(len(data)) + data


def _text(text: str) -> bytes:
    return _field(text.encode("utf-8", "surrogatepass"))
