"""Events go after the client's rollout writes: an Event POST waits (bounded) while any other
write is in flight, so in a fan-out the API server takes the 1,000 template writes first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2 as httpx

from kube_nudge.kube.client import ClientOptions
from kube_nudge.kube.events import NORMAL, EventRecorder, ObjectRef
from kube_nudge_dev.admin import AdminClient
from tests.unit.httpx_support import HttpxTransport

DEPLOYMENT = "/apis/apps/v1/namespaces/a/deployments/web"
EVENTS = "/api/v1/namespaces/a/events"
REF = ObjectRef("apps/v1", "Deployment", "a", "web", "uid-1")


@dataclass
class Api:
    """A client whose PATCHes are answered only once ``release`` is set; ``calls`` in order."""

    client: AdminClient
    recorder: EventRecorder
    release: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[str] = field(default_factory=list)

    async def write_in_flight(self) -> asyncio.Task[object]:
        """Start a template PATCH and return once the server holds it."""
        write = asyncio.create_task(self.client.merge_patch(DEPLOYMENT, {"spec": {}}))
        async with asyncio.timeout(5):
            while not self.calls:
                await asyncio.sleep(0)
        return write


@asynccontextmanager
async def api(event_yield: float) -> AsyncIterator[Api]:
    release, calls = asyncio.Event(), list[str]()

    async def answer(request: httpx.Request) -> httpx.Response:
        calls.append(f"{request.method} {request.url.path}")
        if request.method == "PATCH":
            await release.wait()
        return httpx.Response(200, json={})

    http = httpx.AsyncClient(base_url="https://api.invalid", transport=httpx.MockTransport(answer))
    client = AdminClient(HttpxTransport(http), ClientOptions(event_yield=event_yield))
    try:
        yield Api(client, EventRecorder(client), release, calls)
    finally:
        await client.aclose()


async def test_an_event_waits_for_the_rollout_write_in_flight() -> None:
    async with api(event_yield=60.0) as server:
        write = await server.write_in_flight()
        event = asyncio.create_task(server.recorder.record(REF, NORMAL, "Rollout", "rolling"))
        for _ in range(50):  # plenty of turns of the loop for a POST that did not wait
            await asyncio.sleep(0)
        assert server.calls == [f"PATCH {DEPLOYMENT}"]
        server.release.set()
        async with asyncio.timeout(5):
            await write
            assert await event
        assert server.calls == [f"PATCH {DEPLOYMENT}", f"POST {EVENTS}"]


async def test_an_event_waits_no_longer_than_event_yield() -> None:
    """A write stuck for long (a server asking to retry later) does not hold Events forever."""
    async with api(event_yield=0.05) as server:
        write = await server.write_in_flight()
        async with asyncio.timeout(5):
            assert await server.recorder.record(REF, NORMAL, "Rollout", "rolling")
        assert server.calls == [f"PATCH {DEPLOYMENT}", f"POST {EVENTS}"]
        assert not write.done()
        server.release.set()
        async with asyncio.timeout(5):
            await write


async def test_reads_and_events_themselves_do_not_hold_events() -> None:
    async with api(event_yield=60.0) as server:
        async with asyncio.timeout(5):
            await server.client.get(DEPLOYMENT)
            assert await server.recorder.record(REF, NORMAL, "Rollout", "one")
            assert await server.recorder.record(REF, NORMAL, "Rollout", "two")
        assert server.calls == [f"GET {DEPLOYMENT}", f"POST {EVENTS}", f"POST {EVENTS}"]
