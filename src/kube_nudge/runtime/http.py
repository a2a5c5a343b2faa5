"""The HTTP serving layer: probes and metrics now, TLS admission webhooks next.

An asyncio server of ours, its HTTP/1.1 parsed by h11 (``runtime/httpconn.py``), serves a
small router inside the controller's own event loop, as a runnable on every replica
(docs/design.md has the measurements that chose it over uvicorn and aiohttp). Routes are
added before ``run``; handlers take this module's ``Request`` (the body already read, at most
``MAX_BODY_BYTES``, else 413) and return its ``Response``: no server framework's types reach
the handlers, so the server can change without them. A handler that raises answers 500 with
a fixed body (the exception is logged, never sent: it could carry data). A request head larger
than 8 KiB answers 431, and one not complete within 10 s answers 408.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_nudge.runtime.httpconn import Exchange, Limits, Reply, serve_connection

__all__ = [
    "Handler",
    "HttpServer",
    "Request",
    "Response",
    "TlsFiles",
    "add_probes",
    "parse_address",
]

log = logging.getLogger(__name__)

TEXT = "text/plain; charset=utf-8"
MAX_HEAD_BYTES = 8192  # a request head larger than this is refused (431, or 400 by h11)
MAX_BODY_BYTES = 4 * 1024 * 1024  # an AdmissionReview carries an object and its old version
HEAD_TIMEOUT_SECONDS = 10.0  # a request head must be complete this long after it may start
KEEP_ALIVE_SECONDS = 5
SHUTDOWN_GRACE_SECONDS = 5
TLS_CHECK_SECONDS = 30.0  # how often renewed certificate files are looked for


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


@dataclass(frozen=True, slots=True)
class Request:
    """What a handler is given: the request with its whole body."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    """Lower-case names; a repeated header keeps its last value."""
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    """What a handler returns."""

    body: bytes = b""
    status: int = 200
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, text: str, status: int = 200) -> Response:
        """A UTF-8 text answer."""
        return cls(text.encode(), status)

    @classmethod
    def json(cls, document: Any, status: int = 200) -> Response:
        """A compact JSON answer."""
        body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        return cls(body, status, "application/json")


Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A PEM certificate chain and its key, for HTTPS (admission webhooks)."""

    certfile: Path
    keyfile: Path


def _router(
    routes: Mapping[str, Mapping[str, Handler]],
) -> Callable[[Exchange], Awaitable[Response]]:
    """Routing: 404, 405 with Allow, HEAD wherever GET is; the handler's ``Response``."""

    async def route(exchange: Exchange) -> Response:
        path, _, query = exchange.target.partition("?")
        methods = routes.get(path)
        if methods is None:
            return Response.text("not found\n", 404)
        method = exchange.method
        handler = methods.get("GET" if method == "HEAD" else method)
        if handler is None:
            allow = ", ".join(sorted({*methods, *(("HEAD",) if "GET" in methods else ())}))
            return Response(b"method not allowed\n", 405, headers=(("allow", allow),))
        return await handler(Request(method, path, query, exchange.headers, exchange.body))

    return route


class HttpServer:
    """A runnable HTTP(S) server; every replica runs it (``needs_leader`` is False)."""

    name = "http"
    needs_leader = False

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: TlsFiles | None = None,
        name: str = "http",
        tls_check_interval: float = TLS_CHECK_SECONDS,
    ) -> None:
        self.name = name
        self.tls_reloads = 0  # renewed certificates loaded
        self.tls_checks = 0  # looks at the certificate files
        self._tls_check_interval = tls_check_interval
        self._host = host
        self._port = port
        self._tls = tls
        self._routes: dict[str, dict[str, Handler]] = {}
        self._bound_port = 0
        self._closing = False
        self._connections: set[asyncio.Task[Any]] = set()
        self._busy: set[asyncio.Task[Any]] = set()  # connections inside a handler
        self.started = asyncio.Event()

    def add_route(self, path: str, handler: Handler, methods: Iterable[str] = ("GET",)) -> None:
        """Serve ``handler`` at ``path`` for ``methods`` (others get 405 with Allow)."""
        for method in methods:
            self._routes.setdefault(path, {})[method.upper()] = _guarded(path, handler)

    @property
    def port(self) -> int:
        """The bound port once started (useful with port 0), else the configured one."""
        return self._bound_port or self._port

    async def run(self) -> None:
        """Serve until cancelled, then close connections within a short grace period."""
        tls = None
        if self._tls is not None:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(self._tls.certfile, self._tls.keyfile)
        app = _router({path: dict(methods) for path, methods in self._routes.items()})

        async def answer(exchange: Exchange) -> Reply:
            task = _current_task()
            self._busy.add(task)
            try:
                response = await app(exchange)
            except asyncio.CancelledError:
                if not self._closing:
                    raise
                response = Response.text("internal error\n", 500)  # cut off by the stop
            finally:
                self._busy.discard(task)
            return response.status, response.content_type, response.headers, response.body

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = _current_task()
            self._connections.add(task)
            # The module's limits as they are now (tests shorten them while a server runs).
            limits = Limits(
                HEAD_TIMEOUT_SECONDS, KEEP_ALIVE_SECONDS, MAX_HEAD_BYTES, MAX_BODY_BYTES
            )
            try:
                await serve_connection(reader, writer, answer, limits, lambda: self._closing)
            finally:
                self._connections.discard(task)

        # We bind the socket ourselves: a port in use is an ordinary OSError here, and the
        # bound port is known at once.
        listener = _bind(self._host, self._port)
        self._bound_port = int(listener.getsockname()[1])
        self._closing = False
        server = await asyncio.start_server(client, sock=listener, ssl=tls)
        try:
            self.started.set()
            log.info("serving %s on %s:%d", ", ".join(sorted(self._routes)), self._host, self.port)
            await self._watch_tls(tls)
        finally:
            self._closing = True
            server.close()
            await self._stop_connections()
            listener.close()
            self.started.clear()

    async def _stop_connections(self) -> None:
        """Close idle connections at once; give those answering ``SHUTDOWN_GRACE_SECONDS``,
        then cancel their handlers (they answer 500)."""
        for task in self._connections - self._busy:
            task.cancel()
        busy = set(self._busy)
        if busy:
            _, late = await asyncio.wait(busy, timeout=SHUTDOWN_GRACE_SECONDS)
            if late:
                log.warning("%s: timeout graceful shutdown exceeded: cancelling %d request(s)",
                            self.name, len(late))  # fmt: skip
                for task in late:
                    task.cancel()
        if self._connections:
            await asyncio.wait(set(self._connections), timeout=1)

    async def _watch_tls(self, tls: ssl.SSLContext | None) -> None:
        """Load renewed certificate files into the live TLS context, so new connections get
        the new certificate without a restart (cert-manager renews before expiry; a mounted
        Secret is swapped atomically). A pair that doesn't load (half written, key and
        certificate not matching) is skipped and the old one stays in use."""
        if self._tls is None or tls is None:
            await asyncio.Event().wait()  # nothing to watch: serve until cancelled
            return
        files = (self._tls.certfile, self._tls.keyfile)
        seen = _stamp(files)
        while True:
            await asyncio.sleep(self._tls_check_interval)
            self.tls_checks += 1
            stamp = _stamp(files)
            if stamp == seen:
                continue
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(*files)  # check first
                tls.load_cert_chain(*files)
            except (OSError, ssl.SSLError) as exc:
                log.warning("%s: renewed TLS files not loaded (keeping the old ones): %s",
                            self.name, exc)  # fmt: skip
                continue
            seen = stamp
            self.tls_reloads += 1
            log.info("%s: loaded the renewed TLS certificate", self.name)


def _current_task() -> asyncio.Task[Any]:
    """The task running this coroutine (every connection and handler runs in one)."""
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - asyncio runs coroutines in tasks
        raise RuntimeError("not in a task")
    return task


def _stamp(files: Iterable[Path]) -> tuple[tuple[int, int], ...]:
    """What changes when a file is rewritten or a mounted Secret swapped."""
    stamps = []
    for path in files:
        try:
            info = path.stat()
        except OSError:
            stamps.append((0, 0))
        else:
            stamps.append((info.st_mtime_ns, info.st_size))
    return tuple(stamps)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot serve on {host}:{port}: {exc.strerror}") from None


def _guarded(path: str, handler: Handler) -> Handler:
    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception:
            log.exception("handler for %s failed", path)
            return Response.text("internal error\n", 500)

    return guarded


def add_probes(
    server: HttpServer,
    *,
    render_metrics: Callable[[], tuple[bytes, str]],
    ready: Callable[[], bool],
    healthy: Callable[[], bool],
) -> None:
    """``/metrics``, ``/healthz`` (200 or 500) and ``/readyz`` (200 or 503)."""

    async def metrics(_: Request) -> Response:
        body, content_type = render_metrics()
        return Response(body, content_type=content_type)

    async def healthz(_: Request) -> Response:
        return Response.text("ok\n") if healthy() else Response.text("unhealthy\n", 500)

    async def readyz(_: Request) -> Response:
        return Response.text("ok\n") if ready() else Response.text("not ready\n", 503)

    server.add_route("/metrics", metrics)
    server.add_route("/healthz", healthz)
    server.add_route("/readyz", readyz)
