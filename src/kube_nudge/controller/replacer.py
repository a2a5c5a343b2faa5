"""Replaces the pods a ConfigMap or Secret names with `kube-nudge.io/pod-selector` once its
data changed, through the Eviction API, so PodDisruptionBudgets hold.

A runnable on the leader with its own queue of sources. Each pass over a source lists the
matching pods (server-side label selector) and, when some are stale, the namespace's
PodDisruptionBudgets; `model.replacement` decides; this carries it out and looks again in
``POLL`` seconds until nothing is left to evict. Nothing is written to the source: staleness
comes from the pods' start times and the source's `managedFields` times, so a restart or a
new leader (every source with a selector is queued when the runnable starts) picks up where
the last one stopped. What it keeps in memory only shapes Events and pacing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.events import NORMAL, WARNING, ObjectRef
from kube_nudge.kube.pods import matching_pods, pod_record
from kube_nudge.kube.resources import PODDISRUPTIONBUDGETS, PODS, source_resource
from kube_nudge.model import SourceRef, SourceView
from kube_nudge.model.annotations import POD_SELECTOR
from kube_nudge.model.replacement import (
    STALL_AFTER,
    Floor,
    PodRecord,
    plan_replacement,
    replacement_selector,
    stale,
)
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.queue import WorkQueue

__all__ = ["POLL", "PodReplacer"]

log = logging.getLogger(__name__)

POLL = 2.0
"""Seconds between passes while pods are being replaced."""
WORKERS = 4
#: One object's metadata, never a Secret's data (for the uid an Event needs).
_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_MAX_NAMED = 10


@dataclass(slots=True)
class _Progress:
    """This process's account of one source's current replacement (lost on restart: it
    only words Events; the next pass recomputes what is stale)."""

    changed_at: float | None
    evicted: int = 0
    warned: bool = False
    floor: Floor | None = None
    waiting_since: float | None = None
    """When the current wait began (pods not Ready, terminating, replacements missing)."""
    stall_warned: bool = False


class PodReplacer:
    """Evicts stale pods matching sources' `kube-nudge.io/pod-selector`, only while leading."""

    name = "pod-replacer"
    needs_leader = True

    def __init__(
        self,
        client: KubeClient,
        events: BackgroundEvents,
        metrics: Metrics,
        *,
        source: Callable[[SourceRef], SourceView | None],
        sources: Callable[[], Iterable[SourceRef]],
        synced: asyncio.Event,
        clock: Clock = SYSTEM_CLOCK,
        workers: int = WORKERS,
    ) -> None:
        self._client = client
        self._events = events
        self._metrics = metrics
        self._source = source
        self._sources = sources
        self._synced = synced
        self._clock = clock
        self._workers = workers
        self._queue: WorkQueue[SourceRef] | None = None  # only while running
        self._progress: dict[SourceRef, _Progress] = {}

    def source_changed(
        self, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        """A source that names pods before or after its change (the handler table's
        filter): queued when it still does and its data or settings changed, forgotten
        when it no longer does."""
        queue = self._queue
        if queue is None:
            return  # not leading (or caches not synced): ``run`` queues every source
        if new is None or replacement_selector(new) is None:
            queue.forget(ref)
            self._progress.pop(ref, None)
            return
        before = None if old is None else (old.state, old.settings, old.data_changed_at)
        if before != (new.state, new.settings, new.data_changed_at):
            queue.add(ref)

    async def run(self) -> None:
        """Wait for the caches, queue every source with a selector, then work until
        cancelled."""
        await self._synced.wait()
        queue = self._queue = WorkQueue(monotonic=self._clock.monotonic)
        for ref in self._sources():
            if replacement_selector(self._source(ref)) is not None:
                queue.add(ref)
        workers = [
            asyncio.create_task(self._work(queue), name=f"pod-replacer-{n}")
            for n in range(self._workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            self._queue = None
            self._progress.clear()  # the next leader recomputes; only Event wording is lost
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _work(self, queue: WorkQueue[SourceRef]) -> None:
        while True:
            ref = await queue.get()
            again: float | None = None
            failed = False
            try:
                again = await self.replace(ref)
            except Exception:  # an API error, or a bug: logged, retried with backoff
                self._metrics.errors.labels(stage="replace").inc()
                log.exception("replacing pods of %s failed", ref)
                failed = True
            finally:
                queue.done(ref)
            queue.settle(ref, failed=failed, again=again)

    async def replace(self, ref: SourceRef) -> float | None:
        """One pass over ``ref``'s pods; the delay before the next pass, None when done."""
        view = self._source(ref)
        selector = replacement_selector(view)
        if view is None or selector is None:
            self._progress.pop(ref, None)
            return None
        progress = self._progress.get(ref)
        if progress is None:
            progress = self._progress[ref] = _Progress(view.data_changed_at)
        elif progress.changed_at != view.data_changed_at:
            # Changed again in the middle of a replacement: warn again; the pods evicted
            # so far still count, and their replacements are still waited for.
            progress.changed_at, progress.warned = view.data_changed_at, False
        pods = await self._pods(ref.namespace, selector)
        budgets: list[object] = []
        if any(pod.owned and stale(pod, view.data_changed_at) for pod in pods):
            budgets = await self._budgets(ref.namespace)
        now = self._clock.now()
        plan = plan_replacement(pods, view.data_changed_at, budgets, progress.floor, now)
        if plan.unowned and not progress.warned:
            progress.warned = True
            await self._warn_unowned(ref, selector, plan.unowned)
        if plan.waiting:
            log.debug("%s: waiting before evicting more pods: %s", ref, plan.waiting)
            await self._note_waiting(ref, selector, progress, plan.waiting, now)
            return POLL
        progress.waiting_since, progress.stall_warned = None, False
        if plan.done:
            del self._progress[ref]
            if progress.evicted:
                await self._report_done(ref, selector, progress.evicted)
            return None
        # Set first: should an eviction fail after others went, their replacements are
        # still waited for.
        progress.floor = Floor(plan.live, now)
        for pod in plan.evict:
            outcome = await self._evict(ref, pod)
            if outcome == "blocked":
                break
            if outcome == "evicted":
                progress.evicted += 1
        return POLL

    async def _pods(self, namespace: str, selector: str) -> list[PodRecord]:
        return [pod_record(pod) for pod in await matching_pods(self._client, namespace, selector)]

    async def _budgets(self, namespace: str) -> list[object]:
        pages = self._client.list_pages(PODDISRUPTIONBUDGETS.path(namespace))
        return [(pdb.get("spec") or {}).get("selector") async for page, _ in pages for pdb in page]

    async def _evict(self, ref: SourceRef, pod: PodRecord) -> Literal["evicted", "gone", "blocked"]:
        """Evict one pod. Blocked: a budget refused (429), no more this pass."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": ref.namespace},
            # This very pod: a StatefulSet's replacement has the same name.
            "deleteOptions": {"preconditions": {"uid": pod.uid}} if pod.uid else {},
        }
        try:
            await self._client.request(
                "POST",
                PODS.path(ref.namespace, pod.name, "eviction"),
                body=body,
                retry_throttled=False,
            )
        except ApiError as exc:
            if exc.status == 429:
                self._metrics.pod_evictions.labels(outcome="blocked").inc()
                log.info("%s: evicting pod %s refused for now: %s", ref, pod.name, exc.message)
                return "blocked"
            if exc.not_found or exc.conflict:
                return "gone"  # already, or replaced meanwhile: the next pass sees
            raise
        self._metrics.pod_evictions.labels(outcome="evicted").inc()
        log.info("%s: evicted pod %s, started before the data changed", ref, pod.name)
        return "evicted"

    async def _warn_unowned(self, ref: SourceRef, selector: str, names: tuple[str, ...]) -> None:
        self._metrics.pods_not_replaced.inc(len(names))
        shown = ", ".join(names[:_MAX_NAMED])
        if len(names) > _MAX_NAMED:
            shown += f" and {len(names) - _MAX_NAMED} more"
        message = (
            f"not evicting pods matching {POD_SELECTOR} {selector} that started before the "
            f"data changed but have no controller to replace them: {shown}; restart them "
            "yourself to pick up the change"
        )
        log.warning("%s: %s", ref, message)
        await self._post(ref, WARNING, "PodNotReplaced", message)

    async def _note_waiting(
        self, ref: SourceRef, selector: str, progress: _Progress, waiting: str, now: float
    ) -> None:
        """Warn once per wait that has lasted ``STALL_AFTER``: a pod that never gets Ready
        would otherwise hold the replacement with nothing but a debug line."""
        if progress.waiting_since is None:
            progress.waiting_since = now
        if progress.stall_warned or now - progress.waiting_since < STALL_AFTER:
            return
        progress.stall_warned = True
        minutes = (now - progress.waiting_since) / 60
        message = (
            f"replacing pods matching {POD_SELECTOR} {selector} has waited {minutes:.0f} min "
            f"({waiting}); it goes on by itself once that clears"
        )
        log.warning("%s: %s", ref, message)
        await self._post(ref, WARNING, "PodReplacementStalled", message)

    async def _report_done(self, ref: SourceRef, selector: str, count: int) -> None:
        pods = "pod" if count == 1 else "pods"
        message = (
            f"replaced {count} {pods} matching {selector} that started before the data "
            "changed (evicted, PodDisruptionBudgets respected)"
        )
        log.info("%s: %s", ref, message)
        await self._post(ref, NORMAL, "PodsReplaced", message)

    async def _post(self, ref: SourceRef, event_type: str, reason: str, message: str) -> None:
        resource = source_resource(ref.kind)
        try:
            meta = await self._client.request(
                "GET", resource.path(ref.namespace, ref.name), accept=_METADATA
            )
        except ApiError as exc:
            log.warning("%s: no %s Event: %s", ref, reason, exc)
            return
        uid = str((meta.get("metadata") or {}).get("uid") or "")
        obj = ObjectRef(resource.api_version, resource.kind, ref.namespace, ref.name, uid)
        self._events.post(obj, event_type, reason, message)
