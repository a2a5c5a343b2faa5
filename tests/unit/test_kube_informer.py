"""The informer's streaming list and its fallback to pages, against a fake client."""

from __future__ import annotations

import asyncio

from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer, InformerConfig
from kube_nudge.kube.resources import CONFIGMAPS
from tests.unit.fakes import FakeApi

OBJECTS = [{"metadata": {"namespace": "ns", "name": f"c{n}", "resourceVersion": str(10 + n)}}
           for n in range(3)]  # fmt: skip


def _end(version: str, *, marked: bool = True) -> JSON:
    annotations = {INITIAL_EVENTS_END: "true"} if marked else {}
    metadata = {"resourceVersion": version, "annotations": annotations}
    return {"type": "BOOKMARK", "object": {"metadata": metadata}}


def streaming(*, refuse: int = 0, ignore: bool = False) -> FakeApi:
    """Lists and streams OBJECTS (or refuses with ``refuse``, or ignores the streaming list)."""
    api = FakeApi({"configmaps": OBJECTS}, version="20")
    api.initial_events = [{"type": "ADDED", "object": obj} for obj in OBJECTS]
    api.initial_events.append(_end("20", marked=not ignore))
    if refuse:
        api.streaming_error = ApiError(refuse, "Invalid", "sendInitialEvents is forbidden")
    return api


async def _synced(client: FakeApi) -> Informer[str]:
    informer: Informer[str] = Informer(
        client.as_client(), CONFIGMAPS, lambda obj: obj["metadata"]["name"], lambda *_: None,
        InformerConfig(),
    )  # fmt: skip
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    task.cancel()
    return informer


async def test_streaming_list_fills_the_store_without_listing() -> None:
    client = streaming()
    informer = await _synced(client)
    assert sorted(informer.store.values()) == ["c0", "c1", "c2"]
    assert informer.resource_version == "20" and len(client.listed) == 0
    params, version = client.watches[0]
    assert params["resourceVersionMatch"] == "NotOlderThan" and version == ""


async def test_a_server_refusing_streaming_lists_is_listed_in_pages() -> None:
    for status in (400, 422):
        client = streaming(refuse=status)
        informer = await _synced(client)
        assert len(informer.store) == 3 and len(client.listed) == 1
        assert client.watches[-1] == ({}, "20")  # then a plain watch from the list's version


async def test_a_server_ignoring_streaming_lists_is_listed_in_pages() -> None:
    client = streaming(ignore=True)
    informer = await _synced(client)
    assert len(informer.store) == 3 and len(client.listed) == 1
    assert informer.resource_version == "20"
