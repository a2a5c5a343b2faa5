"""Errors of the API client name what a person needs to fix them."""

from __future__ import annotations

import asyncio
import socket

import httpx2 as httpx
import pytest

from kube_nudge.kube.client import ApiError, ClientOptions, KubeClient
from tests.unit.httpx_support import HttpxTransport


async def test_an_unreachable_api_server_is_named() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http = httpx.AsyncClient(base_url=f"https://127.0.0.1:{port}")
    client = KubeClient(HttpxTransport(http), ClientOptions(max_retries=0))
    try:
        with pytest.raises(ApiError, match=f"ConnectError talking to https://127.0.0.1:{port}"):
            await client.get("/api/v1/namespaces")
    finally:
        await client.aclose()


async def test_a_refused_eviction_is_answered_at_once_and_holds_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Eviction API's 429 (a PodDisruptionBudget allows no more now) is a verdict on one
    pod: raised at once, not retried, and other requests of the client are not held."""
    calls: list[str] = []
    slept: list[float] = []  # every wait of the client (a hold or a retry is one), not waited
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path.endswith("/eviction"):
            body = {
                "kind": "Status",
                "reason": "TooManyRequests",
                "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            }
            return httpx.Response(429, json=body, headers={"Retry-After": "10"})
        return httpx.Response(200, json={"kind": "PodList", "items": []})  # fmt: skip

    http = httpx.AsyncClient(base_url="https://api.invalid", transport=httpx.MockTransport(answer))
    client = KubeClient(HttpxTransport(http), ClientOptions(max_retries=5))
    try:
        with pytest.raises(ApiError) as refused:
            await client.request(
                "POST", "/api/v1/namespaces/a/pods/p/eviction", body={}, retry_throttled=False
            )
        assert (refused.value.status, refused.value.retry_after) == (429, 10.0)
        await client.get("/api/v1/namespaces/a/pods")
        assert slept == []  # neither retried nor held for the 10 s the 429 suggested
    finally:
        await client.aclose()
    assert calls == ["/api/v1/namespaces/a/pods/p/eviction", "/api/v1/namespaces/a/pods"]
