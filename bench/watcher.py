"""Watch a workload collection and timestamp, on arrival, every change of a tool's marker, when
the rollout of each marker completed (the Deployment's status), and, when asked, every
change of one value read from each workload (an annotation, say)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge_dev.waiting import deployment_complete

Key = tuple[str, str]
REVISION = "deployment.kubernetes.io/revision"


class Marks(Protocol):
    """How a tool marks workloads (every ``Tool`` is one)."""

    def marker(self, workload: JSON) -> str | None:
        """What the tool writes on the pod template to roll it (None: not yet)."""

    def adopted(self, workload: JSON) -> bool:
        """True once the tool has taken the workload into account."""


@dataclass(slots=True)
class Seen:
    """What the watch last told us about one workload."""

    marker: str | None
    adopted: bool
    settled: bool  # the workload controller has observed the latest generation
    generation: int
    revision: int  # deployment.kubernetes.io/revision: how many rollouts it has had
    marker_at: float  # perf_counter() when the marker last changed (0.0: never set)
    adopted_at: float  # perf_counter() when first seen adopted (0.0: not yet)
    #: perf_counter() when the rollout of the current marker was first seen complete (what
    #: ``kubectl rollout status`` waits for); 0.0: not yet. Later writes (annotations move a
    #: Deployment's generation too) don't move it.
    completed_at: float = 0.0
    noted: str | None = None  # what the watcher's ``note`` read from the workload
    noted_at: float = 0.0  # perf_counter() when ``noted`` last changed (0.0: never set)


class WorkloadWatcher:
    """List, then watch ``path`` (kept open across changes); ``async with`` runs it.
    ``note``: a value to read from each workload and timestamp when it changes."""

    def __init__(
        self, kube: KubeClient, path: str, tool: Marks,
        note: Callable[[JSON], str | None] | None = None,
    ) -> None:  # fmt: skip
        self.kube = kube
        self.path = path
        self.tool = tool
        self.note = note
        self.seen: dict[Key, Seen] = {}
        self.events = 0
        #: (perf_counter(), workload, new revision) each time a rollout arrived on the watch
        self.rollouts: list[tuple[float, Key, int]] = []
        self._tick = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._resource_version = ""

    async def __aenter__(self) -> WorkloadWatcher:
        await self._list()
        self._task = asyncio.create_task(self._run(), name=f"watch {self.path}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait until ``condition()`` holds after some event; TimeoutError names ``what``."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._tick.clear()
                    if condition():
                        return
                    if self._task is not None and self._task.done():
                        self._task.result()  # the watch died: surface why
                    await self._tick.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}") from None

    def count(self, condition: Callable[[Seen], bool]) -> int:
        """How many workloads satisfy ``condition``."""
        return sum(1 for seen in self.seen.values() if condition(seen))

    def markers(self) -> dict[Key, str | None]:
        """Each workload's current marker."""
        return {key: seen.marker for key, seen in self.seen.items()}

    # -- internals -----------------------------------------------------------------------

    async def _list(self) -> None:
        now = time.perf_counter()
        fresh: dict[Key, Seen] = {}
        async for items, version in self.kube.list_pages(self.path):
            self._resource_version = version
            for obj in items:
                key = _key(obj)
                fresh[key] = self._update(self.seen.get(key), obj, now)
        self.seen = fresh
        self._tick.set()

    async def _run(self) -> None:
        while True:
            try:
                await self._watch()
            except ApiError as exc:
                if not exc.gone:
                    raise
                await self._list()
            except TimeoutError:  # a silent stream: start over from a fresh list
                await self._list()

    async def _watch(self) -> None:
        async for event in self.kube.watch(self.path, resource_version=self._resource_version):
            now = time.perf_counter()
            obj = event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if version:
                self._resource_version = str(version)
            kind = event.get("type")
            if kind == "BOOKMARK":
                continue
            self.events += 1
            key = _key(obj)
            if kind == "DELETED":
                self.seen.pop(key, None)
            else:
                old = self.seen.get(key)
                self.seen[key] = seen = self._update(old, obj, now)
                if old is not None and seen.revision > old.revision:
                    self.rollouts.append((now, key, seen.revision))
            self._tick.set()

    def _update(self, old: Seen | None, obj: JSON, now: float) -> Seen:
        marker = self.tool.marker(obj)
        changed = old.marker != marker if old is not None else marker is not None
        adopted = self.tool.adopted(obj)
        adopted_at = old.adopted_at if old is not None and old.adopted else 0.0
        metadata = obj.get("metadata") or {}
        observed = (obj.get("status") or {}).get("observedGeneration", 0)
        revision = str((metadata.get("annotations") or {}).get(REVISION, "0"))
        completed_at = 0.0 if changed or old is None else old.completed_at
        noted = self.note(obj) if self.note is not None else None
        noted_at = old.noted_at if old is not None else 0.0
        if noted != (old.noted if old is not None else None):
            noted_at = now
        return Seen(
            marker=marker,
            adopted=adopted,
            settled=observed >= metadata.get("generation", 0),
            generation=int(metadata.get("generation", 0)),
            revision=int(revision) if revision.isdigit() else 0,
            marker_at=now if changed else (old.marker_at if old is not None else 0.0),
            adopted_at=(adopted_at or now) if adopted else 0.0,
            completed_at=completed_at or (now if deployment_complete(obj) else 0.0),
            noted=noted,
            noted_at=noted_at,
        )


def _key(obj: JSON) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
