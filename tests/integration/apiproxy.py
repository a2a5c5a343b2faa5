"""A fault-injecting front for the real API server, used by the fault suite.

It serves plain HTTP/1.1 on loopback and forwards every request to the local cluster's
kube-apiserver (TLS, admin certificate). On demand it breaks things the way networks and
servers do:

- ``silence_watches``: open watch streams stop delivering bytes but stay open (a dead
  middlebox or a stuck server); only a client-side watchdog notices.
- ``cut_watches``: open watch streams are closed mid-stream.
- ``expire_before``: a watch resuming from an older resourceVersion is answered with the
  API server's ``ERROR 410 Expired`` event, as after an etcd compaction.
- ``throttle``: writes are answered ``429 Too Many Requests`` with ``Retry-After``.
- ``delay_watches``: watch streams of one resource deliver each event a fixed time after
  the API server sent it, in order: a cache lagging behind the client's own writes.
- ``delay_requests``: every request waits a fixed time before it is forwarded: an API
  server that many milliseconds away, each request paying one round trip.

Every request is logged (time, method, path, status) so tests can check how the client
behaved, e.g. that it honoured Retry-After instead of retrying in a hot loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2 as httpx
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

from kube_nudge_dev.cluster import LocalCluster

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@contextlib.asynccontextmanager
async def proxy_for(cluster: LocalCluster) -> AsyncIterator[ApiProxy]:
    """A running proxy in front of ``cluster``'s API server."""
    single = KubeConfig.from_file(cluster.kubeconfig).get()
    assert single is not None
    upstream = client_adapter.AsyncClient(single, client_adapter.ConnectionParams())
    upstream.headers["User-Agent"] = "kube-nudge/proxy"
    proxy = ApiProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
        await upstream.aclose()


@dataclass(frozen=True, slots=True)
class Request:
    """One request the proxy saw, and the status it answered."""

    at: float  # time.monotonic()
    method: str
    path: str
    watch: bool
    status: int


@dataclass(eq=False)
class _Stream:
    """One watch response being forwarded."""

    task: asyncio.Task[None]
    silent: bool = False


@dataclass
class ApiProxy:
    """Plain-HTTP proxy to the API server behind ``upstream`` (an authenticated client)."""

    upstream: httpx.AsyncClient
    requests: list[Request] = field(default_factory=list)
    expired_before: int | None = None
    throttled_until: float = 0.0
    retry_after: int = 1
    watch_delays: dict[str, float] = field(default_factory=dict)
    """Seconds each watch event of a resource (by its plural) is held back."""
    request_delay: float = 0.0
    """Seconds each request waits before it is forwarded (a round trip's worth of distance)."""
    _server: asyncio.Server | None = None
    _streams: set[_Stream] = field(default_factory=set)
    _connections: set[asyncio.Task[None]] = field(default_factory=set)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)

    @property
    def url(self) -> str:
        """The proxy's base URL."""
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that reaches the API server through this proxy (no credentials:
        the proxy authenticates upstream)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
            "current-context": "proxy",
        }
        path.write_text(json.dumps(config))
        return path

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    # -- faults ----------------------------------------------------------------------------

    def silence_watches(self) -> int:
        """Open watch streams stop forwarding bytes (events are dropped); returns how many."""
        for stream in self._streams:
            stream.silent = True
        return len(self._streams)

    def cut_watches(self) -> int:
        """Close every open watch stream mid-stream; returns how many."""
        streams = list(self._streams)
        for stream in streams:
            stream.task.cancel()
        return len(streams)

    def expire_before(self, resource_version: int) -> None:
        """Watches resuming from a version older than this get ``ERROR 410 Expired``."""
        self.expired_before = resource_version

    def throttle(self, seconds: float, retry_after: int = 1) -> None:
        """Answer writes with 429 and ``Retry-After`` for the next ``seconds``."""
        self.retry_after = retry_after
        self.throttled_until = time.monotonic() + seconds

    def delay_watches(self, resource: str, seconds: float) -> None:
        """Watches of ``resource`` (a plural: ``deployments``) opened from now on deliver
        each event ``seconds`` after the API server sent it."""
        self.watch_delays[resource] = seconds

    def delay_requests(self, seconds: float) -> None:
        """Every request from now on is forwarded ``seconds`` after it arrived, and its
        answer follows at once: an API server one round trip of ``seconds`` away. A client
        that waits for each answer before its next request (one HTTP/1.1 connection, or
        kubectl between objects) leaves that much more between its requests."""
        self.request_delay = seconds

    def count(self, *, status: int | None = None, watch: bool | None = None) -> int:
        """How many requests matched."""
        return sum(
            1
            for r in self.requests
            if (status is None or r.status == status) and (watch is None or r.watch == watch)
        )

    # -- serving ---------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, target, headers = _parse_head(head)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if not await self._answer(method, target, headers, body, writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; False if the connection must close."""
        if self.request_delay > 0:
            await asyncio.sleep(self.request_delay)  # the distance to the API server
        url = urlsplit(target)
        query = parse_qs(url.query)
        watch = query.get("watch", [""])[0] in ("1", "true")
        now = time.monotonic()
        if method != "GET" and now < self.throttled_until:
            self.requests.append(Request(now, method, url.path, watch, 429))
            body = json.dumps(_status(429, "TooManyRequests", "throttled by test")).encode()
            await _respond(writer, 429, body, {"Retry-After": str(self.retry_after)})
            return True
        version = query.get("resourceVersion", [""])[0]
        if watch and self._expired(version):
            self.requests.append(Request(now, method, url.path, watch, 410))
            # What the API server streams when a watch's version was compacted away.
            expired = _status(410, "Expired", f"too old resource version: {version}")
            event = {"type": "ERROR", "object": expired}
            await _respond(writer, 200, json.dumps(event).encode() + b"\n")
            return True
        forward = {k: v for k, v in headers.items() if k not in _HOP_BY_HOP}
        request = self.upstream.build_request(
            method, target, content=body or None, headers=forward,
            timeout=httpx.Timeout(30.0, read=None if watch else 30.0),
        )  # fmt: skip
        response = await self.upstream.send(request, stream=True)
        self.requests.append(Request(now, method, url.path, watch, response.status_code))
        try:
            if not watch:
                # Raw bytes: the body stays as encoded as its Content-Encoding says (big
                # lists come gzipped).
                raw = b"".join([chunk async for chunk in response.aiter_raw()])
                await _respond(writer, response.status_code, raw, _passed(response))
                return True
            delay = self.watch_delays.get(url.path.rstrip("/").rsplit("/", 1)[-1], 0.0)
            return await self._stream(response, writer, delay)
        finally:
            await response.aclose()

    async def _stream(
        self, response: httpx.Response, writer: asyncio.StreamWriter, delay: float = 0.0
    ) -> bool:
        _write_head(writer, response.status_code, {**_passed(response),
                    "Transfer-Encoding": "chunked"})  # fmt: skip
        await writer.drain()
        task = asyncio.current_task()
        assert task is not None
        stream = _Stream(task)
        self._streams.add(stream)
        try:
            async for chunk in _held_back(response.aiter_raw(), delay):
                if stream.silent or not chunk:
                    continue  # dropped: the client hears nothing, the socket stays open
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
        except asyncio.CancelledError:
            # cut_watches(): close the client's connection without ending the stream.
            # Only this task's own cancellation is swallowed; close() cancels the
            # connection task, which is this task too, and ends the connection the same way.
            return False
        finally:
            self._streams.discard(stream)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    def _expired(self, version: str) -> bool:
        if self.expired_before is None or not version.isdigit() or version == "0":
            return False
        return int(version) < self.expired_before


async def _held_back(chunks: AsyncIterator[bytes], delay: float) -> AsyncIterator[bytes]:
    """``chunks`` in order, each ``delay`` seconds after it arrived (read ahead meanwhile,
    so a burst is held back by ``delay``, not by ``delay`` per chunk)."""
    if delay <= 0:
        async for chunk in chunks:
            yield chunk
        return
    arrived: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

    async def read() -> None:
        try:
            async for chunk in chunks:
                arrived.put_nowait((time.monotonic(), chunk))
        finally:
            arrived.put_nowait(None)

    reader = asyncio.create_task(read())
    try:
        while (item := await arrived.get()) is not None:
            at, chunk = item
            await asyncio.sleep(max(0.0, at + delay - time.monotonic()))
            yield chunk
        await reader  # its error, if the upstream stream broke
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


def _status(code: int, reason: str, message: str) -> dict[str, object]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": reason, "code": code, "message": message}  # fmt: skip


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _passed(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower() not in _HOP_BY_HOP}


def _write_head(writer: asyncio.StreamWriter, status: int, headers: dict[str, str]) -> None:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))


async def _respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str] | None = None
) -> None:
    given = dict(headers or {})
    if not any(name.lower() == "content-type" for name in given):
        # The upstream's own type when it has one: kubectl and helm ask for protobuf.
        given["Content-Type"] = "application/json"
    _write_head(writer, status, {**given, "Content-Length": str(len(body))})
    writer.write(body)
    await writer.drain()
