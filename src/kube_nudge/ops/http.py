"""The ``/metrics``, ``/healthz`` and ``/readyz`` endpoints.

A minimal HTTP/1.1 server on ``asyncio.start_server``: we avoid aiohttp, whose import alone
costs about 15 MB, for three GET routes. One request per connection, then close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from http import HTTPStatus

from kube_nudge.ops.metrics import Metrics

log = logging.getLogger(__name__)

READ_TIMEOUT = 10.0
MAX_HEAD = 8192
TEXT = "text/plain; charset=utf-8"
Response = tuple[HTTPStatus, bytes, str]


def parse_address(text: str) -> tuple[str, int]:
    """Parse ``host:port``, ``:port`` (all interfaces) or ``[v6]:port``."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"bad address {text!r}: expected host:port or :port, port 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"bad address {text!r}: write IPv6 hosts in brackets, [::1]:8080")
    # Binding all interfaces is the point of ":port": the kubelet and Prometheus reach the pod IP.
    return host or "0.0.0.0", int(port_text)  # noqa: S104  # nosec B104 # as intended, see above


class HealthServer:
    """Serves metrics and health probes until ``stop``."""

    def __init__(
        self,
        metrics: Metrics,
        *,
        host: str,
        port: int,
        ready: Callable[[], bool],
        healthy: Callable[[], bool],
    ) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._ready = ready
        self._healthy = healthy
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0), else the configured one."""
        if self._server is not None and self._server.sockets:
            return int(self._server.sockets[0].getsockname()[1])
        return self._port

    async def start(self) -> None:
        """Bind and start accepting connections."""
        self._server = await asyncio.start_server(
            self._handle, self._host, self._port, limit=MAX_HEAD
        )
        log.info("serving /metrics, /healthz, /readyz on %s:%d", self._host, self.port)

    async def stop(self) -> None:
        """Stop listening and abort requests in progress."""
        if self._server is None:
            return
        self._server.close()
        # Aborting (not cancelling) lets each handler see EOF and finish normally.
        for writer in self._connections.values():
            writer.transport.abort()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # nosec B101 # type narrowing only: inside a task
        self._connections[task] = writer
        try:
            response = await self._respond(reader)
            if response is not None:
                await self._write(writer, *response)
        except (ConnectionError, TimeoutError):
            pass  # the client went away or was too slow; nothing to answer
        finally:
            del self._connections[task]
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _respond(self, reader: asyncio.StreamReader) -> Response | None:
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, b"request head too large\n", TEXT
        except asyncio.IncompleteReadError:
            return None
        except TimeoutError:
            return HTTPStatus.REQUEST_TIMEOUT, b"request timeout\n", TEXT
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return HTTPStatus.BAD_REQUEST, b"bad request\n", TEXT
        method, target = parts[0], parts[1].split("?", 1)[0]
        if target not in ("/metrics", "/healthz", "/readyz"):
            return HTTPStatus.NOT_FOUND, b"not found\n", TEXT
        if method != "GET":
            return HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n", TEXT
        try:
            return self._route(target)
        except Exception:
            log.exception("handler for %s failed", target)
            return HTTPStatus.INTERNAL_SERVER_ERROR, b"internal error\n", TEXT

    def _route(self, target: str) -> Response:
        if target == "/metrics":
            body, content_type = self._metrics.render()
            return HTTPStatus.OK, body, content_type
        if target == "/healthz":
            if self._healthy():
                return HTTPStatus.OK, b"ok\n", TEXT
            return HTTPStatus.INTERNAL_SERVER_ERROR, b"unhealthy\n", TEXT
        if self._ready():
            return HTTPStatus.OK, b"ok\n", TEXT
        return HTTPStatus.SERVICE_UNAVAILABLE, b"not ready\n", TEXT

    @staticmethod
    async def _write(
        writer: asyncio.StreamWriter, status: HTTPStatus, body: bytes, content_type: str
    ) -> None:
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            + ("Allow: GET\r\n" if status is HTTPStatus.METHOD_NOT_ALLOWED else "")
            + "Connection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        async with asyncio.timeout(READ_TIMEOUT):
            await writer.drain()
