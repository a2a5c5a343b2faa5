"""The reload agent's wire protocol: what the ``kube-nudge agent`` sidecar writes on its pod,
and the keyed hash in it. The agent writes it (``kube_nudge.agent``) and strategy ``hot``
reads it (``kube_nudge.strategies.hot``): both take it from here, the standard library only
so the lean agent may import it (an import-linter contract keeps it so).

- On its pod, after each reload, the agent writes ``LOADED_HASH`` (the claim below) and
  ``LOADED_AT``; after a failed one ``RELOAD_FAILED_AT``. Times are Unix seconds with
  millisecond precision (``format_time``, ``parse_time``).
- The key: field ``AGENT_KEY_FIELD`` of the Secret ``AGENT_KEY_SECRET`` in the pod's
  namespace, mounted into the agent, surrounding whitespace dropped, ``MIN_KEY_BYTES`` or
  more (``usable_key``). Its public name (``key_id``): the first 8 hex digits of
  HMAC-SHA256(key, ``KEY_ID_DOMAIN``).
- A directory's hash, version 2 (``directory_hash``): HMAC-SHA256 under the key over
  ``HASH_DOMAIN`` and then, for each file in the order of its path's bytes, the path as a
  field (8 bytes big-endian length, then the bytes) and the 32-byte SHA-256 of its content.
- The claim (``format_claim``, ``parse_claim``): the JSON ``{"dirs": {DIR: HASH or null},
  "key": KEY_ID}`` (null: the directory was missing), compact, keys sorted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "AGENT_KEY_FIELD",
    "AGENT_KEY_SECRET",
    "HASH_DOMAIN",
    "KEY_ID_DOMAIN",
    "LOADED_AT",
    "LOADED_HASH",
    "MIN_KEY_BYTES",
    "RELOAD_FAILED_AT",
    "Claim",
    "directory_hash",
    "format_claim",
    "format_time",
    "key_id",
    "parse_claim",
    "parse_time",
    "usable_key",
]

LOADED_HASH: Final = "kube-nudge.io/loaded-hash"
LOADED_AT: Final = "kube-nudge.io/loaded-at"
RELOAD_FAILED_AT: Final = "kube-nudge.io/reload-failed-at"

#: The Secret, in each namespace whose pods run the agent, with the agents' HMAC key (at
#: ``AGENT_KEY_FIELD``); the agent's container mounts it.
AGENT_KEY_SECRET: Final = "kube-nudge-agent-key"  # noqa: S105  # nosec B105 # a name, not a key
AGENT_KEY_FIELD: Final = "key"
MIN_KEY_BYTES: Final = 16

HASH_DOMAIN: Final = b"kube-nudge-agent/v2\n"
KEY_ID_DOMAIN: Final = b"kube-nudge-agent/key-id"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX8 = re.compile(r"[0-9a-f]{8}")


def usable_key(raw: bytes) -> bytes | None:
    """The key in a key file's (or the Secret field's) bytes: surrounding whitespace
    dropped; None when shorter than ``MIN_KEY_BYTES``."""
    key = raw.strip()
    return key if len(key) >= MIN_KEY_BYTES else None


def key_id(key: bytes) -> str:
    """A key's public name: 8 hex digits of an HMAC under it (nothing that helps to guess
    the key)."""
    return hmac.new(key, KEY_ID_DOMAIN, hashlib.sha256).hexdigest()[:8]


def directory_hash(key: bytes, files: Iterable[tuple[bytes, bytes]]) -> str:
    """The keyed hash of a directory as hex; ``files``: (path relative to the directory as
    bytes, SHA-256 of its content) of each file, in the order of the paths' bytes."""
    mac = hmac.new(key, HASH_DOMAIN, hashlib.sha256)
    for name, content_digest in files:
        mac.update(len(name).to_bytes(8, "big") + name)
        mac.update(content_digest)
    return mac.hexdigest()


@dataclass(frozen=True, slots=True)
class Claim:
    """What an agent says it loaded: its key's id, and each watched directory's hash
    (None: the directory was missing)."""

    key_id: str
    dirs: Mapping[str, str | None]


def format_claim(dirs: Mapping[str, str | None], key_name: str) -> str:
    """The value of ``LOADED_HASH`` for directory hashes ``dirs`` under the key ``key_name``."""
    return json.dumps({"dirs": dict(dirs), "key": key_name}, sort_keys=True, separators=(",", ":"))


def parse_claim(value: object) -> Claim | None:
    """A ``LOADED_HASH`` value, or None if absent or not this version's."""
    if not isinstance(value, str):
        return None
    try:
        raw = json.loads(value)
    except ValueError:
        return None
    if not isinstance(raw, dict) or set(raw) != {"dirs", "key"}:
        return None
    key_name, dirs = raw["key"], raw["dirs"]
    if not isinstance(key_name, str) or not _HEX8.fullmatch(key_name):
        return None
    if not isinstance(dirs, dict):
        return None
    if not all(isinstance(d, str) and d.startswith("/") and _is_hash(h) for d, h in dirs.items()):
        return None
    return Claim(key_name, dict(dirs))


def _is_hash(value: object) -> bool:
    return value is None or (isinstance(value, str) and _HEX64.fullmatch(value) is not None)


def format_time(at: float) -> str:
    """A time the agent writes on its pod (``LOADED_AT``, ``RELOAD_FAILED_AT``)."""
    return f"{at:.3f}"


def parse_time(value: object) -> float | None:
    """A time the agent wrote on its pod (Unix seconds); None if absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) else None
