"""TLS connections opened after ``use_small_tls_buffers`` hold a 64 KiB read buffer, not
asyncio's 256 KiB, and still carry a body many times that size."""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from kube_nudge.runtime.tlsbuffers import TLS_READ_BUFFER, use_small_tls_buffers
from tests.tls_support import certificate_pair, tls_server

BODY = b"x" * (3 * 1024 * 1024 + 7)


async def test_tls_connections_get_the_small_buffer_and_carry_big_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)
    use_small_tls_buffers()
    cert, key = certificate_pair(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def big(_: web.Request) -> web.Response:
        return web.Response(body=BODY)

    trust = ssl.create_default_context(cafile=str(cert))
    async with tls_server(big, served) as port:
        _, writer = await asyncio.open_connection("localhost", port, ssl=trust)
        buffer = writer.transport._ssl_protocol._ssl_buffer  # type: ignore[attr-defined]
        assert len(buffer) == TLS_READ_BUFFER < 256 * 1024
        writer.close()
        connector = aiohttp.TCPConnector(ssl=trust)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(f"https://localhost:{port}/big") as response,
        ):
            assert await response.read() == BODY
