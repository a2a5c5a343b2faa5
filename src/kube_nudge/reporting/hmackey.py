"""The per-installation HMAC key that makes config hashes unguessable.

Kept in a Secret the controller creates on first start (or read from a file given by
flag), so every replica and every restart computes the same hashes.

In the reporting layer because only the app uses it: ``run`` reads or creates it at start,
and the read-only commands read it (``app/flags.py``) to compare hashes, which they may do
without importing the controller. The controller itself is handed the key's bytes.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import SECRETS
from kube_nudge.model.annotations import IGNORE

KEY_FIELD = "hmac-key"
KEY_BYTES = 32
THROWAWAY_KEY = secrets.token_bytes(KEY_BYTES)
"""A key no one knows, new in every process: stands in for the installation key where the
hashes made need not match a record (they are only compared with each other, here). A hash
under it can't be checked against a guessed value, as one under a public key (all zeros,
say) could: a Secret's low-entropy value would be as good as shown."""


def read_key_file(path: Path) -> bytes:
    """Read a key file (raw bytes, at least 16); raises ValueError without showing it."""
    key = path.read_bytes().strip()
    if len(key) < 16:
        raise ValueError(f"{path}: an HMAC key needs at least 16 bytes")
    return key


async def load_or_create_key(client: KubeClient, namespace: str, name: str) -> bytes:
    """Return the key stored in Secret ``namespace/name``, creating it if missing."""
    path = SECRETS.path(namespace, name)
    for _ in range(3):
        try:
            secret = await client.get(path)
        except ApiError as exc:
            if not exc.not_found:
                raise
        else:
            encoded = (secret.get("data") or {}).get(KEY_FIELD)
            if not encoded:
                raise ValueError(f"secret {namespace}/{name} has no {KEY_FIELD!r} key")
            return base64.b64decode(encoded)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "kube-nudge"},
                "annotations": {IGNORE: "true"},
            },
            "data": {KEY_FIELD: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()},
        }
        try:
            await client.create(SECRETS.path(namespace), body)
        except ApiError as exc:
            if not exc.conflict:  # 409: another replica created it first; read theirs
                raise
    raise RuntimeError(f"could not read or create secret {namespace}/{name}")
