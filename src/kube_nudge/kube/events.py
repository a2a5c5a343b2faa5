"""Kubernetes Events on workloads, with client-side de-duplication.

A repeated (object, type, reason, message) within ``dedupe_window`` bumps the count of the
existing Event instead of creating another, as kubelet's recorder does, so a workload held
for an hour produces one Event with a growing count, not hundreds.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.patches import Patch, send
from kube_nudge.kube.resources import CORE_EVENTS

log = logging.getLogger(__name__)

EventKey = tuple[str, str, str, str]
"""(the object's uid, type, reason, message): one Event, counted when it repeats."""
_MAX_MESSAGE = 1024

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


def event_key(obj: ObjectRef, event_type: str, reason: str, message: str) -> EventKey:
    """What makes two Events the same one (counted, not posted again)."""
    return (obj.uid, event_type, reason, message[:_MAX_MESSAGE])


@dataclass(slots=True)
class _Recent:
    name: str
    count: int
    at: float
    posted: bool = False
    patching: bool = False
    """A count update is in flight: repeats meanwhile ride on the next one, so one Event is
    never patched twice at once (a throttled API server then sees one request, not a burst)."""


class EventRecorder:
    """Posts core/v1 Events; messages must never contain Secret values."""

    def __init__(
        self,
        client: KubeClient,
        *,
        component: str = "kube-nudge",
        instance: str = "",
        dedupe_window: float = 600.0,
        max_remembered: int = 4096,
    ) -> None:
        self.client = client
        self.component = component
        self.instance = instance
        self.dedupe_window = dedupe_window
        self.max_remembered = max_remembered
        self._recent: OrderedDict[EventKey, _Recent] = OrderedDict()

    def _event(
        self, obj: ObjectRef, name: str, event_type: str, reason: str, message: str, now_iso: str
    ) -> dict[str, Any]:
        """A new core/v1 Event about ``obj``, counted once."""
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": obj.namespace},
            "involvedObject": {
                "apiVersion": obj.api_version,
                "kind": obj.kind,
                "namespace": obj.namespace,
                "name": obj.name,
                "uid": obj.uid,
            },
            "type": event_type,
            "reason": reason,
            "message": message,
            "count": 1,
            "firstTimestamp": now_iso,
            "lastTimestamp": now_iso,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }

    def remembers(self, key: EventKey) -> bool:
        """Whether the Event ``key`` was posted (or is being) within ``dedupe_window``."""
        recent = self._recent.get(key)
        return recent is not None and time.monotonic() - recent.at < self.dedupe_window

    async def record(
        self, obj: ObjectRef, event_type: str, reason: str, message: str,
        *, at: float | None = None,
    ) -> bool:  # fmt: skip
        """Post (or count again) one Event that happened ``at`` (``time.time()``, default
        now); False (logged) if the API refused it."""
        key = event_key(obj, event_type, reason, message)
        message = key[3]
        when = datetime.datetime.fromtimestamp(time.time() if at is None else at, datetime.UTC)
        now_iso = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        recent = self._recent.get(key)
        try:
            if recent is not None and time.monotonic() - recent.at < self.dedupe_window:
                recent.count += 1
                recent.at = time.monotonic()
                self._recent.move_to_end(key)
                if not recent.posted or recent.patching:
                    return True  # a request in flight (or the next repeat) carries the count
                recent.patching = True
                try:
                    sent = 0
                    while sent != recent.count:  # repeats during the PATCH: one more, at most
                        sent = recent.count
                        counted = {"count": sent, "lastTimestamp": now_iso}
                        path = CORE_EVENTS.path(obj.namespace, recent.name)
                        await send(self.client, Patch(path, counted, field_manager=None),
                                   limiter=self.client.event_limiter)  # fmt: skip
                finally:
                    recent.patching = False
                return True
            name = f"{obj.name}.{secrets.token_hex(8)}"
            # Reserved before the await, so concurrent repeats count instead of duplicating.
            recent = self._recent[key] = _Recent(name, 1, time.monotonic())
            while len(self._recent) > self.max_remembered:
                self._recent.popitem(last=False)
            await self.client.writes_drained()
            await self.client.request(
                "POST",
                CORE_EVENTS.path(obj.namespace),
                limiter=self.client.event_limiter,
                body=self._event(obj, name, event_type, reason, message, now_iso),
            )
            recent.posted = True
            return True
        except ApiError as exc:
            # Forget it: the next occurrence starts afresh (also when the Event expired).
            self._recent.pop(key, None)
            log.warning("could not post event %s on %s/%s: %s", reason, obj.kind, obj.name, exc)
            return False
