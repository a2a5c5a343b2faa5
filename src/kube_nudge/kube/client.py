"""Raw-JSON asyncio client for the Kubernetes API.

``kube.kubeconfig`` reads the kubeconfig or in-cluster config, ``kube.credentials`` turns
its user into a header (tokens, token files, exec plugins); the HTTP is aiohttp's
(``kube.aiotransport``; why: docs/design.md, "The HTTP client"). We talk JSON
directly, parsed with orjson into plain dicts, because typed models cost memory and CPU on
every watch event and we keep only projections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import orjson

from kube_nudge import __version__
from kube_nudge.kube.aiotransport import AiohttpTransport
from kube_nudge.kube.credentials import CredentialsError, credentials_for
from kube_nudge.kube.kubeconfig import KubeconfigError, load_kubeconfig, reason, tls_context
from kube_nudge.kube.ratelimit import RateLimiter
from kube_nudge.kube.transport import StreamTimeout, Transport, TransportError

__all__ = [
    "ApiError",
    "ClientOptions",
    "KubeClient",
    "KubeconfigError",
    "load_kubeconfig",
]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_RETRYABLE = {429, 500, 502, 503, 504}


class ApiError(Exception):
    """A non-2xx answer from the API server (never carries request bodies)."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.method = ""
        """The request's method and path (without the query), when a request raised it:
        what a person needs to know to fix a 403."""
        self.path = ""

    @property
    def not_found(self) -> bool:
        """True for 404."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """True for 409 (conflict or already exists)."""
        return self.status == 409

    @property
    def gone(self) -> bool:
        """True for 410: the resourceVersion is too old, re-list."""
        return self.status == 410


def _api_error(status: int, body: bytes, headers: Mapping[str, str]) -> ApiError:
    reason, message = "", body[:200].decode(errors="replace")
    try:
        status_obj = orjson.loads(body)
        reason = str(status_obj.get("reason", ""))
        message = str(status_obj.get("message", ""))[:500]
    except (orjson.JSONDecodeError, AttributeError):
        pass
    retry_after = None
    if "retry-after" in headers:
        try:
            retry_after = float(headers["retry-after"])
        except ValueError:
            retry_after = 1.0
    return ApiError(status, reason, message, retry_after)


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Tuning of the client: write rate and retries."""

    write_qps: float = 500.0
    write_burst: int = 1000
    event_qps: float = 50.0
    event_burst: int = 200
    max_retries: int = 5
    timeout: float = 30.0
    event_yield: float = 5.0
    """Longest an Event waits for the client's other writes to drain (see ``writes_drained``)."""
    event_connections: int = 2
    """Connections of the Events' own pool: Event POSTs never take a rollout's connection,
    and at most this many are at the API server at once."""


class KubeClient:
    """A small async client: JSON in, JSON out, with a client-side write rate and retries.

    ``http`` is a ``Transport``: ``from_config`` builds aiohttp's; the unit tests wrap an
    ``httpx2.AsyncClient`` (``tests/unit/httpx_support.py``)."""

    def __init__(self, http: Transport, options: ClientOptions | None = None) -> None:
        self.http = http
        self.options = options or ClientOptions()
        self.event_http = self.http.sibling(self.options.event_connections)
        """Where Events go: a pool of their own (see ``ClientOptions.event_connections``)."""
        self._write_limiter = RateLimiter(self.options.write_qps, self.options.write_burst)
        # Events get their own, smaller budget so that they never delay a rollout.
        self.event_limiter = RateLimiter(self.options.event_qps, self.options.event_burst)
        self.default_namespace = "default"
        # A 429's Retry-After holds every later request of this client, not only the retry:
        # API priority and fairness throttles per client, and a re-queued reconcile or
        # another worker must not hammer a server that asked us to wait.
        self._hold_until = 0.0
        # Writes other than Events in flight. On a small control plane an Event POST costs
        # the API server and etcd as much as a rollout's PATCH; in a fan-out of 1,000 they
        # doubled the writes competing with the rollouts (see BENCHMARKS.md, fan-out).
        self._writes_in_flight = 0
        self._writes_drained = asyncio.Event()
        self._writes_drained.set()

    async def writes_drained(self, timeout: float | None = None) -> None:
        """Wait until no write but Events is in flight, at most ``timeout`` seconds
        (default ``ClientOptions.event_yield``): Events go after rollouts, never before."""
        if self._writes_drained.is_set():
            return
        wait = self.options.event_yield if timeout is None else timeout
        # asyncio.timeout, not wait_for: no task of its own for each of a fan-out's Events.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._writes_drained.wait()

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | Path | None = None,
        *,
        context: str | None = None,
        options: ClientOptions | None = None,
        user_agent: str = f"kube-nudge/{__version__}",
    ) -> Self:
        """Build from a kubeconfig file, ``$KUBECONFIG``/``~/.kube/config``, or in-cluster.
        ``KubeconfigError`` (one line naming the file) when none of them is usable."""
        options = options or ClientOptions()
        config = load_kubeconfig(kubeconfig, context)
        try:
            _check_server(config.cluster.server)
            tls = tls_context(config)
            credentials = credentials_for(config)
            http = AiohttpTransport(
                config.cluster.server, tls, credentials, user_agent=user_agent,
                timeout=options.timeout,
            )  # fmt: skip
        except OSError as exc:
            named = exc.filename or "a certificate or key"
            why = exc.strerror or reason(exc)
            raise KubeconfigError(
                f"{config.where}: cannot read a file it names ({named}): {why}"
            ) from None
        except (ValueError, TypeError) as exc:
            # Certificates that do not load (ssl.SSLError is an OSError with no file),
            # a server that is not a URL, a kind of credentials not supported.
            raise KubeconfigError(f"{config.where}: {reason(exc)}") from None
        client = cls(http, options)
        client.default_namespace = config.namespace
        return client

    @property
    def server(self) -> str:
        """``scheme://host:port`` of the API server, for messages."""
        return self.http.server

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self.http.aclose()
        if self.event_http is not self.http:
            await self.event_http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        limiter: RateLimiter | None = None,
        accept: str = "application/json",
        retry_throttled: bool = True,
    ) -> JSON:
        """One API call with retries on 429/5xx (honouring Retry-After); returns parsed JSON.

        Writes wait for the client-side write budget (or for ``limiter`` if given). With
        ``retry_throttled=False`` a 429 is raised at once and holds no later request: the
        Eviction API answers 429 when a PodDisruptionBudget refuses, a verdict on one pod,
        not a throttle on this client."""
        if limiter is None and method != "GET":
            self._writes_in_flight += 1
            self._writes_drained.clear()
            try:
                return await self._request(
                    method, path, params, body, content_type, self._write_limiter, accept,
                    retry_throttled,
                )  # fmt: skip
            finally:
                self._writes_in_flight -= 1
                if not self._writes_in_flight:
                    self._writes_drained.set()
        return await self._request(
            method, path, params, body, content_type, limiter, accept, retry_throttled
        )

    async def _request(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        body: Any,
        content_type: str,
        limiter: RateLimiter | None,
        accept: str,
        retry_throttled: bool,
    ) -> JSON:
        content = None if body is None else orjson.dumps(body)
        # Events on their own pool: a fan-out's PATCHes never wait for a connection an
        # Event POST holds, and few Events reach the API server at once.
        http = self.event_http if limiter is self.event_limiter else self.http
        headers = {"Accept": accept}
        if content is not None:
            headers["Content-Type"] = content_type
        attempt = 0
        while True:
            if limiter is not None:
                await limiter.acquire()
            hold = self._hold_until - time.monotonic()
            if hold > 0:
                await asyncio.sleep(hold)
            try:
                response = await http.request(method, path, params, content, headers)
            except TransportError as exc:
                if attempt >= self.options.max_retries:
                    # Name the server: "ConnectError" alone doesn't say which kubeconfig
                    # entry or address is wrong.
                    detail = f"{exc.kind} talking to {self.server}"
                    error = ApiError(0, "TransportError", detail)
                    error.method, error.path = method, path
                    raise error from None
                attempt += 1
                await asyncio.sleep(min(0.1 * 2**attempt, 5.0))
                continue
            except CredentialsError as exc:
                # An exec plugin that is missing or fails, a token file that is gone (read
                # at first use, on a 401 and, for a plugin's token, when it expires).
                raise KubeconfigError(f"the kubeconfig's credentials: {exc}") from None
            if response.status < 300:
                return orjson.loads(response.content) if response.content else {}
            error = _api_error(response.status, response.content, response.headers)
            error.method, error.path = method, path
            throttled = error.status == 429
            if throttled and not retry_throttled:
                raise error
            if throttled and error.retry_after is not None:
                until = time.monotonic() + min(error.retry_after, 30.0)
                self._hold_until = max(self._hold_until, until)
            if response.status not in _RETRYABLE or attempt >= self.options.max_retries:
                raise error
            attempt += 1
            delay = error.retry_after if error.retry_after is not None else 0.1 * 2**attempt
            log.debug("retrying %s %s after %s in %.2fs", method, path, error.status, delay)
            await asyncio.sleep(min(delay, 30.0))

    async def get(self, path: str, **params: str | int) -> JSON:
        """GET one object or collection."""
        return await self.request("GET", path, params=params or None)

    async def create(self, path: str, body: JSON) -> JSON:
        """POST a new object to a collection path."""
        return await self.request("POST", path, body=body)

    async def list_pages(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        limit: int = 500,
        metadata_only: bool = False,
    ) -> AsyncIterator[tuple[list[JSON], str]]:
        """Yield (items, list resourceVersion) page by page, so big lists never sit in memory.
        With ``metadata_only`` the server sends each item's metadata alone (never a
        Secret's data): PartialObjectMetadataList."""
        accept = METADATA_LIST if metadata_only else "application/json"
        continue_token = ""  # nosec B105 # a list continue token, not a credential
        while True:
            query: dict[str, str | int] = {**(params or {}), "limit": limit}
            if continue_token:
                query["continue"] = continue_token
            page = await self.request("GET", path, params=query, accept=accept)
            metadata = page.get("metadata") or {}
            yield page.get("items") or [], str(metadata.get("resourceVersion", ""))
            continue_token = metadata.get("continue") or ""
            if not continue_token:
                return

    async def watch(
        self,
        path: str,
        params: Mapping[str, str | int] | None = None,
        *,
        resource_version: str,
        timeout_seconds: int = 300,
        inactivity_timeout: float = 90.0,
    ) -> AsyncIterator[JSON]:
        """Stream watch events from ``resource_version`` (with bookmarks) until the server
        closes the stream. Raises ``ApiError`` (410 for an expired version) and
        ``TimeoutError`` when no byte arrives for ``inactivity_timeout`` seconds."""
        query: dict[str, str | int] = {
            **(params or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        async with self.http.stream("GET", path, query, inactivity_timeout) as response:
            if response.status >= 300:
                raise _api_error(response.status, await response.read(), response.headers)
            try:
                async for line in response.lines():
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise ApiError(
                            int(status.get("code") or 500),
                            str(status.get("reason", "")),
                            str(status.get("message", ""))[:500],
                        )
                    yield event
            except StreamTimeout:
                raise TimeoutError(
                    f"watch {path}: no data for {inactivity_timeout:.0f} s"
                ) from None


def _check_server(server: str) -> None:
    """``ValueError`` unless ``server`` is an http(s) URL with a host."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the server {server!r} is not an http(s) URL")
