"""Runs the controller's parts ("runnables"), each declaring whether it needs the leader.

Modelled on controller-runtime's manager: runnables that don't need the leader (caches,
the HTTP server, an admission webhook) run on every replica from the start; those that
need it (workers that write, a rollout tracker) start when this replica becomes leader
and are cancelled at once when it stops leading. Without leader election this replica
leads from the start. A runnable that returns or raises stops the manager, and its error
is raised from ``run``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

__all__ = ["Elector", "Manager", "Runnable"]

log = logging.getLogger(__name__)


class Runnable(Protocol):
    """A long-running part of the controller."""

    @property
    def name(self) -> str:
        """Short name for logs and task names."""
        ...

    @property
    def needs_leader(self) -> bool:
        """True if it may only run while this replica leads."""
        ...

    async def run(self) -> None:
        """Run until cancelled."""
        ...


class Elector(Protocol):
    """What the manager needs of a leader elector (see ``runtime.leader``)."""

    async def run(self) -> None:
        """Campaign until cancelled, calling the callbacks given at construction."""
        ...


ElectorFactory = Callable[[Callable[[], None], Callable[[], None]], Elector]
"""Builds an elector from (on_started, on_stopped) callbacks."""


class Manager:
    """Starts and stops runnables as leadership comes and goes."""

    def __init__(
        self,
        runnables: Sequence[Runnable],
        *,
        elector: ElectorFactory | None = None,
        on_leading: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        self._always = [r for r in runnables if not r.needs_leader]
        self._leading = [r for r in runnables if r.needs_leader]
        self._elector = elector
        self._on_leading = on_leading
        self._leader_tasks: list[asyncio.Task[None]] = []
        self._stopping: list[asyncio.Task[None]] = []  # cancelled, maybe not finished yet
        self._failed = asyncio.Event()
        self._error: BaseException | None = None

    @property
    def leading(self) -> bool:
        """True while the leader runnables run."""
        return bool(self._leader_tasks)

    async def run(self) -> None:
        """Run everything until cancelled or until a runnable stops (its error is raised)."""
        tasks = [asyncio.create_task(r.run(), name=r.name) for r in self._always]
        if self._elector is not None:
            elector = self._elector(self._start_leading, self._stop_leading)
            tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
        else:
            self._start_leading()
        failed = asyncio.create_task(self._failed.wait(), name="leader-runnable-watch")
        try:
            done, _ = await asyncio.wait([*tasks, failed], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not failed:
                    task.result()  # surface the error that stopped a runnable
                    raise RuntimeError(f"{task.get_name()} stopped unexpectedly")
            if self._error is not None:
                raise self._error
        finally:
            failed.cancel()
            for task in tasks:
                task.cancel()
            # The elector's own cancellation stops the leader runnables; without one, we do.
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._cancel_leader_tasks()

    def _start_leading(self) -> None:
        if self._leader_tasks:
            return
        self._on_leading(True)
        self._leader_tasks = [asyncio.create_task(r.run(), name=r.name) for r in self._leading]
        for task in self._leader_tasks:
            task.add_done_callback(self._leader_task_done)

    def _stop_leading(self) -> None:
        if not self._leader_tasks:
            return
        self._on_leading(False)
        tasks, self._leader_tasks = self._leader_tasks, []
        for task in tasks:
            task.cancel()
        self._stopping = [t for t in self._stopping if not t.done()] + tasks

    def _leader_task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task not in self._leader_tasks:
            return
        error = task.exception()
        self._error = error or RuntimeError(f"{task.get_name()} stopped unexpectedly")
        log.error("%s stopped: %s", task.get_name(), self._error)
        self._failed.set()

    async def _cancel_leader_tasks(self) -> None:
        self._stop_leading()
        stopping, self._stopping = self._stopping, []
        await asyncio.gather(*stopping, return_exceptions=True)
