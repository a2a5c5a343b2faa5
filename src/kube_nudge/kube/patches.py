"""The one place kube-nudge sends a PATCH: every change it makes to an object it reads is a
``Patch``, described as data (which object, the patch, its type, as which field manager),
and ``send`` is the only code that turns one into a request (a unit test holds that). The
preconditions a patch needs travel in its body, where the API server checks them: a merge
patch's ``metadata.uid`` / ``metadata.resourceVersion``, a JSON patch's ``test`` operations.

Writes that are no patch (creating an Event, a copy, a Lease) and the reload agent's write
of its own pod (a separate, standard-library-only process) are not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.ratelimit import RateLimiter

__all__ = ["FIELD_MANAGER", "Patch", "PatchType", "send"]

FIELD_MANAGER = "kube-nudge"
"""Who kube-nudge's writes are by, in every object's ``managedFields``."""


class PatchType(StrEnum):
    """How the API server applies a patch (its Content-Type)."""

    MERGE = "application/merge-patch+json"
    """RFC 7386: maps merged key by key, ``null`` deletes, lists replaced."""
    JSON = "application/json-patch+json"
    """RFC 6902: a list of operations, ``test`` ones as preconditions."""


@dataclass(frozen=True, slots=True)
class Patch:
    """A change of one object, as data."""

    path: str
    """The object's REST path."""
    body: Any
    """A merge patch (a mapping) or JSON patch operations (a list)."""
    type: PatchType = PatchType.MERGE
    field_manager: str | None = FIELD_MANAGER
    """None: no field manager (an Event's count, which no field of ours owns)."""


async def send(client: KubeClient, patch: Patch, *, limiter: RateLimiter | None = None) -> JSON:
    """Send ``patch``; the object as the API server now has it. Errors are the client's
    (``ApiError``: 409 when a precondition failed, 404 when the object is gone)."""
    params = {"fieldManager": patch.field_manager} if patch.field_manager else None
    return await client.request(
        "PATCH", patch.path, params=params, body=patch.body, content_type=patch.type.value,
        limiter=limiter,
    )  # fmt: skip
