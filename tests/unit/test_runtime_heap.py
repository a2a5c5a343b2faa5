"""Handing the allocator's free memory back: after the sync, then periodically."""

from __future__ import annotations

import asyncio
import sys

import pytest

from kube_nudge.runtime import heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_works_on_glibc() -> None:
    assert heap.trim() is True


async def test_trims_only_after_ready_then_periodically() -> None:
    ready = asyncio.Event()
    trimmer = heap.HeapTrimmer(ready, interval=0.01)
    task = asyncio.create_task(trimmer.run())
    await asyncio.sleep(0.05)
    assert trimmer.trims == 0  # the caches are still filling
    ready.set()
    for _ in range(100):
        await asyncio.sleep(0.01)
        if trimmer.trims >= 3:
            break
    task.cancel()
    assert trimmer.trims >= 3
