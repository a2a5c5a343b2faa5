"""The HTTP layer over real sockets: probes, routes, keep-alive, TLS, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kube_nudge.runtime.http import HttpServer, TlsFiles, add_probes, parse_address
from kube_nudge.runtime.metrics import Metrics


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
    review = await request.json()
    return JSONResponse({"uid": review["request"]["uid"], "allowed": True})


async def broken(_: Request) -> Response:
    raise RuntimeError("secret-detail")


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
    assert not [r for r in caplog.records if r.name.startswith("uvicorn.access")]


async def test_a_raising_handler_answers_500_without_its_error(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    response = await running.http.get("/broken")
    assert (response.status_code, response.text) == (500, "internal error\n")
    assert "secret-detail" not in response.text
    assert "handler for /broken failed" in caplog.text
    assert (await running.http.get("/healthz")).status_code == 200


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
            async with asyncio.timeout(5):
                head = await reader.readuntil(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200 ")
                assert b"connection: close" not in head.lower()
                assert await reader.readexactly(3) == b"ok\n"
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("request_bytes", "status_line"),
    [
        (b"garbage\r\n\r\n", b"HTTP/1.1 400 "),
        # A head still incomplete past 8 KiB is refused rather than buffered further.
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX: " + b"a" * 9000, b"HTTP/1.1 400 "),
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


async def test_cancelling_stops_promptly_with_a_client_connected_and_frees_the_port() -> None:
    server = HttpServer("127.0.0.1", 0)
    add_probes(server, render_metrics=lambda: (b"", "text/plain"), ready=bool, healthy=bool)
    task = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 5)
    port = server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # keep-alive, left open
    await writer.drain()
    async with asyncio.timeout(5):
        await reader.readuntil(b"unhealthy\n")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 8)
    writer.close()
    again = HttpServer("127.0.0.1", port)
    async with serving(again):
        assert again.port == port


async def test_a_port_in_use_is_an_error_not_a_hang(running: Running) -> None:
    clash = HttpServer("127.0.0.1", running.server.port)
    with pytest.raises(OSError, match=f"cannot serve on 127.0.0.1:{running.server.port}"):
        await asyncio.wait_for(clash.run(), 5)


def self_signed(directory: Path) -> TlsFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    files = TlsFiles(directory / "tls.crt", directory / "tls.key")
    files.certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


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
