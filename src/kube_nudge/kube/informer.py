"""A lean informer: paginated list, then watch with bookmarks, keeping only projections.

Why our own and not a library's: the Python informers available (kubernetes' SharedInformer,
kopf) keep every full object and list without pagination, so memory grows with Secret sizes.
Here each object is reduced by ``project`` the moment it is parsed; the full object is dropped
at once, and a page of at most ``page_size`` objects is the most ever held (see README,
"Why a custom informer", for the measurement).

Semantics follow client-go's reflector: list → watch from the list's resourceVersion → on a
normal close resume from the last seen version (bookmarks keep it fresh) → on 410 Gone, or a
stream silent for longer than the watchdog allows, re-list and emit the difference.
"""

from __future__ import annotations

import asyncio
import logging
import random
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


@dataclass(frozen=True, slots=True)
class InformerConfig:
    """Scope and timing of one informer."""

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    page_size: int = 500
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
        self.client = client
        self.resource = resource
        self.project = project
        self.handler = handler
        self.config = config or InformerConfig()
        self.on_restart = on_restart or (lambda reason: None)
        self.store: dict[Key, T] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""

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
        return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")

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
        self.synced.set()

    async def _watch(self) -> None:
        path = self.resource.path(self.config.namespace)
        # Spread reconnects like client-go does, so many informers never re-list together.
        timeout = int(self.config.watch_timeout * (1 + random.random()))  # noqa: S311  # nosec B311 # reconnect jitter, not a secret
        async for event in self.client.watch(
            path,
            self._params(),
            resource_version=self.resource_version,
            timeout_seconds=timeout,
            inactivity_timeout=self.config.inactivity_timeout,
        ):
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion")
            kind = event.get("type")
            if kind != "BOOKMARK":
                key = self._key(obj)
                self._apply(key, None if kind == "DELETED" else self.project(obj))
            if version:
                self.resource_version = str(version)

    async def run(self) -> None:
        """List and watch forever; cancel the task to stop."""
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                backoff = 0.1  # a normal close: resume from the last version
            except ApiError as exc:
                if exc.gone:
                    log.info("watch %s: resourceVersion expired, re-listing", self.resource)
                    self.on_restart("expired")
                    need_list = True
                    continue
                log.warning("watch %s failed: %s", self.resource, exc)
                self.on_restart("error")
                need_list = need_list or exc.status in (0, 403, 404)
            except TransportError as exc:
                log.warning("watch %s connection failed: %s", self.resource, exc.kind)
                self.on_restart("error")
            except TimeoutError:
                log.warning("watch %s silent for %.0f s, re-listing", self.resource,
                            self.config.inactivity_timeout)  # fmt: skip
                self.on_restart("silent")
                need_list = True
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
