"""What a Secret value leaking looks like: the planted canaries, their base64 text (what
the API serves), and unkeyed digests of either (a digest of a low-entropy value gives the
value away as surely as the value), which conftest and the leak tests search for. A config
hash made under a key anyone knows (all zeros) is an unkeyed digest too: the leak tests add
those of the workloads they plant (``add_public_key_hashes``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable

from kube_nudge_dev.manifests import CANARY, CANARY_NEXT

_DIGESTS: dict[str, Callable[[bytes], bytes]] = {
    "sha256": lambda data: hashlib.sha256(data).digest(),
    "sha1": lambda data: hashlib.sha1(data, usedforsecurity=False).digest(),
    "md5": lambda data: hashlib.md5(data, usedforsecurity=False).digest(),
    "sha512": lambda data: hashlib.sha512(data).digest(),
    "sha3-256": lambda data: hashlib.sha3_256(data).digest(),
    "blake2b": lambda data: hashlib.blake2b(data).digest(),
    "blake2s": lambda data: hashlib.blake2s(data).digest(),
    # The per-key digests kube-nudge keeps in memory (kube_nudge.model.digests).
    "blake2b-128 data": lambda data: hashlib.blake2b(
        data, digest_size=16, person=b"kube-nudge:data"
    ).digest(),
    "blake2b-128 bin": lambda data: hashlib.blake2b(
        data, digest_size=16, person=b"kube-nudge:bin"
    ).digest(),
}


def needles_of(value: str) -> dict[str, str]:
    """{what it is: the text} for ``value``: itself, its base64, and for both the first 12
    hex digits and the base64 of each unkeyed digest."""
    forms = {"value": value, "base64": base64.b64encode(value.encode()).decode()}
    found = dict(forms)
    for form, text in forms.items():
        for name, digest in _DIGESTS.items():
            raw = digest(text.encode())
            found[f"{name} of the {form} (hex)"] = raw.hex()[:12]
            found[f"{name} of the {form} (base64)"] = base64.b64encode(raw).decode()[:16]
    return found


#: Every needle of every planted value.
NEEDLES: dict[str, str] = {
    f"{which}: {what}": text
    for which, value in (("canary", CANARY), ("next canary", CANARY_NEXT))
    for what, text in needles_of(value).items()
}


#: A key anyone could use: a config hash under it can be recomputed for guessed values.
PUBLIC_KEY = bytes(32)


def add_public_key_hashes(hashes: dict[str, str]) -> None:
    """Search every output, from now to the session's end, for ``hashes`` ({what: config
    hash under ``PUBLIC_KEY``} of a workload consuming a canary)."""
    NEEDLES.update({f"public-key config hash of {what}": h for what, h in hashes.items()})


def leaks(texts: Iterable[str]) -> list[str]:
    """The needles (by what they are) found in any of ``texts``."""
    joined = "\n".join(texts)
    return [what for what, needle in NEEDLES.items() if needle in joined]
