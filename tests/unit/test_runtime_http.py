"""The HTTP layer over real sockets: probes, routes, keep-alive, TLS, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest

from kube_nudge.runtime import http as http_module
from kube_nudge.runtime.http import (
    HttpServer,
    Request,
    Response,
    TlsFiles,
    add_probes,
    parse_address,
)
from kube_nudge.runtime.metrics import Metrics
from tests.tls_support import certificate_pair


@dataclass
class Probe:
    ready: bool = False
    healthy: bool = True


@dataclass
class Running:
    server: HttpServer
    probe: Probe
    metrics: Metrics
    http: httpx.AsyncClient


@contextlib.asynccontextmanager
async def serving(server: HttpServer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 5)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)


async def echo(request: Request) -> Response:
    review = json.loads(request.body)
    return Response.json({"uid": review["request"]["uid"], "allowed": True})


async def broken(_: Request) -> Response:
    raise RuntimeError("secret-detail")


async def slow(_: Request) -> Response:
    await asyncio.sleep(0.6)  # the scenario: a handler slower than the patched deadline
    return Response.text("done\n")


def probes_only() -> HttpServer:
    server = HttpServer("127.0.0.1", 0)
    add_probes(server, render_metrics=lambda: (b"", "text/plain"), ready=bool, healthy=bool)
    return server


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One response with a content-length body: (head, body)."""
    async with asyncio.timeout(5):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        return head, await reader.readexactly(length)


async def refused(port: int) -> None:
    """Return once connecting to ``port`` is refused (the listener is closed)."""
    async with asyncio.timeout(5):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                return
            writer.close()
            await asyncio.sleep(0.01)  # polls a condition, bounded by the timeout above


async def read_to_eof(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(5):
        try:
            return await reader.read()
        except ConnectionResetError:
            return b"<reset>"


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    probe, metrics = Probe(), Metrics()
    server = HttpServer("127.0.0.1", 0)
    add_probes(
        server,
        render_metrics=metrics.render,
        ready=lambda: probe.ready,
        healthy=lambda: probe.healthy,
    )
    server.add_route("/validate", echo, methods=("POST",))
    server.add_route("/broken", broken)
    server.add_route("/slow", slow)
    async with serving(server):
        assert server.port != 0
        base = f"http://127.0.0.1:{server.port}"
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            yield Running(server, probe, metrics, http)


async def test_metrics_are_served(running: Running) -> None:
    running.metrics.nudges.labels(kind="Deployment").inc()
    response = await running.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'kube_nudge_nudges_total{kind="Deployment"} 1.0' in response.text


async def test_readiness_follows_the_callable(running: Running) -> None:
    response = await running.http.get("/readyz")
    assert (response.status_code, response.text) == (503, "not ready\n")
    running.probe.ready = True
    response = await running.http.get("/readyz")
    assert (response.status_code, response.text) == (200, "ok\n")


async def test_health_follows_the_callable(running: Running) -> None:
    assert (await running.http.get("/healthz")).status_code == 200
    running.probe.healthy = False
    response = await running.http.get("/healthz")
    assert (response.status_code, response.text) == (500, "unhealthy\n")


async def test_unknown_path_and_method(running: Running) -> None:
    assert (await running.http.get("/nope")).status_code == 404
    response = await running.http.post("/metrics", content=b"x")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert (await running.http.get("/readyz?verbose=1")).status_code == 503


async def test_requests_are_not_logged_one_by_one(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await running.http.get("/healthz")
    served = [r for r in caplog.records if r.name.startswith("kube_nudge")]
    assert not [r for r in served if "/healthz" in r.getMessage()]


async def test_a_raising_handler_answers_500_without_its_error(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    response = await running.http.get("/broken")
    assert (response.status_code, response.text) == (500, "internal error\n")
    assert "secret-detail" not in response.text
    assert "handler for /broken failed" in caplog.text
    assert (await running.http.get("/healthz")).status_code == 200


async def test_a_raising_probe_answers_500(caplog: pytest.LogCaptureFixture) -> None:
    def broken_probe() -> bool:
        raise RuntimeError("secret-detail")

    server = HttpServer("127.0.0.1", 0)
    add_probes(server, render_metrics=lambda: (b"", ""), ready=broken_probe, healthy=broken_probe)
    async with serving(server), httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"http://127.0.0.1:{server.port}/readyz")
    assert (response.status_code, response.text) == (500, "internal error\n")
    assert "handler for /readyz failed" in caplog.text


async def test_it_is_a_runnable_on_every_replica_and_leaves_signals_alone() -> None:
    server = probes_only()
    assert (server.name, server.needs_leader) == ("http", False)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    async with serving(server):
        during = {sig: signal.getsignal(sig) for sig in before}
    assert during == before


async def test_a_json_post_is_answered_as_a_webhook_would(running: Running) -> None:
    response = await running.http.post("/validate", json={"request": {"uid": "u-1"}})
    assert response.status_code == 200
    assert response.json() == {"uid": "u-1", "allowed": True}


async def test_keep_alive_serves_several_requests_on_one_connection(running: Running) -> None:
    port = running.server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(2):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            head, body = await read_response(reader)
            assert head.startswith(b"HTTP/1.1 200 ")
            assert b"connection: close" not in head.lower()
            assert body == b"ok\n"
        review = b'{"request": {"uid": "u-3"}}'
        writer.write(
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(review), review)
        )
        head, body = await read_response(reader)
        assert head.startswith(b"HTTP/1.1 200 ")
        assert body == b'{"uid":"u-3","allowed":true}'
    finally:
        writer.close()


async def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_module, "KEEP_ALIVE_SECONDS", 0.2)
    server = probes_only()
    async with serving(server):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _ = await read_response(reader)
        assert b"connection: close" not in head.lower()  # kept alive, then closed when idle
        assert await read_to_eof(reader) == b""  # silently: no 408 for an idle keep-alive
        writer.close()


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (b"", b""),  # connected and said nothing
        (b"", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"),  # half a head, then silence
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", b"GET /hea"),  # the same on keep-alive
    ],
)
async def test_a_head_not_complete_in_time_gets_408(
    running: Running, monkeypatch: pytest.MonkeyPatch, first: bytes, then: bytes
) -> None:
    monkeypatch.setattr(http_module, "HEAD_TIMEOUT_SECONDS", 0.3)
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    if first:
        writer.write(first)
        assert (await read_response(reader))[0].startswith(b"HTTP/1.1 200 ")
    writer.write(then)
    answer = await read_to_eof(reader)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize("pipelined", [False, True])
async def test_the_head_deadline_spares_handlers_slower_than_it(
    running: Running, monkeypatch: pytest.MonkeyPatch, pipelined: bool
) -> None:
    monkeypatch.setattr(http_module, "HEAD_TIMEOUT_SECONDS", 0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    request = b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
    try:
        if pipelined:  # the second request starts as the first response completes
            writer.write(request * 2)
        for _ in range(2):  # the first request, and one after a response on keep-alive
            if not pipelined:
                writer.write(request)
            head, body = await read_response(reader)
            assert (head[:13], body) == (b"HTTP/1.1 200 ", b"done\n")
    finally:
        writer.close()


FILLER = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: "


@pytest.mark.parametrize(
    ("chunks", "status_line"),
    [
        ([FILLER + b"a" * 7000 + b"\r\n\r\n"], b"HTTP/1.1 200 "),  # under 8 KiB: served
        # Over 8 KiB but whole in one read: h11 would accept it; our check answers 431.
        ([FILLER + b"a" * 9000 + b"\r\n\r\n"], b"HTTP/1.1 431 "),
        ([FILLER + b"a" * 60000 + b"\r\n\r\n"], b"HTTP/1.1 431 "),
        ([FILLER + b"a" * 4000, b"a" * 5000 + b"\r\n\r\n"], b"HTTP/1.1 431 "),
        # Still incomplete past 8 KiB: h11 refuses it rather than buffer further.
        ([FILLER + b"a" * 9000], b"HTTP/1.1 400 "),
    ],
)
async def test_an_oversized_request_head_is_refused(
    running: Running, chunks: list[bytes], status_line: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()  # read apart or together, the answer is the same
    writer.write_eof()
    answer = await read_to_eof(reader)
    writer.close()
    assert answer.startswith(status_line)
    if status_line != b"HTTP/1.1 200 ":
        assert b"connection: close" in answer.lower()


@pytest.mark.parametrize(
    ("request_bytes", "status_line"),
    [
        (b"garbage\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET /metrics SPDY/9\r\n\r\n", b"HTTP/1.1 400 "),
        (b"\xff\xfe\x00 / HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),  # the old server said 404
        (b"GET /healthz HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 "),  # HTTP/1.1 without Host
        (b"GET /healthz HTTP/1.0\r\n\r\n", b"HTTP/1.1 200 "),  # 1.0 needs none
        (b"GET /healthz HTTP/1.1\r\n", b""),  # closed before the head ended: no answer
    ],
)
async def test_malformed_requests_do_not_kill_the_server(
    running: Running, request_bytes: bytes, status_line: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    writer.write(request_bytes)
    writer.write_eof()
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    assert answer.startswith(status_line) if status_line else answer == b""
    assert (await running.http.get("/healthz")).status_code == 200


async def test_cancelling_closes_idle_and_stalled_clients_at_once_and_frees_the_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A grace far longer than the bound below: a stop that waited for these clients would
    # time out there, however loaded the machine (how fast it stops is not measured here).
    monkeypatch.setattr(http_module, "SHUTDOWN_GRACE_SECONDS", 120)
    server = probes_only()
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 5)
    port = server.port
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    idle_writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive, left open
    assert (await read_response(idle_reader))[1] == b"unhealthy\n"
    stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", port)
    stalled_writer.write(b"GET /hea")  # never finishes its head
    await stalled_writer.drain()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)  # no request in flight: the grace is not used
    assert await read_to_eof(idle_reader) in (b"", b"<reset>")
    assert await read_to_eof(stalled_reader) in (b"", b"<reset>")
    idle_writer.close()
    stalled_writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    again = HttpServer("127.0.0.1", port)
    async with serving(again):
        assert again.port == port


async def test_a_request_in_flight_at_cancellation_is_answered_within_the_grace() -> None:
    release = asyncio.Event()
    entered = asyncio.Event()

    async def finishing(_: Request) -> Response:
        entered.set()
        await release.wait()
        return Response.text("finished\n")

    server = HttpServer("127.0.0.1", 0)
    server.add_route("/work", finishing)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 5)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /work HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    await refused(server.port)  # the stop has begun: the listener is closed
    assert not task.done()  # the request in flight holds it up, within the grace
    release.set()
    head, body = await read_response(reader)
    assert (head[:13], body) == (b"HTTP/1.1 200 ", b"finished\n")
    assert await read_to_eof(reader) == b""  # and then the connection is closed
    writer.close()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert task.cancelled()


async def test_a_request_stuck_past_the_grace_does_not_hold_up_the_stop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(http_module, "SHUTDOWN_GRACE_SECONDS", 0.5)
    entered = asyncio.Event()

    async def stuck(_: Request) -> Response:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    server = HttpServer("127.0.0.1", 0)
    server.add_route("/stuck", stuck)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 5)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    # The handler never returns: the stop ends only because the grace ran out (a bound with
    # slack for a loaded machine; how close to the grace it ends is not measured here).
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 60)
    # The stop cancels the handler and answers 500 for it, logging why.
    assert (await read_to_eof(reader)).startswith(b"HTTP/1.1 500 ")
    writer.close()
    assert "timeout graceful shutdown exceeded" in caplog.text


async def test_a_port_in_use_is_an_error_not_a_hang(running: Running) -> None:
    clash = HttpServer("127.0.0.1", running.server.port)
    with pytest.raises(OSError, match=f"cannot serve on 127.0.0.1:{running.server.port}"):
        await asyncio.wait_for(clash.run(), 5)


def self_signed(directory: Path) -> TlsFiles:
    return TlsFiles(*certificate_pair(directory))


async def test_tls_serves_a_webhook_post(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    server = HttpServer("127.0.0.1", 0, tls=tls)
    server.add_route("/validate", echo, methods=("POST",))
    async with serving(server):
        trust = ssl.create_default_context(cafile=str(tls.certfile))
        url = f"https://localhost:{server.port}/validate"
        async with httpx.AsyncClient(verify=trust, timeout=5) as http:
            response = await http.post(url, json={"request": {"uid": "u-2"}})
        assert response.json() == {"uid": "u-2", "allowed": True}
        async with httpx.AsyncClient(timeout=5) as plain:
            with pytest.raises(httpx.HTTPError):
                await plain.post(f"http://localhost:{server.port}/validate", json={})


async def test_tls_with_unreadable_files_fails_run_instead_of_hanging(tmp_path: Path) -> None:
    server = HttpServer("127.0.0.1", 0, tls=TlsFiles(tmp_path / "no.crt", tmp_path / "no.key"))
    with pytest.raises(OSError):
        await asyncio.wait_for(server.run(), 5)
    assert not server.started.is_set()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8080", ("0.0.0.0", 8080)),  # noqa: S104
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:9090", ("localhost", 9090)),
        ("[::1]:8080", ("::1", 8080)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["8080", "", "host:", ":http", ":70000", "::1:80", ":-1"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="bad address"):
        parse_address(text)


async def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    tls = self_signed(tmp_path)
    server = HttpServer("127.0.0.1", 0, tls=tls, tls_check_interval=0.02)
    server.add_route("/validate", echo, methods=("POST",))

    async def served_certificate() -> bytes:
        _, writer = await asyncio.open_connection(
            "127.0.0.1",
            server.port,
            ssl=ssl._create_unverified_context(),  # noqa: S323
        )
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        writer.close()
        await writer.wait_closed()
        assert der is not None
        return bytes(der)

    async with serving(server):
        first = await served_certificate()
        # A half-written pair (new certificate, old key) is not loaded: the old one stays.
        old_key = tls.keyfile.read_bytes()
        (tmp_path / "renewed").mkdir()
        renewed = self_signed(tmp_path / "renewed")
        tls.certfile.write_bytes(renewed.certfile.read_bytes())
        checks = server.tls_checks
        async with asyncio.timeout(5):
            while server.tls_checks < checks + 3:  # it has looked at the mismatched pair
                await asyncio.sleep(0.01)
        assert server.tls_reloads == 0 and await served_certificate() == first
        tls.keyfile.write_bytes(renewed.keyfile.read_bytes())
        async with asyncio.timeout(5):
            while server.tls_reloads == 0:
                await asyncio.sleep(0.01)
        assert await served_certificate() != first
        assert old_key != tls.keyfile.read_bytes()


async def test_a_body_over_the_limit_gets_413_and_the_handler_never_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_module, "MAX_BODY_BYTES", 1000)
    seen: list[int] = []

    async def count(request: Request) -> Response:
        seen.append(len(request.body))
        return Response.text("ok\n")

    server = HttpServer("127.0.0.1", 0)
    server.add_route("/in", count, methods=("POST",))
    async with serving(server), httpx.AsyncClient(timeout=5) as http:
        url = f"http://127.0.0.1:{server.port}/in"
        assert (await http.post(url, content=b"x" * 1000)).status_code == 200
        refused = await http.post(url, content=b"x" * 1001)
    assert (refused.status_code, refused.headers["connection"]) == (413, "close")
    assert seen == [1000]


async def test_head_answers_a_get_route_without_its_body(running: Running) -> None:
    response = await running.http.head("/healthz")
    assert (response.status_code, response.content) == (200, b"")
    assert response.headers["content-length"] == "3"
