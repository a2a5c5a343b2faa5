"""Posting Events in the background: Events have their own budget and connections
(``KubeClient.event_limiter``, ``KubeClient.event_http``) and wait for the client's other
writes to drain (``KubeClient.writes_drained``), so they never delay a rollout; ``flush``
waits for those still queued (tests, shutdown)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kube_nudge.kube.events import EventRecorder, ObjectRef

__all__ = ["BackgroundEvents"]

log = logging.getLogger(__name__)


class BackgroundEvents:
    """Schedules ``EventRecorder.record`` calls as tasks."""

    def __init__(self, recorder: EventRecorder, *, on_failure: Callable[[], None]) -> None:
        self._recorder = recorder
        self._on_failure = on_failure
        self._tasks: set[asyncio.Task[None]] = set()

    def post(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        """Post an Event about ``ref`` soon. Messages must never contain Secret values."""
        task = asyncio.create_task(self._post(ref, event_type, reason, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        if not await self._recorder.record(ref, event_type, reason, message):
            self._on_failure()

    async def flush(self) -> None:
        """Wait until every Event scheduled so far has been posted (or failed)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
