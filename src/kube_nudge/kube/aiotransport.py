"""kube-nudge's HTTP to the API server: aiohttp, with the kubeconfig's TLS and credentials.

Why aiohttp: a fan-out is a thousand PATCHes in a burst, and the client's CPU per request
is CPU the API server on the same small machine does not get. Measured side by side against
the local control plane (``make bench-http``; bench/httpcost.py has the figures), aiohttp
costs about a third of httpx2's CPU per PATCH (its HTTP parser is C) and comes close to the
minimal client's hand-written HTTP/1.1; docs/design.md ("The HTTP client") weighs the candidates.

``kube.kubeconfig`` gives the TLS context (CA, client certificate), ``kube.credentials`` the
credentials. Proxies from the environment are honoured as httpx2
did (``HTTPS_PROXY``, ``NO_PROXY``), looked up once, not on every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

import aiohttp

from kube_nudge.kube.credentials import Credentials
from kube_nudge.kube.transport import (
    Params,
    Reply,
    Stream,
    StreamTimeout,
    Transport,
    TransportError,
)

__all__ = ["AiohttpTransport"]

_CHUNK = 1 << 16
#: Seconds an idle connection stays in the pool. aiohttp's default (15 s) dropped the pool
#: between a workload's adoption and its first change, so a fan-out paid a TLS handshake
#: per connection (13% of kube-nudge's CPU in a fan-out of 1,000, py-spy). client-go keeps
#: idle connections 90 s, the API server's own idle timeout; a little less here, so that
#: the server is never the one to close a connection just as it is reused.
KEEPALIVE = 60.0


def _failure(exc: BaseException) -> TransportError:
    """An aiohttp failure under the name a person knows it by."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportError("ConnectError", str(exc))
    if isinstance(exc, TimeoutError):
        return TransportError("Timeout", str(exc))
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return TransportError("RemoteProtocolError", "the server closed the connection")
    return TransportError(type(exc).__name__, str(exc))


def _proxy_for(server: str) -> str | None:
    """The environment's proxy for ``server`` (``None``: direct)."""
    host = urlsplit(server).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(urlsplit(server).scheme) or None


async def _lines(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    # Not StreamReader.readline: it refuses lines over 128 KiB, and one watch event carries
    # a whole object (a ConfigMap may hold 1 MiB).
    pending = b""
    try:
        async for chunk in response.content.iter_chunked(_CHUNK):
            pending += chunk
            if b"\n" not in chunk:
                continue
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line
    except TimeoutError:
        raise StreamTimeout("ReadTimeout") from None
    except aiohttp.ClientError as exc:
        raise _failure(exc) from None
    if pending:
        yield pending


class AiohttpTransport:
    """A ``Transport`` over one ``aiohttp.ClientSession`` (its own connection pool)."""

    def __init__(
        self,
        server: str,
        tls: ssl.SSLContext,
        credentials: Credentials,
        *,
        user_agent: str,
        timeout: float,
        connections: int = 100,
    ) -> None:
        self._base = server.rstrip("/")
        self._tls = tls
        self._credentials = credentials
        self._user_agent = user_agent
        self._timeout = timeout
        self._proxy = _proxy_for(server)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections = connections
        parts = urlsplit(server)
        self._server = f"{parts.scheme}://{parts.netloc}"

    @property
    def server(self) -> str:
        """``scheme://host:port`` of the API server."""
        return self._server

    def _open(self) -> aiohttp.ClientSession:
        # Made on first use: a session belongs to the event loop it was made in (a client
        # built before asyncio.run, or used by a later one, gets a session of its own loop).
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._loop = loop
            connector = aiohttp.TCPConnector(
                ssl=self._tls, limit=self._connections, keepalive_timeout=KEEPALIVE
            )
            # ``connect`` includes the wait for a free connection of the pool.
            timeout = aiohttp.ClientTimeout(
                total=None, connect=self._timeout, sock_connect=self._timeout,
                sock_read=self._timeout,
            )  # fmt: skip
            # No cookie jar, as client-go has none: the API server sets no cookies, and
            # aiohttp's jar filtered its (empty) cookies for every request, 2% of the CPU of
            # a fan-out (py-spy).
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=timeout,
                headers={"User-Agent": self._user_agent}, cookie_jar=aiohttp.DummyCookieJar(),
            )  # fmt: skip
        return self._session

    async def _headers(self, extra: Mapping[str, str]) -> tuple[dict[str, str], int]:
        header, generation = await self._credentials.header()
        headers = dict(extra)
        if header is not None:
            headers["Authorization"] = header
        return headers, generation

    async def request(
        self, method: str, path: str, params: Params, content: bytes | None,
        headers: Mapping[str, str],
    ) -> Reply:  # fmt: skip
        """One request; on a 401 the credentials are asked again and it is sent once more."""
        session = self._open()
        query = _query(params)
        for attempt in (1, 2):
            sent, generation = await self._headers(headers)
            try:
                async with session.request(
                    method, self._base + path, params=query, data=content, headers=sent,
                    proxy=self._proxy,
                ) as response:  # fmt: skip
                    body = await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _failure(exc) from None
            if response.status == 401 and attempt == 1 and self._credentials.refreshable:
                await self._credentials.refresh(generation)
                continue
            return Reply(response.status, response.headers, body)
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, params: Params, read_timeout: float
    ) -> AsyncIterator[Stream]:
        """A streamed request, silent at most ``read_timeout`` seconds."""
        session = self._open()
        sent, generation = await self._headers({"Accept": "application/json"})
        timeout = aiohttp.ClientTimeout(
            total=None, connect=self._timeout, sock_connect=self._timeout, sock_read=read_timeout
        )
        try:
            response = await session.request(
                method, self._base + path, params=_query(params), headers=sent,
                timeout=timeout, proxy=self._proxy,
            )  # fmt: skip
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _failure(exc) from None
        try:
            if response.status == 401:
                await self._credentials.refresh(generation)
            lines = functools.partial(_lines, response)
            yield Stream(response.status, response.headers, response.read, lines)
        finally:
            if response.content.is_eof():
                response.release()  # the connection goes back to the pool
            else:
                response.close()  # left mid-stream: the connection cannot be reused

    def sibling(self, connections: int) -> Transport:
        """The same server, TLS and credentials on a pool of its own."""
        return AiohttpTransport(
            self._base, self._tls, self._credentials, user_agent=self._user_agent,
            timeout=self._timeout, connections=connections,
        )  # fmt: skip

    async def aclose(self) -> None:
        """Close the pool (a later request opens a new one)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


def _query(params: Params) -> dict[str, str] | None:
    return {k: str(v) for k, v in params.items()} if params else None
