"""The HTTP serving layer: probes and metrics now, TLS admission webhooks next.

uvicorn (h11) serves a small router of ours inside the controller's own event loop, as a
runnable on every replica (README, Design, has the measurements that chose it). Routes are
added before ``run``; handlers take this module's ``Request`` (the body already read, at most
``MAX_BODY_BYTES``, else 413) and return its ``Response``: no server framework's types reach
the handlers, so the server can change without them. A handler that raises answers 500 with
a fixed body (the exception is logged, never sent: it could carry data). A request head larger
than 8 KiB answers 431, and one not complete within 10 s answers 408 (uvicorn alone enforces
neither, see ``_H11Protocol``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

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
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A PEM certificate chain and its key, for HTTPS (admission webhooks)."""

    certfile: Path
    keyfile: Path


class _EmbeddedServer(uvicorn.Server):
    # uvicorn.Server.serve() installs process-wide SIGINT/SIGTERM handlers by default; the
    # controller owns those (they cancel its main task, which stops this server too).
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class _H11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head (408, then close).

    uvicorn arms its keep-alive timer only after a response, and any byte received cancels it:
    a client that connects and sends nothing, or half a head, would hold its connection for
    ever. The deadline starts when the connection opens and after each response; it only
    closes a connection that has not started a new request since (``self.cycle`` unchanged)
    and is not answering one. A slow request *body* is the handler's to bound.
    """

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = None
        if not self.transport.is_closing():
            self._head_timer = self.loop.call_later(
                HEAD_TIMEOUT_SECONDS, self._head_timed_out, self.cycle
            )

    def _head_timed_out(self, cycle_when_armed: object) -> None:
        self._head_timer = None
        answering = self.cycle is not None and not self.cycle.response_complete
        if self.cycle is cycle_when_armed and not answering and not self.transport.is_closing():
            # Outside h11 (which only answers a request it has parsed); the connection ends here.
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            self.transport.close()


def _router(routes: Mapping[str, Mapping[str, Handler]]) -> App:
    """The ASGI application: the head limit, routing (404, 405 with Allow; HEAD wherever GET
    is), the body read whole and bounded, and the handler's ``Response`` sent."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        methods = routes.get(path)
        if _head_size(scope) > MAX_HEAD_BYTES:
            # h11's max_incomplete_event_size bounds only a head still *incomplete* after a
            # read: a larger head arriving whole in one read (up to 256 KiB on asyncio) is
            # accepted. This makes MAX_HEAD_BYTES a real limit.
            response = _closing(Response.text("request head too large\n", 431))
        elif methods is None:
            response = Response.text("not found\n", 404)
        elif (handler := methods.get("GET" if method == "HEAD" else method)) is None:
            allow = sorted({*methods, *(("HEAD",) if "GET" in methods else ())})
            response = Response(
                b"method not allowed\n", 405, headers=(("allow", ", ".join(allow)),)
            )
        else:
            body = await _read_body(receive)
            if body is None:
                response = _closing(Response.text("request body too large\n", 413))
            else:
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
                query = scope["query_string"].decode("latin-1")
                response = await handler(Request(method, path, query, headers, body))
        await _send(send, response)  # h11 leaves out the body of an answer to HEAD

    return app


def _closing(response: Response) -> Response:
    return Response(response.body, response.status, response.content_type,
                    (*response.headers, ("connection", "close")))  # fmt: skip


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None once it passes ``MAX_BODY_BYTES``."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, response: Response) -> None:
    headers = [
        (b"content-type", response.content_type.encode("latin-1")),
        (b"content-length", str(len(response.body)).encode()),
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers),
    ]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


def _head_size(scope: Scope) -> int:
    # The request line and header lines as sent, give or take optional whitespace.
    request_line = len(scope["method"]) + len(scope["raw_path"]) + len(scope["query_string"]) + 12
    return request_line + sum(len(name) + len(value) + 4 for name, value in scope["headers"])


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
        self._server: _EmbeddedServer | None = None
        self._bound_port = 0
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
        # No access log: access_log=False only empties "uvicorn.access" and stops propagation;
        # uvicorn still logs every request (each kubelet probe) once any handler is attached to
        # that logger (pytest's caplog does it, so could a logging config). Disabled is certain.
        logging.getLogger("uvicorn.access").disabled = True
        app = _router({path: dict(methods) for path, methods in self._routes.items()})
        config = uvicorn.Config(
            app,
            host=self._host,
            port=self._port,
            http=_H11Protocol,  # uvicorn's "h11", plus a deadline for request heads
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_config=None,  # our logging set-up applies; uvicorn installs no handlers
            access_log=False,
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            # Renewed files are loaded into the same context (see _watch_tls).
            ssl_certfile=str(self._tls.certfile) if self._tls else None,
            ssl_keyfile=str(self._tls.keyfile) if self._tls else None,
        )
        # We bind the socket ourselves: a port in use is then an ordinary OSError here
        # (uvicorn would call sys.exit), and the bound port is known at once.
        listener = _bind(self._host, self._port)
        server = self._server = _EmbeddedServer(config)
        self._bound_port = int(listener.getsockname()[1])
        serving = asyncio.create_task(server.serve(sockets=[listener]), name="uvicorn")
        try:
            while not server.started:
                if serving.done():
                    serving.result()
                    raise RuntimeError(f"HTTP server on {self._host}:{self.port} stopped")
                await asyncio.sleep(0.01)
            self.started.set()
            log.info(
                "serving %s on %s:%d",
                ", ".join(sorted(self._routes)),
                self._host,
                self.port,
            )
            watching = asyncio.create_task(self._watch_tls(config), name="tls-reload")
            try:
                await asyncio.shield(serving)
            finally:
                watching.cancel()
            raise RuntimeError("the HTTP server stopped")
        finally:
            # uvicorn notices within 0.1 s, closes idle connections at once, gives requests in
            # flight SHUTDOWN_GRACE_SECONDS, then cancels them (they answer 500 if they can).
            server.should_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_GRACE_SECONDS + 1)
            if not serving.done():  # only if that bound did not hold
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({serving}, timeout=1)
            listener.close()
            self.started.clear()
            self._server = None

    async def _watch_tls(self, config: uvicorn.Config) -> None:
        """Load renewed certificate files into the live TLS context, so new connections get
        the new certificate without a restart (cert-manager renews before expiry; a mounted
        Secret is swapped atomically). A pair that doesn't load (half written, key and
        certificate not matching) is skipped and the old one stays in use."""
        if self._tls is None or config.ssl is None:
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
                config.ssl.load_cert_chain(*files)
            except (OSError, ssl.SSLError) as exc:
                log.warning("%s: renewed TLS files not loaded (keeping the old ones): %s",
                            self.name, exc)  # fmt: skip
                continue
            seen = stamp
            self.tls_reloads += 1
            log.info("%s: loaded the renewed TLS certificate", self.name)


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
