"""The HMAC key of the loaded hash: the namespace's agent key, else a random one.

The controller confirms a hot reload only when the hash the agent loaded is the hash of the
data it delivered, which it can compute only under a key both know: the key in the Secret
``kube-nudge-agent-key`` of the pod's namespace, which the agent's container mounts (by
default at ``DEFAULT_KEY_FILE``). Any pod of the namespace could mount that Secret anyway,
so it tells the pod nothing new; whoever reads pods elsewhere, or scrapes /metrics, sees
only HMACs under a key they don't have and can't test guesses of a Secret's values.

The key's format and public name are the wire protocol's (``kube_nudge.agentwire``).
Without the file the key is random, made at start: the hash then tells only whether the
files changed, and no controller can confirm this pod's reloads by it. The file is looked at
again on every poll: an optional Secret volume is filled once the Secret exists, and a key
can be rotated; the agent then records what it loaded under the new key.
"""

from __future__ import annotations

import logging
import os
import secrets

from kube_nudge.agentwire import AGENT_KEY_FIELD, MIN_KEY_BYTES, key_id, usable_key

log = logging.getLogger("kube_nudge.agent")

DEFAULT_KEY_FILE = f"/var/run/secrets/kube-nudge.io/agent-key/{AGENT_KEY_FIELD}"
RANDOM_KEY_BYTES = 32

_Stat = tuple[int, int, int, int]


def read_key(path: str) -> bytes:
    """The key in ``path`` without surrounding whitespace; ValueError in one line (never
    showing the key) when unreadable or shorter than 16 bytes."""
    try:
        with open(path, "rb") as f:
            key = usable_key(f.read())
    except OSError as exc:
        raise ValueError(f"{path!r}: cannot read it ({exc.strerror})") from None
    if key is None:
        raise ValueError(f"{path!r}: an HMAC key needs at least {MIN_KEY_BYTES} bytes")
    return key


def random_key() -> bytes:
    """A key for this process only."""
    return secrets.token_bytes(RANDOM_KEY_BYTES)


def _stat(path: str) -> _Stat | None:
    try:
        st = os.stat(path)  # through the kubelet's symlink into ..data
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class HashKey:
    """The key in use, and the file it may come from (``refresh`` looks at it again)."""

    def __init__(self, key: bytes, path: str | None, *, from_file: bool) -> None:
        self._key = key
        self.path = path
        self.from_file = from_file
        self.id = key_id(key)
        self._seen = None if path is None else _stat(path)
        self._refused: _Stat | None = None

    @classmethod
    def fixed(cls, key: bytes) -> HashKey:
        """A key that never changes (tests, benchmarks)."""
        return cls(key, None, from_file=False)

    @property
    def key(self) -> bytes:
        """The key itself: never logged, never shown."""
        return self._key

    def __repr__(self) -> str:
        return f"HashKey(id={self.id}, path={self.path!r}, from_file={self.from_file})"

    def refresh(self) -> bool:
        """Read the file again if it changed; whether the key is now another one."""
        if self.path is None:
            return False
        seen = _stat(self.path)
        if seen == self._seen or seen is None:
            return False  # unchanged, or gone: keep the key that was read
        self._seen = seen
        try:
            key = read_key(self.path)
        except ValueError as exc:
            if self._refused != seen:
                self._refused = seen
                log.warning("agent key %s; keeping key %s", exc, self.id)
            return False
        if key == self._key:
            return False
        self._key, self.id, self.from_file = key, key_id(key), True
        return True
