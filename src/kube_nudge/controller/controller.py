"""Wires the data flow together:

watch events → informers keeping projections → reverse index (source → workloads) →
deduplicating, debouncing work queue of workload keys → workers running the reconciler.

The controller owns the rollout book (``book.py``: what it knows of each workload's
rollout between passes; the workload watch handler and the reconciler share it) and hands
each pass's ``Outcome`` to ``NextLooks`` (``nextlook.py``), the one place that arranges
a workload's next look.

Two runnables: ``Cache`` (informers and handlers) runs on every replica, so a standby's
caches are warm when it takes over; ``Workers`` needs the leader. Every time the workers
start, every workload is queued once (level-triggered): a restart or leader change with
nothing changed writes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube_nudge.controller.book import RolloutBook
from kube_nudge.controller.nextlook import NextLooks
from kube_nudge.controller.pending_kinds import PendingKinds
from kube_nudge.controller.reconciler import Fleet, Outcome, Reconciler, WorkloadKey
from kube_nudge.controller.replacer import PodReplacer
from kube_nudge.kube import resources
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import WARNING, EventRecorder, ObjectRef
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.pods import oldest_container_start
from kube_nudge.kube.resources import Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, WorkloadSpec, resolve
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadDefaults,
    WorkloadView,
    project_source,
    project_workload,
)
from kube_nudge.model.annotations import mistyped_opt_in
from kube_nudge.model.pacing import DEFAULT_QUIET_WINDOW, hold_for_change, hold_for_own_event
from kube_nudge.notifications.model import Notification
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.index import ReverseIndex
from kube_nudge.runtime.manager import Runnable
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.queue import WorkQueue
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.registry import (
    build_strategies,
    owned_source_labels,
    product_defaults,
)
from kube_nudge.strategies.writes import annotate_workload

log = logging.getLogger(__name__)
_MAX_MISTYPED = 10_000

#: Secrets no pod template can consume as config: skipped server-side, never listed.
SECRET_FIELD_SELECTOR = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token"  # noqa: S105  # nosec B105 # a field selector, not a password


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """What to watch and how hard to work."""

    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    kinds: tuple[WorkloadKind, ...] = BUILTIN_KINDS
    # --workload kinds the API server did not serve at start: retried, watched once served.
    pending_kinds: tuple[WorkloadSpec, ...] = ()
    defaults: WorkloadDefaults = field(default_factory=product_defaults)
    workers: int = 64
    source_selector: str | None = None
    workload_selector: str | None = None
    page_size: int = 500
    # Watchdog: re-list when a watch brings no byte (not even a bookmark) for this long.
    watch_inactivity: float = 90.0
    # Rollouts in progress at once, cluster-wide (None: no limit).
    max_concurrent_rollouts: int | None = None
    # The quiet window of `debounce: auto` for writers not known to be slower (pacing.py).
    quiet_window: float = DEFAULT_QUIET_WINDOW


class Controller:
    """The kube-nudge controller: its caches, queue and reconciler, and the runnables
    (``cache`` on every replica, ``workers`` on the leader) that drive them."""

    def __init__(
        self,
        client: KubeClient,
        options: ControllerOptions,
        *,
        hmac_key: bytes,
        metrics: Metrics,
        recorder: EventRecorder,
        clock: Clock = SYSTEM_CLOCK,
        notify: Callable[[Notification], None] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.metrics = metrics
        self.events = BackgroundEvents(
            recorder, on_failure=lambda: metrics.errors.labels(stage="event").inc()
        )
        self.index: ReverseIndex[WorkloadKey] = ReverseIndex()
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(monotonic=clock.monotonic)
        context = StrategyContext(client, self.events, metrics, hmac_key, clock=clock)
        context = dataclasses.replace(context, notify=notify) if notify is not None else context
        strategies = build_strategies(context)
        self.book = RolloutBook(
            self.workload, capped=lambda view: strategies[view.settings.strategy].capped,
            metrics=metrics, clock=clock,
            count_rolling=options.max_concurrent_rollouts is not None,
        )  # fmt: skip
        self.reconciler = Reconciler(
            hmac_key=hmac_key,
            workload=self.workload,
            source=self.source,
            strategies=strategies,
            events=self.events,
            metrics=metrics,
            pod_start=lambda namespace, selector: oldest_container_start(
                client, namespace, selector
            ),
            clock=clock,
            fleet=Fleet(self.index.consumers, options.max_concurrent_rollouts),
            annotate=lambda target, annotations: annotate_workload(context, target, annotations),
            window_open=lambda key: self.queue.window_open(key),
            notify=notify,
            book=self.book,
        )
        self.looks = NextLooks(self.queue, waiting=self.book.waiting, look_again=self._look_again)
        self._sources, self._workloads = self._informers()
        self._gauges()
        self.synced = asyncio.Event()
        self._mistyped: dict[tuple[str, str, str], str] = {}  # reported once per message
        self.cache = Cache(self)
        self.workers = Workers(self)
        self.replacer = PodReplacer(
            client, self.events, metrics, source=self.source, synced=self.synced, clock=clock,
            sources=lambda: [SourceRef(k, *key) for k in SourceKind for key in self.source_keys(k)],
        )  # fmt: skip
        self.pending_kinds = self._pending_kinds()

    def _pending_kinds(self) -> PendingKinds:
        """The retry of ``--workload`` kinds not served yet: watched once they are."""
        return PendingKinds(
            self.options.pending_kinds,
            resolve=lambda spec: resolve(self.client, spec),
            watch=self.watch_kind,
            metrics=self.metrics,
        )

    def _informers(
        self,
    ) -> tuple[
        dict[SourceKind, list[Informer[SourceView]]],
        dict[WorkloadKind, list[Informer[WorkloadView]]],
    ]:
        """The source informers by kind and the workload informers by kind, one per
        watched namespace (or one for all)."""
        scopes: tuple[str | None, ...] = self.options.namespaces or (None,)
        sources = {
            SourceKind.CONFIGMAP: [
                self._source_informer(resources.CONFIGMAPS, SourceKind.CONFIGMAP, ns, None)
                for ns in scopes
            ],
            SourceKind.SECRET: [
                self._source_informer(
                    resources.SECRETS, SourceKind.SECRET, ns, SECRET_FIELD_SELECTOR
                )
                for ns in scopes
            ],
        }
        workloads = {
            kind: [self._workload_informer(kind, ns) for ns in scopes]
            for kind in self.options.kinds
        }
        return sources, workloads

    def _gauges(self) -> None:
        """Gauges read the state they report when scraped, never set at each call site."""
        metrics = self.metrics
        for kind in self.options.kinds:
            metrics.kind_available.labels(resource=str(kind.resource)).set(1)
            metrics.seed_kind(kind.resource.kind)
        metrics.seed_holds(r for model in self.options.defaults.extensions
                           for r in model.hold_reasons)  # fmt: skip
        metrics.queue_depth.set_function(lambda: len(self.queue))
        self._gauge_tracked(resources.CONFIGMAPS, self._sources[SourceKind.CONFIGMAP])
        self._gauge_tracked(resources.SECRETS, self._sources[SourceKind.SECRET])
        for kind, group in self._workloads.items():
            self._gauge_tracked(kind.resource, group)

    @property
    def runnables(self) -> Sequence[Runnable]:
        """What the manager runs: the caches everywhere (and, if some ``--workload`` isn't
        served yet, its retry), the workers on the leader."""
        if self.options.pending_kinds:
            return (self.cache, self.pending_kinds, self.workers, self.replacer)
        return (self.cache, self.workers, self.replacer)

    def watch_kind(self, kind: WorkloadKind) -> None:
        """Start watching a workload kind that became available after start. Its workloads
        are queued as its informers list them; readiness does not wait for them."""
        if any(str(known.resource) == str(kind.resource) for known in self._workloads):
            log.warning("%s is already watched", kind)
            return
        scopes: tuple[str | None, ...] = self.options.namespaces or (None,)
        informers = [self._workload_informer(kind, ns) for ns in scopes]
        self._workloads[kind] = informers
        self._gauge_tracked(kind.resource, informers)
        self.metrics.seed_kind(kind.resource.kind)
        self.cache.start(informers)

    # -- informers and handlers -------------------------------------------------------------

    def informers(self) -> list[Informer[Any]]:
        """Every informer, sources first."""
        found: list[Informer[Any]] = [i for group in self._sources.values() for i in group]
        return found + [i for group in self._workloads.values() for i in group]

    def _gauge_tracked(self, resource: Resource, informers: Sequence[Informer[Any]]) -> None:
        """``kube_nudge_objects_tracked{resource}``: the caches' sizes, read when scraped."""
        self.metrics.objects_tracked.labels(resource=str(resource)).set_function(
            lambda: sum(len(informer.store) for informer in informers)
        )

    def _restart_counter(self, resource: Resource) -> Any:
        self.metrics.seed_watch(str(resource))

        def count(reason: str) -> None:
            self.metrics.watch_restarts.labels(resource=str(resource), reason=reason).inc()

        return count

    def _source_informer(
        self, resource: Resource, kind: SourceKind, namespace: str | None, fields: str | None
    ) -> Informer[SourceView]:
        config = InformerConfig(
            namespace=namespace,
            label_selector=self.options.source_selector,
            field_selector=fields,
            page_size=self.options.page_size,
            inactivity_timeout=self.options.watch_inactivity,
        )

        def on_change(key: Key, old: SourceView | None, new: SourceView | None) -> None:
            self._source_changed(resource, SourceRef(kind, *key), old, new)

        compat = self.options.defaults.compat
        owned = owned_source_labels()

        def project(obj: dict[str, Any]) -> SourceView | None:
            # A strategy's own objects (copies) are never sources: not kept. (Filtered here,
            # not by a label selector on the watch: in a fault run such a watch resumed after
            # an API server restart without the 410 that makes every other watch re-list.)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            return None if not owned.isdisjoint(labels) else project_source(obj, compat=compat)

        return Informer(
            self.client, resource, project, on_change, config,
            on_restart=self._restart_counter(resource),
        )  # fmt: skip

    def _workload_informer(
        self, kind: WorkloadKind, namespace: str | None
    ) -> Informer[WorkloadView]:
        config = InformerConfig(
            namespace=namespace,
            label_selector=self.options.workload_selector,
            page_size=self.options.page_size,
            inactivity_timeout=self.options.watch_inactivity,
        )
        defaults = self.options.defaults

        def project(obj: dict[str, Any]) -> WorkloadView | None:
            view = project_workload(obj, kind.template_path, defaults, kind=kind.resource.kind)
            if view is None:
                self._report_mistyped_opt_in(kind, obj)
            return view

        def on_change(key: Key, old: WorkloadView | None, new: WorkloadView | None) -> None:
            self._workload_changed((kind, *key), old, new)

        return Informer(
            self.client, kind.resource, project, on_change, config,
            on_restart=self._restart_counter(kind.resource),
        )  # fmt: skip

    def _source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            self._report_source_errors(resource, ref, new)
        self.replacer.source_changed(ref, old, new)
        if old is not None and new is not None:
            if old.settings.ignore and new.settings.ignore:
                return  # changes to an ignored source never trigger anything
            if old.state == new.state and old.settings == new.settings:
                return  # labels, other annotations, or errors only
        if not self.synced.is_set():
            return  # every workload is queued once the initial lists are in
        writers = new.writers if new is not None else ()
        for key in self.index.consumers(ref):
            view = self.workload(key)
            if view is not None:
                debounce = view.settings.debounce
                self.queue.add(key, hold_for_change(debounce, writers, self.options.quiet_window))

    def _workload_changed(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None
    ) -> None:
        kind = key[0]
        self.index.update(key, old.consumed if old else (), new.consumed if new else ())
        own_write = self.book.observed(key, new)
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            log.warning("%s %s/%s: %s", kind.resource.kind, key[1], key[2], "; ".join(new.errors))
        synced = self.synced.is_set()
        if new is None:
            self.queue.forget(key)
        elif old is None and synced:
            # First sight adopts at once: the baseline must record the config the pods
            # started with, not what it has become a debounce window later.
            self.queue.add(key)
        elif synced and not (own_write and old is not None and old.same_but_records(new)):
            if self._dropped_record(key, old, new):
                self.queue.add(key)  # as at first sight: its next look adopts what runs
            else:
                # The workload's own event (its status, an edit of its spec or annotations)
                # is looked at a debounce later, but opens no window: a config change
                # arriving meanwhile still waits its whole window, from its own time.
                self._add_own(key, new)
        if synced and old is not None and new is not None and _rollout_moved(old, new):
            self.looks.rollout_moved(key)

    def _add_own(self, key: WorkloadKey, view: WorkloadView) -> None:
        """Queue an event of the workload's own: opens no window (runtime/queue.py)."""
        debounce = view.settings.debounce
        hold = hold_for_change(debounce, (), self.options.quiet_window)
        self.queue.add_own(key, hold_for_own_event(debounce), hold)

    def _look_again(self, key: WorkloadKey) -> None:
        """Queue ``key`` for another workload's rollout moving on (``NextLooks``): an event
        not of this one's config, so no window."""
        if (view := self.workload(key)) is not None:
            self._add_own(key, view)

    def _dropped_record(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView
    ) -> bool:
        """Whether an edit took away the hash kube-nudge recorded on ``key`` (a template
        applied without it), with nothing remembered instead: the next look then adopts
        what the sources hold, as the restarted pods read it now, so it must be now."""
        memory = self.book.memory(key)
        return (
            old is not None
            and old.applied_hash is not None
            and new.applied_hash is None
            and new.has_template
            and (memory is None or memory.applied is None)
        )

    def _report_mistyped_opt_in(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        """A workload left out because its opt-in is not a boolean (`enabled: "yes"`): the
        combined Warning Event ``InvalidAnnotation`` and a log line, once per message, as
        for opted-in workloads (the reconciler) and sources, instead of silence."""
        metadata = obj.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        errors = mistyped_opt_in(metadata.get("annotations"), namespace, self.options.defaults)
        key = (str(kind.resource), namespace, name)
        message = "; ".join(errors)
        if self._mistyped.get(key, "") == message:
            return
        if not errors:
            self._mistyped.pop(key, None)
            return
        if len(self._mistyped) >= _MAX_MISTYPED:  # deleted ones are never seen again
            self._mistyped.clear()
        self._mistyped[key] = message
        log.warning("%s %s/%s: not opted in: %s", kind.resource.kind, namespace, name, message)
        uid = str(metadata.get("uid") or "")
        if uid:
            ref = ObjectRef(kind.resource.api_version, kind.resource.kind, namespace, name, uid)
            self.events.post(ref, WARNING, "InvalidAnnotation", message)

    def _report_source_errors(self, resource: Resource, ref: SourceRef, view: SourceView) -> None:
        log.warning("%s: %s", ref, "; ".join(view.errors))
        if not view.uid:
            return
        obj = ObjectRef(resource.api_version, resource.kind, ref.namespace, ref.name, view.uid)
        self.events.post(obj, WARNING, "InvalidAnnotation", "; ".join(view.errors))

    # -- lookups used by the reconciler ------------------------------------------------------

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of a ConfigMap/Secret, if it exists (and is in scope)."""
        for informer in self._sources[ref.kind]:
            if informer.config.namespace in (None, ref.namespace):
                return informer.store.get((ref.namespace, ref.name))
        return None

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        """The cached view of an opted-in workload."""
        kind, namespace, name = key
        for informer in self._workloads.get(kind, ()):
            if informer.config.namespace in (None, namespace):
                return informer.store.get((namespace, name))
        return None

    def source_keys(self, kind: SourceKind) -> list[Key]:
        """(namespace, name) of every cached ConfigMap or Secret."""
        return [key for informer in self._sources[kind] for key in informer.store]

    def workload_keys(self) -> list[WorkloadKey]:
        """Every opted-in workload currently cached."""
        return [
            (kind, namespace, name)
            for kind, group in self._workloads.items()
            for informer in group
            for namespace, name in informer.store
        ]

    # -- state -------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once every initial list has completed."""
        return self.synced.is_set()

    @property
    def healthy(self) -> bool:
        """False if an informer task died."""
        return self.cache.healthy

    async def settled(self, timeout: float) -> None:
        """Wait until no work is queued or running (for tests and the demo)."""
        async with asyncio.timeout(timeout):
            while len(self.queue) or self.queue.busy:
                await self.queue.wait_idle()
            await self.events.flush()

    def enqueue_all(self) -> None:
        """Queue every cached workload once, at once (level-triggered resync)."""
        for key in self.workload_keys():
            self.queue.add(key)


class Cache:
    """Runs every informer; sets ``Controller.synced`` once the initial lists are in."""

    name = "cache"
    needs_leader = False

    def __init__(self, controller: Controller) -> None:
        self._controller = controller
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False

    @property
    def healthy(self) -> bool:
        """False if an informer task died."""
        return not any(task.done() for task in self._tasks)

    def start(self, informers: Sequence[Informer[Any]]) -> None:
        """Run informers added after start (``run`` starts those present by then)."""
        if self._running:
            self._tasks += [asyncio.create_task(i.run(), name=str(i.resource)) for i in informers]

    async def run(self) -> None:
        """Start informers, wait for the initial lists, then serve until cancelled."""
        controller = self._controller
        informers = controller.informers()
        self._running = True
        self._tasks = [asyncio.create_task(i.run(), name=str(i.resource)) for i in informers]
        try:
            await asyncio.gather(*(informer.synced.wait() for informer in informers))
            controller.synced.set()
            log.info(
                "caches synced: %d workloads opted in, %d sources referenced",
                len(controller.workload_keys()),
                len(controller.index),
            )
            # An informer added later by ``start`` that dies shows in ``healthy`` (liveness).
            await asyncio.gather(*self._tasks)
        finally:
            self._running = False
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)


class Workers:
    """Reconciles queued workloads with N concurrent workers, only while leading."""

    name = "workers"
    needs_leader = True

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    async def run(self) -> None:
        """Wait for the caches, queue every workload once, then work until cancelled."""
        controller = self._controller
        await controller.synced.wait()
        controller.enqueue_all()
        workers = [
            asyncio.create_task(self._work(), name=f"worker-{n}")
            for n in range(controller.options.workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            controller.looks.stop()  # the next leader's resync follows every rollout again

    async def _work(self) -> None:
        controller = self._controller
        queue, metrics = controller.queue, controller.metrics
        while True:
            key = await queue.get()
            outcome = Outcome("failed")  # a crashed pass is retried as a failed one
            try:
                outcome = await controller.reconciler.reconcile(key)
            except Exception:
                metrics.errors.labels(stage="reconcile").inc()
                log.exception("reconciling %s %s/%s failed", key[0], key[1], key[2])
            finally:
                queue.done(key)
            controller.looks.after(key, outcome)  # its next look: only what it asked for


def _rollout_moved(old: WorkloadView, new: WorkloadView) -> bool:
    """Whether what others may wait for changed: progress, a failure, a release."""
    return (old.progress, old.failed, old.released_at, old.rolled_at) != (
        new.progress,
        new.failed,
        new.released_at,
        new.rolled_at,
    )
