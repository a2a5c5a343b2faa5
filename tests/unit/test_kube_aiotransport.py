"""The aiohttp transport keeps the client's behaviour: user agent, retries with Retry-After,
credentials asked again on 401 (a rotated token file), watch lines of any length, a silent
watch as TimeoutError, an unreachable server named, Events on their own connections."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from kube_nudge.kube.aiotransport import KEEPALIVE, AiohttpTransport
from kube_nudge.kube.client import ApiError, ClientOptions
from kube_nudge.kube.credentials import Credentials, credentials_for
from kube_nudge.kube.kubeconfig import Cluster, Kubeconfig, User
from kube_nudge_dev.admin import AdminClient

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    """A plain-HTTP server on 127.0.0.1 answering every request with ``handler``."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def client(server: str, auth: Credentials | None = None, **options: Any) -> AdminClient:
    """The product's client on aiohttp, as an ``AdminClient``: its ``merge_patch`` is the
    plain PATCH these tests send."""
    transport = AiohttpTransport(
        server, ssl.create_default_context(), auth or Credentials(None),
        user_agent="kube-nudge/test", timeout=5.0,
    )  # fmt: skip
    return AdminClient(transport, ClientOptions(**options))


async def test_a_patch_carries_the_user_agent_and_body_and_parses_the_answer() -> None:
    seen: list[tuple[str, str, str, bytes]] = []

    async def answer(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.method, request.path_qs, request.headers["User-Agent"], body))
        return web.json_response({"kind": "Deployment", "metadata": {"name": "web"}})

    async with serve(answer) as server:
        kube = client(server)
        try:
            got = await kube.merge_patch("/apis/apps/v1/namespaces/a/deployments/web", {"x": 1})
            await kube.get("/api/v1/pods", limit=5)
        finally:
            await kube.aclose()
    assert got == {"kind": "Deployment", "metadata": {"name": "web"}}
    assert seen[0] == ("PATCH", "/apis/apps/v1/namespaces/a/deployments/web",
                       "kube-nudge/test", b'{"x":1}')  # fmt: skip
    assert seen[1][:2] == ("GET", "/api/v1/pods?limit=5")


async def test_a_throttled_write_waits_its_retry_after_then_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    answers = [429, 503, 200]

    async def answer(request: web.Request) -> web.Response:
        status = answers.pop(0)
        headers = {"Retry-After": "7"} if status == 429 else {}
        return web.json_response({"kind": "Status", "reason": str(status)}, status=status,
                                 headers=headers)  # fmt: skip

    async with serve(answer) as server:
        kube = client(server)
        monkeypatch.setattr(asyncio, "sleep", sleep)
        try:
            await kube.create("/api/v1/namespaces/a/configmaps", {"kind": "ConfigMap"})
        finally:
            await kube.aclose()
    assert answers == []
    assert 7.0 in slept  # the 429's Retry-After, not the default back-off


async def test_a_rotated_token_file_is_read_again_on_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response({"kind": "Status", "reason": "Unauthorized"}, status=401)
        return web.json_response({"kind": "PodList", "items": []})

    async with serve(answer) as server:
        kube = client(
            server, credentials_for(Kubeconfig(Cluster(server), User(token_file=str(token))))
        )
        try:
            with pytest.raises(ApiError) as refused:
                await kube.get("/api/v1/pods")
            token.write_text("new\n")  # the kubelet rotated it
            assert await kube.get("/api/v1/pods") == {"kind": "PodList", "items": []}
            assert await kube.get("/api/v1/pods") == {"kind": "PodList", "items": []}
        finally:
            await kube.aclose()
    assert refused.value.status == 401
    # old, old again after re-reading (unchanged), then the rotated one, kept.
    assert seen == ["Bearer old", "Bearer old", "Bearer old", "Bearer new", "Bearer new"]


async def test_a_watch_yields_events_longer_than_aiohttps_line_limit() -> None:
    big = "x" * 300_000  # past aiohttp's readline limit (128 KiB)
    events = [{"type": "ADDED", "object": {"data": {"k": big}}},
              {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}]  # fmt: skip

    async def answer(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "1" and request.query["resourceVersion"] == "5"
        response = web.StreamResponse()
        await response.prepare(request)
        payload = b"".join(orjson.dumps(e) + b"\n" for e in events)
        for start in range(0, len(payload), 10_000):  # arrives in pieces
            await response.write(payload[start : start + 10_000])
        await response.write_eof()
        return response

    async with serve(answer) as server:
        kube = client(server)
        try:
            got = [e async for e in kube.watch("/api/v1/configmaps", resource_version="5")]
        finally:
            await kube.aclose()
    assert got == events


async def test_a_silent_watch_is_a_timeout_error() -> None:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await asyncio.sleep(1)
        return response

    async with serve(answer) as server:
        kube = client(server)
        try:
            with pytest.raises(TimeoutError, match="no data for 0 s"):
                async for _ in kube.watch(
                    "/api/v1/pods", resource_version="1", inactivity_timeout=0.2
                ):
                    pass
        finally:
            await kube.aclose()


async def test_a_watch_error_status_is_an_api_error() -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "reason": "Forbidden"}, status=403)

    async with serve(answer) as server:
        kube = client(server)
        try:
            with pytest.raises(ApiError) as refused:
                async for _ in kube.watch("/api/v1/pods", resource_version="1"):
                    pass
        finally:
            await kube.aclose()
    assert refused.value.status == 403 and refused.value.reason == "Forbidden"


async def test_an_unreachable_server_is_named_as_a_connect_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kube = client(f"http://127.0.0.1:{port}", max_retries=0)
    try:
        with pytest.raises(ApiError, match=f"ConnectError talking to http://127.0.0.1:{port}"):
            await kube.get("/api/v1/namespaces")
    finally:
        await kube.aclose()


async def test_events_go_on_their_own_connections() -> None:
    """Two Event POSTs and a rollout's PATCH in flight at once: the PATCH never waits for a
    connection an Event holds, and the Events' pool opens only its own few connections."""
    release, holding = asyncio.Event(), asyncio.Event()
    peers: dict[str, set[int]] = {"events": set(), "writes": set()}

    async def answer(request: web.Request) -> web.Response:
        transport = request.transport
        assert transport is not None
        port = transport.get_extra_info("peername")[1]
        if "/events" in request.path:
            peers["events"].add(port)
            holding.set()
            await release.wait()
        else:
            peers["writes"].add(port)
        return web.json_response({})

    async with serve(answer) as server:
        kube = client(server, event_connections=1)
        try:
            post = kube.request(
                "POST", "/api/v1/namespaces/a/events", body={}, limiter=kube.event_limiter
            )
            events = [asyncio.create_task(post)]
            events.append(asyncio.create_task(kube.request(
                "POST", "/api/v1/namespaces/a/events", body={}, limiter=kube.event_limiter
            )))  # fmt: skip
            # The first Event holds the Events' one connection, the second waits for it.
            await asyncio.wait_for(holding.wait(), 10)
            await asyncio.wait_for(kube.merge_patch("/apis/apps/v1/x", {}), 10)
            release.set()
            await asyncio.gather(*events)
        finally:
            await kube.aclose()
    assert len(peers["events"]) == 1  # one connection, used in turn
    assert not peers["events"] & peers["writes"]


async def test_idle_connections_are_kept_longer_than_aiohttps_default() -> None:
    """aiohttp drops idle connections after 15 s, and a fan-out after a quiet spell then paid
    a TLS handshake per connection: the pool keeps them ``KEEPALIVE`` seconds (under the API
    server's 90 s idle timeout), the Events' pool too."""
    transport = AiohttpTransport(
        "https://127.0.0.1:6443", ssl.create_default_context(), Credentials.fixed("Bearer x"),
        user_agent="kube-nudge/test", timeout=5.0,
    )  # fmt: skip
    events = transport.sibling(2)
    assert isinstance(events, AiohttpTransport)
    try:
        for pool in (transport, events):
            connector = pool._open().connector
            assert connector is not None
            assert connector._keepalive_timeout == KEEPALIVE
        assert 15.0 < KEEPALIVE < 90.0
    finally:
        await transport.aclose()
        await events.aclose()


async def test_cookies_a_server_sets_are_never_sent_back() -> None:
    """Like client-go, no cookie jar: requests carry only the client's own headers."""
    cookies: list[str | None] = []

    async def answer(request: web.Request) -> web.Response:
        cookies.append(request.headers.get("Cookie"))
        response = web.json_response({})
        response.set_cookie("affinity", "node-1")
        return response

    async with serve(answer) as server:
        # A host name: aiohttp's default jar never keeps cookies of an IP address.
        kube = client(server.replace("127.0.0.1", "localhost"))
        try:
            await kube.merge_patch("/apis/apps/v1/x", {})
            await kube.merge_patch("/apis/apps/v1/x", {})
        finally:
            await kube.aclose()
    assert cookies == [None, None]
