"""Per-key digests of a ConfigMap or Secret: what the controller keeps instead of payloads.

Each value is digested with 16-byte BLAKE2b, personalised differently for `data` and
`binaryData` so that the same text under either field digests differently. Digests are
unkeyed so they are stable across restarts; they stay in memory and are never written
anywhere, the workload annotation is an HMAC over them (see `hashing`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = ["DIGEST_SIZE", "Digest", "key_digests", "value_digest"]

Digest = bytes
"""A 16-byte BLAKE2b digest of one value."""

DIGEST_SIZE = 16

_DATA = b"kube-nudge:data"
_BINARY = b"kube-nudge:bin"
# Kubernetes forbids a key in both fields; if it happens anyway both values count.
_BOTH = b"kube-nudge:both"


def value_digest(value: str, *, binary: bool = False) -> Digest:
    """Digest of one value as given (Secret data and binaryData are base64 text)."""
    return _blake(value.encode("utf-8", "surrogatepass"), _BINARY if binary else _DATA)


def key_digests(obj: Mapping[str, Any]) -> dict[str, Digest]:
    """Digest of every key of `data` and `binaryData`, sorted by key. Never raises.

    Entries that are not string-to-string are skipped.
    """
    source: object = obj  # callers pass raw JSON: check rather than trust the hint
    if not isinstance(source, Mapping):
        return {}
    digests = {key: value_digest(value) for key, value in _entries(source.get("data"))}
    for key, value in _entries(source.get("binaryData")):
        digest = value_digest(value, binary=True)
        previous = digests.get(key)
        digests[key] = digest if previous is None else _blake(previous + digest, _BOTH)
    return {key: digests[key] for key in sorted(digests)}


def _entries(field: object) -> list[tuple[str, str]]:
    if not isinstance(field, Mapping):
        return []
    return [(k, v) for k, v in field.items() if isinstance(k, str) and isinstance(v, str)]


def _blake(payload: bytes, person: bytes) -> Digest:
    return hashlib.blake2b(payload, digest_size=DIGEST_SIZE, person=person).digest()
