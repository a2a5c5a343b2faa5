"""The health/metrics server over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx2 as httpx
import pytest

from kube_nudge.ops.http import HealthServer, parse_address
from kube_nudge.ops.metrics import Metrics


@dataclass
class Probe:
    ready: bool = False
    healthy: bool = True


@dataclass
class Running:
    server: HealthServer
    probe: Probe
    metrics: Metrics
    http: httpx.AsyncClient


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    probe, metrics = Probe(), Metrics()
    server = HealthServer(
        metrics,
        host="127.0.0.1",
        port=0,
        ready=lambda: probe.ready,
        healthy=lambda: probe.healthy,
    )
    await server.start()
    assert server.port != 0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=5) as http:
        yield Running(server, probe, metrics, http)
    await server.stop()


async def _raw(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(5):
            return await reader.read()
    finally:
        writer.close()


async def test_metrics_are_served(running: Running) -> None:
    running.metrics.nudges.labels(kind="Deployment").inc()
    response = await running.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'kube_nudge_nudges_total{kind="Deployment"} 1.0' in response.text
    assert response.headers["connection"] == "close"


async def test_readiness_follows_the_callable(running: Running) -> None:
    response = await running.http.get("/readyz")
    assert (response.status_code, response.text) == (503, "not ready\n")
    running.probe.ready = True
    response = await running.http.get("/readyz")
    assert (response.status_code, response.text) == (200, "ok\n")


async def test_health_follows_the_callable(running: Running) -> None:
    assert (await running.http.get("/healthz")).status_code == 200
    running.probe.healthy = False
    assert (await running.http.get("/healthz")).status_code == 500


async def test_unknown_path_and_method(running: Running) -> None:
    assert (await running.http.get("/nope")).status_code == 404
    response = await running.http.post("/metrics", content=b"x")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"
    assert (await running.http.get("/readyz?verbose=1")).status_code == 503


async def test_a_raising_probe_answers_500(running: Running) -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    server = HealthServer(running.metrics, host="127.0.0.1", port=0, ready=broken, healthy=broken)
    await server.start()
    try:
        answer = await _raw(server.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 500 ")
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("request_bytes", "status_line"),
    [
        (b"garbage\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET /metrics SPDY/9\r\n\r\n", b"HTTP/1.1 400 "),
        (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", b"HTTP/1.1 431 "),
        (b"\xff\xfe\x00 / HTTP/1.1\r\n\r\n", b"HTTP/1.1 404 "),
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


async def test_a_slow_client_gets_408(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kube_nudge.ops.http.READ_TIMEOUT", 0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    writer.write(b"GET /healthz HTTP/1.1\r\n")  # and then nothing
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408 ")


async def test_stop_aborts_a_stalled_client_and_frees_the_port() -> None:
    server = HealthServer(Metrics(), host="127.0.0.1", port=0, ready=bool, healthy=bool)
    await server.start()
    port = server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /hea")  # never finishes the head
    await writer.drain()
    async with asyncio.timeout(5):
        await server.stop()
        try:
            closed = await reader.read() == b""
        except ConnectionResetError:
            closed = True  # a reset closes it all the same
        assert closed
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


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
