"""A lean informer: the initial state streamed by a watch (or paginated lists), then watch
with bookmarks, keeping only projections.

Why our own and not a library's: the Python informers available (kubernetes' SharedInformer,
kopf) keep every full object and list without pagination, so memory grows with Secret sizes.
Here each object is reduced by ``project`` the moment it is parsed; the full object is dropped
at once (see docs/design.md, "The informer", for the measurement).

The initial state comes as a *streaming list* (KEP-3157, on by default in Kubernetes 1.34+,
as client-go's informers do): one watch with ``sendInitialEvents=true`` delivers every object
as an ADDED event, then a bookmark marked ``k8s.io/initial-events-end``, then the changes. No
LIST request at all (a restart of kube-nudge on the api-cost scenario's objects went from 11
requests to 1, see docs/design.md), and one object at a time is the most ever held instead of a page
of 500 (a 500-Secret page of 10 KiB values is 7 MB of body plus its parsed objects). A server
that refuses it (the feature gate off: 400/422) or ignores it (no end marker before its first
bookmark) gets the paginated list, for this informer's lifetime.

Semantics follow client-go's reflector: list → watch from the list's resourceVersion → on a
normal close resume from the last seen version (bookmarks keep it fresh) → on 410 Gone, or a
stream silent for longer than the watchdog allows, re-list and emit the difference.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.resources import Resource
from kube_nudge.kube.transport import TransportError

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = tuple[str, str]  # (namespace, name)

#: handler(key, old projection or None, new projection or None); None/None never happens.
Handler = Callable[[Key, T | None, T | None], None]

#: The annotation of the bookmark that ends a streaming list's initial events.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: Why a watch restarts (``on_restart``'s argument): its resourceVersion expired (410), it
#: failed, or it stayed silent past the watchdog. A normal close is resumed, not a restart.
RESTART_REASONS = ("expired", "error", "silent")
#: What a server without streaming lists answers ``sendInitialEvents`` with.
_NO_STREAMING = frozenset({400, 422})


class StreamingUnsupported(Exception):
    """The server sent a plain bookmark before the end of the initial events: it ignored
    ``sendInitialEvents`` (a server before Kubernetes 1.27)."""


@dataclass(frozen=True, slots=True)
class InformerConfig:
    """Scope and timing of one informer."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    page_size: int = 500
    stream_list: bool = True  # the initial state by a streaming list (see module docstring)
    watch_timeout: int = 300  # the server closes the watch after about this many seconds
    inactivity_timeout: float = 90.0  # watchdog: bookmarks arrive about once a minute


class Informer(Generic[T]):
    """Keeps ``store`` (key → projection) in step with one resource collection."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        project: Callable[[JSON], T | None],
        handler: Handler[T],
        config: InformerConfig | None = None,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        """``on_restart`` is called with one of ``RESTART_REASONS`` at each restart."""
        self.client = client
        self.resource = resource
        self.project = project
        self.handler = handler
        self.config = config or InformerConfig()
        self.on_restart = on_restart or (lambda reason: None)
        self.store: dict[Key, T] = {}
        self.synced = asyncio.Event()
        self.refused = asyncio.Event()
        """Set while the API server refuses it (403: RBAC grants no list or watch); cleared
        once a list succeeds. For a reader that must say why, not wait (the templates)."""
        self.resource_version = ""
        self._streaming = self.config.stream_list
        self._initial: set[Key] | None = None  # keys seen so far in a streaming list
        self._need_list = True  # until the current state is in (again)

    def _params(self) -> dict[str, str | int]:
        params: dict[str, str | int] = {}
        if self.config.label_selector:
            params["labelSelector"] = self.config.label_selector
        if self.config.field_selector:
            params["fieldSelector"] = self.config.field_selector
        return params

    @staticmethod
    def _key(obj: JSON) -> Key:
        metadata = obj.get("metadata") or {}
        # One string per namespace, not one per cached object (58 bytes each, 15,200 times
        # in the memory scenario).
        return sys.intern(str(metadata.get("namespace") or "")), str(metadata.get("name") or "")

    def _apply(self, key: Key, new: T | None) -> None:
        old = self.store.get(key)
        if new is None:
            if key not in self.store:
                return
            del self.store[key]
        else:
            self.store[key] = new
            if old == new:
                return
        try:
            self.handler(key, old, new)
        except Exception:
            # A handler bug must not stop the cache for every other object.
            log.exception("handling %s %s/%s failed", self.resource, *key)

    async def _list(self) -> None:
        path = self.resource.path(self.config.namespace)
        seen: set[Key] = set()
        resource_version = ""
        async for items, page_version in self.client.list_pages(
            path, self._params(), limit=self.config.page_size
        ):
            resource_version = page_version
            for obj in items:
                key = self._key(obj)
                seen.add(key)
                self._apply(key, self.project(obj))
            del items  # the page's full objects go now, before the next page arrives
        for key in [k for k in self.store if k not in seen]:
            self._apply(key, None)  # deleted while we were not watching
        self.resource_version = resource_version
        self._need_list = False
        self.refused.clear()
        self.synced.set()

    def _initial_events_ended(self, resource_version: str) -> None:
        """A streaming list is complete: what it did not bring was deleted meanwhile."""
        seen, self._initial = self._initial or set(), None
        for key in [k for k in self.store if k not in seen]:
            self._apply(key, None)
        self.resource_version = resource_version
        self._need_list = False
        self.refused.clear()
        self.synced.set()

    async def _watch(self, *, initial: bool = False) -> None:
        """Follow changes from ``resource_version``; with ``initial``, first stream every
        object (a streaming list: ``resource_version`` is then empty, a consistent read)."""
        path = self.resource.path(self.config.namespace)
        params = self._params()
        if initial:
            params |= {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
            self._initial = set()
            self.resource_version = ""
        # Spread reconnects like client-go does, so many informers never re-list together.
        timeout = int(self.config.watch_timeout * (1 + random.random()))  # noqa: S311  # nosec B311 # reconnect jitter, not a secret
        async for event in self.client.watch(
            path,
            params,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            inactivity_timeout=self.config.inactivity_timeout,
        ):
            obj = event.get("object") or {}
            metadata = obj.get("metadata") or {}
            version = metadata.get("resourceVersion")
            kind = event.get("type")
            if kind != "BOOKMARK":
                key = self._key(obj)
                if self._initial is not None:
                    self._initial.add(key)
                self._apply(key, None if kind == "DELETED" else self.project(obj))
            elif self._initial is not None:
                if (metadata.get("annotations") or {}).get(INITIAL_EVENTS_END) != "true":
                    raise StreamingUnsupported
                self._initial_events_ended(str(version or ""))
                continue
            if version and self._initial is None:
                self.resource_version = str(version)
        self._initial = None  # closed before the end of a streaming list: it starts again

    async def _fill(self) -> None:
        """Take in the current state: a streaming list if the server has them, which goes
        straight on as the watch; else paginated lists, then the watch."""
        if self._streaming:
            try:
                await self._watch(initial=True)
                return
            except ApiError as exc:
                if exc.status not in _NO_STREAMING:
                    raise
                log.info("%s: no streaming lists (%s); listing in pages", self.resource, exc)
            except StreamingUnsupported:
                log.info("%s: streaming lists ignored by the server; listing in pages",
                         self.resource)  # fmt: skip
            self._streaming = False
            self._initial = None
        await self._list()
        await self._watch()

    async def run(self) -> None:
        """List and watch forever; cancel the task to stop."""
        backoff = 0.1
        while True:
            try:
                if self._need_list:
                    await self._fill()
                else:
                    await self._watch()
                backoff = 0.1  # a normal close: resume from the last version
            except ApiError as exc:
                if exc.gone:
                    log.info("watch %s: resourceVersion expired, re-listing", self.resource)
                    self.on_restart("expired")
                    self._need_list = True
                    continue
                log.warning("watch %s failed: %s", self.resource, exc)
                self.on_restart("error")
                if exc.status == 403:
                    self.refused.set()
                self._need_list = self._need_list or exc.status in (0, 403, 404)
            except TransportError as exc:
                log.warning("watch %s connection failed: %s", self.resource, exc.kind)
                self.on_restart("error")
            except TimeoutError:
                log.warning("watch %s silent for %.0f s, re-listing", self.resource,
                            self.config.inactivity_timeout)  # fmt: skip
                self.on_restart("silent")
                self._need_list = True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
