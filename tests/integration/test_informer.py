"""The lean informer against the real API server: streaming lists, pages, deletions, the
watchdog.

(410 Gone needs the watch cache bypassed or its window overrun; the fault suite covers it.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.resources import CONFIGMAPS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from tests.integration.controller_support import eventually

pytestmark = pytest.mark.cluster


def project(obj: JSON) -> str:
    return str((obj.get("data") or {}).get("v"))


@contextlib.asynccontextmanager
async def informing(
    kube: KubeClient, namespace: str, restarts: list[str], **config: float
) -> AsyncIterator[tuple[Informer[str], list[tuple[Key, str | None, str | None]]]]:
    changes: list[tuple[Key, str | None, str | None]] = []
    informer: Informer[str] = Informer(
        kube, CONFIGMAPS, project,
        lambda key, old, new: changes.append((key, old, new)),
        InformerConfig(namespace=namespace, page_size=7, **config),  # type: ignore[arg-type]
        on_restart=restarts.append,
    )  # fmt: skip
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        yield informer, changes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_paginated_list_then_watch_events(kube: AdminClient, namespace: str) -> None:
    for n in range(20):  # three pages of 7
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(f"c{n}", {"v": str(n)}))
    restarts: list[str] = []
    async with informing(kube, namespace, restarts, stream_list=False) as (informer, changes):
        assert len([k for k in informer.store if k[1].startswith("c")]) == 20
        await kube.merge_patch(CONFIGMAPS.path(namespace, "c3"), {"data": {"v": "x"}})
        await kube.delete(CONFIGMAPS.path(namespace, "c4"))
        await eventually(lambda: (namespace, "c4") not in informer.store, timeout=10)
        await eventually(lambda: informer.store.get((namespace, "c3")) == "x", timeout=10)
        assert ((namespace, "c3"), "3", "x") in changes
        assert ((namespace, "c4"), "4", None) in changes


async def test_silent_stream_is_caught_by_the_watchdog(kube: KubeClient, namespace: str) -> None:
    restarts: list[str] = []
    async with informing(kube, namespace, restarts, inactivity_timeout=0.5) as (informer, _):
        await eventually(lambda: "silent" in restarts, timeout=30)
        # After re-listing it still follows changes.
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("late", {"v": "9"}))
        await eventually(lambda: informer.store.get((namespace, "late")) == "9", timeout=30)


class CountingClient:
    """The real client, counting the list pages asked for."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.pages = 0

    def list_pages(self, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[list[JSON], str]]:
        self.pages += 1
        return self.kube.list_pages(*args, **kwargs)

    def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[JSON]:
        return self.kube.watch(*args, **kwargs)


async def test_streaming_list_sends_no_list_request(kube: AdminClient, namespace: str) -> None:
    """The initial state comes by one watch (sendInitialEvents), then its changes."""
    for n in range(12):
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(f"s{n}", {"v": str(n)}))
    counting = CountingClient(kube)
    restarts: list[str] = []
    async with informing(counting, namespace, restarts) as (informer, changes):  # type: ignore[arg-type]
        assert counting.pages == 0
        assert len([k for k in informer.store if k[1].startswith("s")]) == 12
        assert informer.resource_version
        await kube.merge_patch(CONFIGMAPS.path(namespace, "s3"), {"data": {"v": "x"}})
        await kube.delete(CONFIGMAPS.path(namespace, "s4"))
        await eventually(lambda: (namespace, "s4") not in informer.store, timeout=10)
        await eventually(lambda: informer.store.get((namespace, "s3")) == "x", timeout=10)
        assert ((namespace, "s3"), "3", "x") in changes
    assert restarts == []
