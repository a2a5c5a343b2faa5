"""Errors of the API client name what a person needs to fix them."""

from __future__ import annotations

import socket

import httpx2 as httpx
import pytest

from kube_nudge.kube.client import ApiError, ClientOptions, KubeClient


async def test_an_unreachable_api_server_is_named() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}")
    client = KubeClient(http, ClientOptions(max_retries=0))
    try:
        with pytest.raises(ApiError, match=f"ConnectError talking to https://127.0.0.1:{port}"):
            await client.get("/api/v1/namespaces")
    finally:
        await client.aclose()
