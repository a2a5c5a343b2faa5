"""Events go after the client's rollout writes: an Event POST waits (bounded) while any other
write is in flight, so in a fan-out the API server takes the 1,000 template writes first."""

from __future__ import annotations

import asyncio

import httpx2 as httpx

from kube_nudge.kube.client import ClientOptions, KubeClient
from kube_nudge.kube.events import NORMAL, EventRecorder, ObjectRef

DEPLOYMENT = "/apis/apps/v1/namespaces/a/deployments/web"
EVENTS = "/api/v1/namespaces/a/events"
REF = ObjectRef("apps/v1", "Deployment", "a", "web", "uid-1")


def _client(release: asyncio.Event, calls: list[str], event_yield: float) -> KubeClient:
    async def answer(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        if request.method == "PATCH":
            await release.wait()
        return httpx.Response(200, json={})

    http = httpx.AsyncClient(base_url="https://api.invalid", transport=httpx.MockTransport(answer))
    return KubeClient(http, ClientOptions(event_yield=event_yield))


async def test_an_event_waits_for_the_rollout_write_in_flight() -> None:
    release, calls = asyncio.Event(), list[str]()
    client = _client(release, calls, event_yield=60.0)
    recorder = EventRecorder(client)
    try:
        write = asyncio.create_task(client.merge_patch(DEPLOYMENT, {"spec": {}}))
        async with asyncio.timeout(5):
            while not calls:
                await asyncio.sleep(0)
        event = asyncio.create_task(recorder.record(REF, NORMAL, "Rollout", "rolling"))
        for _ in range(50):  # plenty of turns of the loop for a POST that did not wait
            await asyncio.sleep(0)
        assert calls == [f"PATCH {DEPLOYMENT}"]
        release.set()
        async with asyncio.timeout(5):
            await write
            assert await event
        assert calls == [f"PATCH {DEPLOYMENT}", f"POST {EVENTS}"]
    finally:
        await client.aclose()


async def test_an_event_waits_no_longer_than_event_yield() -> None:
    """A write stuck for long (a server asking to retry later) does not hold Events forever."""
    release, calls = asyncio.Event(), list[str]()
    client = _client(release, calls, event_yield=0.05)
    recorder = EventRecorder(client)
    try:
        write = asyncio.create_task(client.merge_patch(DEPLOYMENT, {"spec": {}}))
        async with asyncio.timeout(5):
            while not calls:
                await asyncio.sleep(0)
            assert await recorder.record(REF, NORMAL, "Rollout", "rolling")
        assert calls == [f"PATCH {DEPLOYMENT}", f"POST {EVENTS}"]
        assert not write.done()
        release.set()
        async with asyncio.timeout(5):
            await write
    finally:
        await client.aclose()


async def test_reads_and_events_themselves_do_not_hold_events() -> None:
    release, calls = asyncio.Event(), list[str]()
    client = _client(release, calls, event_yield=60.0)
    recorder = EventRecorder(client)
    try:
        async with asyncio.timeout(5):
            await client.get(DEPLOYMENT)
            assert await recorder.record(REF, NORMAL, "Rollout", "one")
            assert await recorder.record(REF, NORMAL, "Rollout", "two")
        assert calls == [f"GET {DEPLOYMENT}", f"POST {EVENTS}", f"POST {EVENTS}"]
    finally:
        await client.aclose()
