"""A ``Transport`` over an ``httpx2.AsyncClient``, for unit tests: ``KubeClient`` over an
``httpx2.MockTransport`` answers as a test says, with the client's retries, holds and error
mapping all real.

Not the product's transport (``kube.aiotransport``), and not shipped: httpx2 is a
development dependency only.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Mapping

import httpx2 as httpx

from kube_nudge.kube.transport import (
    Params,
    Reply,
    Stream,
    StreamTimeout,
    Transport,
    TransportError,
)

__all__ = ["HttpxTransport"]


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
