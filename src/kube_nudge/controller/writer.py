"""The one writer of workloads: at the end of a pass, what the pass gathered
(``strategies.changes.WorkloadChanges``) goes to the API server as at most one PATCH, and
then the effects that say so run (kopf's ``_core/actions/application``).

Every workload write's bookkeeping is here, once: the preconditions (the uid for a merge
patch, the resourceVersion of a full read, a JSON patch's ``test`` operations), the field
manager (``kube/patches.py``), the expectation that the caches will show the write before
a pass may act on the workload again, and the writes metric.

A pass opens ``WorkloadWriter.pass_of`` for its key; a second PATCH of that workload within
it raises ``SecondWrite`` (a bug: the parts of a pass add to one ``WorkloadChanges``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kube_nudge.kube.client import ApiError
from kube_nudge.kube.patches import Patch, PatchType, send
from kube_nudge.kube.workloads import Target, WorkloadKey
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges, merged

__all__ = ["FRESH_READ_ATTEMPTS", "SecondWrite", "WorkloadWriter"]

#: Reads of a workload before a patch built from a full read gives up (409).
FRESH_READ_ATTEMPTS = 4


class SecondWrite(RuntimeError):
    """A pass asked to PATCH a workload it already wrote: its parts must add to the one
    ``WorkloadChanges`` of the pass instead."""


class WorkloadWriter:
    """Sends a pass's ``WorkloadChanges`` of one workload as one PATCH."""

    def __init__(self, context: StrategyContext) -> None:
        self._context = context
        self._passes: dict[WorkloadKey, int] = {}
        """PATCHes sent in each pass under way (the queue never runs two passes of a key)."""
        self._tried: set[WorkloadKey] = set()
        """The passes under way that sent a PATCH, taken or refused."""

    @contextmanager
    def pass_of(self, key: WorkloadKey) -> Iterator[None]:
        """Around one pass over ``key``: it may write the workload once."""
        self._passes[key] = 0
        try:
            yield
        finally:
            self._passes.pop(key, None)
            self._tried.discard(key)

    def tried(self, key: WorkloadKey) -> bool:
        """Whether the pass under way over ``key`` sent a PATCH of it, taken or refused."""
        return key in self._tried

    async def write(self, target: Target, changes: WorkloadChanges) -> None:
        """Send ``changes`` (nothing when there are none), then run their effects."""
        if changes.operations is not None:
            await self._send_operations(target, changes)
            return
        if changes.fresh is not None:
            await self._send_fresh(target, changes)
        elif changes.merge:
            await self._send(target, self._with_uid(target, changes))
        await changes.run_effects()

    async def _send_operations(self, target: Target, changes: WorkloadChanges) -> None:
        """Send the JSON patch operations (a rollback) with the pass's annotations; if the
        API refuses them (the workload changed since they were read, most often), the
        annotations (a failure's record: it holds the line) go alone as a merge patch, the
        refusal is said, and the pass is retried."""
        operations = changes.operations
        assert operations is not None  # nosec B101 # the caller checked
        try:
            await self._send(target, changes.json_operations(), PatchType.JSON)
        except ApiError as exc:
            if exc.not_found:
                raise
            operations.refused(exc)
            if changes.merge:
                await self._send(target, self._with_uid(target, changes))
            await changes.run_effects()
            raise
        changes.then(operations.done)
        await changes.run_effects()

    @staticmethod
    def _with_uid(target: Target, changes: WorkloadChanges) -> dict[str, Any]:
        """The pass's merge patch, preconditioned on the workload's uid."""
        return merged(changes.merge, {"metadata": {"uid": target.view.uid}})

    async def _send_fresh(self, target: Target, changes: WorkloadChanges) -> None:
        """Read the workload in full, build the patch from it (preconditioned on its
        resourceVersion) and send it; when the workload changed in between (mostly its
        status, during a rollout) read it again, a few times, before giving up."""
        assert changes.fresh is not None  # nosec B101 # the caller checked
        path = target.kind.resource.path(target.namespace, target.name)
        for attempt in range(FRESH_READ_ATTEMPTS):
            workload = await self._context.client.get(path)
            if (workload.get("metadata") or {}).get("uid") != target.view.uid:
                raise ApiError(409, "Conflict", f"{target} was deleted and created again")
            try:
                await self._send(target, merged(changes.merge, await changes.fresh(workload)))
                return
            except ApiError as exc:
                if not exc.conflict or attempt == FRESH_READ_ATTEMPTS - 1:
                    raise

    async def _send(
        self, target: Target, body: dict[str, Any] | list[dict[str, Any]],
        patch_type: PatchType = PatchType.MERGE,
    ) -> None:  # fmt: skip
        """Send one PATCH of ``target`` as kube-nudge, and count it; until the caches show
        it, passes over ``target`` wait for them (``StrategyContext.expectations``)."""
        key = target.key
        if self._passes.get(key):
            raise SecondWrite(f"{target}: a second PATCH in one pass")
        path = target.kind.resource.path(target.namespace, target.name)
        if key in self._passes:
            self._tried.add(key)
        written = await send(self._context.client, Patch(path, body, patch_type))
        if key in self._passes:  # counted once made: a refused precondition wrote nothing
            self._passes[key] += 1
        self._context.expectations.wrote(target.key, written)
        self._context.metrics.writes.labels(kind=target.kind.resource.kind).inc()
