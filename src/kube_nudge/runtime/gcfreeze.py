"""Keep the cyclic garbage collector off what the initial sync left alive (``gc.freeze``).

CPython's full collection walks every tracked object: in kube-nudge the imported modules
(aiohttp, prometheus_client, the product's own and what they import: about 54,000 objects
when measured) and the caches. One full pass of those modules alone took 32 ms of CPU on
the bench machine, more than a whole reaction at ``--debounce 0``. In the latency scenario
(200 changes) one such pass fell among the changes and took 83.6 ms (a loaded machine, wall
time): that change's latency, and the run's tail. These objects live as long as the
process, so after one collection at the sync ``gc.freeze()`` moves them to the permanent
generation, which no later collection walks: in the same scenario a full pass then took
0.42 ms. Objects still die as usual when their last reference goes; only cycles among the
frozen ones would outlive their use, and the collection just before the freeze leaves none
behind.
"""

from __future__ import annotations

import asyncio
import gc
import logging

__all__ = ["GcFreezer"]

log = logging.getLogger(__name__)


class GcFreezer:
    """Runnable (every replica): once ``ready`` is set (the caches are filled), collect once
    and freeze what is left; then nothing more to do."""

    name = "gc-freeze"
    needs_leader = False

    def __init__(self, ready: asyncio.Event) -> None:
        self._ready = ready

    async def run(self) -> None:
        """Freeze after the initial sync, then wait until cancelled."""
        await self._ready.wait()
        gc.collect()
        gc.freeze()
        log.debug("gc: %d objects frozen after the sync", gc.get_freeze_count())
        await asyncio.Event().wait()  # a runnable that returns would stop the manager
