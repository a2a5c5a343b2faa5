"""The garbage collector is kept off what the initial sync left alive, only after it."""

from __future__ import annotations

import asyncio
import gc

from kube_nudge.runtime.gcfreeze import GcFreezer


async def test_freezes_what_is_alive_once_ready_and_not_before() -> None:
    gc.unfreeze()
    ready = asyncio.Event()
    task = asyncio.create_task(GcFreezer(ready).run())
    try:
        for _ in range(5):
            await asyncio.sleep(0)
        assert gc.get_freeze_count() == 0  # the caches are still filling
        kept = [object() for _ in range(10)]  # alive at the sync: frozen with the rest
        ready.set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert gc.get_freeze_count() > len(kept)
        assert not task.done()  # a runnable that returned would stop the manager
    finally:
        task.cancel()
        gc.unfreeze()  # the other tests' objects go back to the collector
