"""What the API client needs from HTTP, and the adapter for an httpx2 client.

``KubeClient`` speaks to the API server through a ``Transport``: one request with its whole
body, or a streamed response read line by line (watches). The product's transport is
``kube.aiotransport.AiohttpTransport`` (why: README, "The HTTP client"); ``HttpxTransport``
wraps any ``httpx2.AsyncClient``, so a caller with its own (a test's mock transport, a
proxy) can still hand one to ``KubeClient``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx2 as httpx

Params = Mapping[str, str | int] | None


class TransportError(Exception):
    """The request never got an answer: connect failure, reset, timeout. ``kind`` names it
    the way a person searches for it (``ConnectError``, ``ReadTimeout``)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class StreamTimeout(TransportError):
    """No byte arrived on a streamed response within its read timeout."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole response: status, headers (case-insensitive mapping), body."""

    status: int
    headers: Mapping[str, str]
    content: bytes


@dataclass(frozen=True, slots=True)
class Stream:
    """A streamed response: status and headers first, then the body: ``read()`` the rest at
    once (an error's Status), or ``lines()`` without their newline (``StreamTimeout`` when it
    goes silent)."""

    status: int
    headers: Mapping[str, str]
    read: Callable[[], Awaitable[bytes]]
    lines: Callable[[], AsyncIterator[bytes]]


class Transport(Protocol):
    """HTTP to one API server with the kubeconfig's TLS, credentials and user agent."""

    @property
    def server(self) -> str:
        """``scheme://host:port`` of the API server, for messages."""
        ...

    async def request(
        self, method: str, path: str, params: Params, content: bytes | None,
        headers: Mapping[str, str],
    ) -> Reply:  # fmt: skip
        """One request; ``TransportError`` when no answer came."""
        ...

    def stream(
        self, method: str, path: str, params: Params, read_timeout: float
    ) -> contextlib.AbstractAsyncContextManager[Stream]:
        """A request whose answer is read as it arrives, silent at most ``read_timeout``."""
        ...

    def sibling(self, connections: int) -> Transport:
        """A transport to the same server on its own, at most ``connections`` connections
        (one that cannot have its own pool returns itself)."""
        ...

    async def aclose(self) -> None:
        """Close the connections (idempotent)."""
        ...


async def _httpx_lines(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for line in response.aiter_lines():
            yield line.encode()
    except httpx.ReadTimeout:
        raise StreamTimeout("ReadTimeout") from None
    except httpx.HTTPError as exc:
        raise TransportError(type(exc).__name__, str(exc)) from None


class HttpxTransport:
    """A ``Transport`` over an ``httpx2.AsyncClient`` (its base URL, auth and headers)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    @property
    def server(self) -> str:
        """The client's base URL without its path."""
        url = self.http.base_url
        return f"{url.scheme}://{url.netloc.decode()}"

    async def request(
        self, method: str, path: str, params: Params, content: bytes | None,
        headers: Mapping[str, str],
    ) -> Reply:  # fmt: skip
        """One request through the httpx2 client."""
        try:
            response = await self.http.request(
                method, path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise TransportError(type(exc).__name__, str(exc)) from None
        return Reply(response.status_code, response.headers, response.content)

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, params: Params, read_timeout: float
    ) -> AsyncIterator[Stream]:
        """A streamed request through the httpx2 client."""
        timeout = httpx.Timeout(self.http.timeout.connect, read=read_timeout)
        try:
            async with self.http.stream(method, path, params=params, timeout=timeout) as response:
                lines = functools.partial(_httpx_lines, response)
                yield Stream(response.status_code, response.headers, response.aread, lines)
        except httpx.TransportError as exc:
            raise TransportError(type(exc).__name__, str(exc)) from None

    def sibling(self, connections: int) -> Transport:
        """Itself: the wrapped client has one pool."""
        return self

    async def aclose(self) -> None:
        """Close the httpx2 client."""
        await self.http.aclose()
