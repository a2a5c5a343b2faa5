"""The informer's streaming list and its fallback to pages, against a fake client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kube_nudge.kube.client import JSON, ApiError
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer, InformerConfig
from kube_nudge.kube.resources import CONFIGMAPS

OBJECTS = [{"metadata": {"namespace": "ns", "name": f"c{n}", "resourceVersion": str(10 + n)}}
           for n in range(3)]  # fmt: skip


def _end(version: str, *, marked: bool = True) -> JSON:
    annotations = {INITIAL_EVENTS_END: "true"} if marked else {}
    metadata = {"resourceVersion": version, "annotations": annotations}
    return {"type": "BOOKMARK", "object": {"metadata": metadata}}


class FakeClient:
    """Streams OBJECTS (or refuses with ``refuse``, or ignores the streaming list)."""

    def __init__(self, *, refuse: int = 0, ignore: bool = False) -> None:
        self.refuse, self.ignore = refuse, ignore
        self.watches: list[tuple[Mapping[str, Any], str]] = []
        self.pages = 0

    async def list_pages(self, path: str, params: Any = None, *, limit: int = 500
                         ) -> AsyncIterator[tuple[list[JSON], str]]:  # fmt: skip
        self.pages += 1
        yield [dict(o) for o in OBJECTS], "20"

    async def watch(self, path: str, params: Mapping[str, Any], *, resource_version: str,
                    **_: Any) -> AsyncIterator[JSON]:  # fmt: skip
        self.watches.append((dict(params), resource_version))
        if params.get("sendInitialEvents") == "true":
            if self.refuse:
                raise ApiError(self.refuse, "Invalid", "sendInitialEvents is forbidden")
            for obj in OBJECTS:
                yield {"type": "ADDED", "object": obj}
            yield _end("20", marked=not self.ignore)
        await asyncio.Event().wait()
        yield {}  # pragma: no cover


async def _synced(client: FakeClient) -> Informer[str]:
    informer: Informer[str] = Informer(
        client, CONFIGMAPS, lambda obj: obj["metadata"]["name"], lambda *_: None,  # type: ignore[arg-type]
        InformerConfig(),
    )  # fmt: skip
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 5)
    task.cancel()
    return informer


async def test_streaming_list_fills_the_store_without_listing() -> None:
    client = FakeClient()
    informer = await _synced(client)
    assert sorted(informer.store.values()) == ["c0", "c1", "c2"]
    assert informer.resource_version == "20" and client.pages == 0
    params, version = client.watches[0]
    assert params["resourceVersionMatch"] == "NotOlderThan" and version == ""


async def test_a_server_refusing_streaming_lists_is_listed_in_pages() -> None:
    for status in (400, 422):
        client = FakeClient(refuse=status)
        informer = await _synced(client)
        assert len(informer.store) == 3 and client.pages == 1
        assert client.watches[-1] == ({}, "20")  # then a plain watch from the list's version


async def test_a_server_ignoring_streaming_lists_is_listed_in_pages() -> None:
    client = FakeClient(ignore=True)
    informer = await _synced(client)
    assert len(informer.store) == 3 and client.pages == 1
    assert informer.resource_version == "20"
