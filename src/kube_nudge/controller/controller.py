"""Wires the data flow together:

watch events → informers keeping projections → reverse index (source → workloads) →
deduplicating, debouncing work queue of workload keys → workers running the reconciler.

Workers run only while this replica leads; informers run always, so a standby's caches
are warm when it takes over. Every time workers start, every workload is queued once
(level-triggered): a restart or leader change with nothing changed writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from kube_nudge.controller.index import ReverseIndex
from kube_nudge.controller.queue import WorkQueue
from kube_nudge.controller.reconciler import Reconciler, WorkloadKey
from kube_nudge.controller.views import (
    Defaults,
    SourceView,
    WorkloadKind,
    WorkloadView,
    project_source,
    project_workload,
)
from kube_nudge.kube import resources
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import WARNING, EventRecorder, ObjectRef
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.resources import Resource
from kube_nudge.model import BUILTIN_PATHS, SourceKind, SourceRef
from kube_nudge.model.annotations import (
    DEFAULT_DEBOUNCE,
    DEFAULT_MAX_ROLLOUTS,
    DEFAULT_ROLLOUT_WINDOW,
)
from kube_nudge.ops.metrics import Metrics

log = logging.getLogger(__name__)

#: Secrets no pod template can consume as config: skipped server-side, never listed.
SECRET_FIELD_SELECTOR = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token"  # noqa: S105  # nosec B105 # a field selector, not a password

BUILTIN_KINDS = tuple(
    WorkloadKind(resource, BUILTIN_PATHS[(resource.group, resource.plural)])
    for resource in (
        resources.DEPLOYMENTS,
        resources.STATEFULSETS,
        resources.DAEMONSETS,
        resources.CRONJOBS,
    )
)


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """What to watch and how hard to work."""

    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    kinds: tuple[WorkloadKind, ...] = BUILTIN_KINDS
    defaults: Defaults = field(
        default_factory=lambda: Defaults(
            DEFAULT_DEBOUNCE, DEFAULT_MAX_ROLLOUTS, DEFAULT_ROLLOUT_WINDOW
        )
    )
    workers: int = 64
    source_selector: str | None = None
    workload_selector: str | None = None
    page_size: int = 500
    # Watchdog: re-list when a watch brings no byte (not even a bookmark) for this long.
    watch_inactivity: float = 90.0


class Controller:
    """The kube-nudge controller; ``run`` until cancelled, ``set_leader`` to gate writes."""

    def __init__(
        self,
        client: KubeClient,
        options: ControllerOptions,
        *,
        hmac_key: bytes,
        metrics: Metrics,
        recorder: EventRecorder,
    ) -> None:
        self.client = client
        self.options = options
        self.metrics = metrics
        self.recorder = recorder
        self.index: ReverseIndex[WorkloadKey] = ReverseIndex()
        self.queue: WorkQueue[WorkloadKey] = WorkQueue()
        self.reconciler = Reconciler(
            client,
            hmac_key=hmac_key,
            workload=self.workload,
            source=self.source,
            recorder=recorder,
            metrics=metrics,
        )
        scopes: tuple[str | None, ...] = options.namespaces or (None,)
        self._sources: dict[SourceKind, list[Informer[SourceView]]] = {
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
        self._workloads: dict[WorkloadKind, list[Informer[WorkloadView]]] = {
            kind: [self._workload_informer(kind, ns) for ns in scopes] for kind in options.kinds
        }
        self._synced = False
        self._tasks: list[asyncio.Task[None]] = []
        self._workers: list[asyncio.Task[None]] = []

    # -- informers and handlers -------------------------------------------------------------

    def _informers(self) -> list[Informer[Any]]:
        found: list[Informer[Any]] = [i for group in self._sources.values() for i in group]
        return found + [i for group in self._workloads.values() for i in group]

    def _restart_counter(self, resource: Resource) -> Any:
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

        return Informer(
            self.client, resource, project_source, on_change, config,
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
            return project_workload(obj, kind, defaults)

        def on_change(key: Key, old: WorkloadView | None, new: WorkloadView | None) -> None:
            self._workload_changed((kind, *key), old, new)

        return Informer(
            self.client, kind.resource, project, on_change, config,
            on_restart=self._restart_counter(kind.resource),
        )  # fmt: skip

    def _source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        self.metrics.objects_tracked.labels(resource=str(resource)).set(
            sum(len(i.store) for i in self._sources[ref.kind])
        )
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            self._report_source_errors(resource, ref, new)
        if old is not None and new is not None:
            if old.settings.ignore and new.settings.ignore:
                return  # changes to an ignored source never trigger anything
            if old.state == new.state and old.settings == new.settings:
                return  # labels, other annotations, or errors only
        if not self._synced:
            return  # every workload is queued once the initial lists are in
        for key in self.index.consumers(ref):
            view = self.workload(key)
            if view is not None:
                self.queue.add(key, view.settings.debounce)
        self.metrics.queue_depth.set(len(self.queue))

    def _workload_changed(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None
    ) -> None:
        kind = key[0]
        self.index.update(key, old.consumed if old else (), new.consumed if new else ())
        own_write = self.reconciler.observed(key, new)
        self.metrics.objects_tracked.labels(resource=str(kind.resource)).set(
            sum(len(i.store) for i in self._workloads[kind])
        )
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            log.warning("%s %s/%s: %s", kind.resource.kind, key[1], key[2], "; ".join(new.errors))
        if new is None:
            self.queue.forget(key)
        elif old is None and self._synced:
            # First sight adopts at once: the baseline must record the config the pods
            # started with, not what it has become a debounce window later.
            self.queue.add(key)
        elif self._synced and not (own_write and _only_hashes_differ(old, new)):
            self.queue.add(key, new.settings.debounce)
        self.metrics.queue_depth.set(len(self.queue))

    def _report_source_errors(self, resource: Resource, ref: SourceRef, view: SourceView) -> None:
        log.warning("%s: %s", ref, "; ".join(view.errors))
        if not view.uid:
            return
        obj = ObjectRef(resource.api_version, resource.kind, ref.namespace, ref.name, view.uid)
        self.reconciler.event(obj, WARNING, "InvalidAnnotation", "; ".join(view.errors))

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

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once every initial list has completed."""
        return self._synced

    @property
    def healthy(self) -> bool:
        """False if an informer task died."""
        return not any(task.done() for task in self._tasks)

    async def run(self) -> None:
        """Start informers, wait for the initial lists, then serve until cancelled."""
        self._tasks = [
            asyncio.create_task(inf.run(), name=str(inf.resource)) for inf in self._informers()
        ]
        try:
            await asyncio.gather(*(inf.synced.wait() for inf in self._informers()))
            self._synced = True
            log.info(
                "caches synced: %d workloads opted in, %d sources referenced",
                len(self.workload_keys()),
                len(self.index),
            )
            if self._workers:  # became leader before the caches were ready
                self._enqueue_all()
            await asyncio.gather(*self._tasks)
        finally:
            self.set_leader(False)
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def set_leader(self, leading: bool) -> None:
        """Start the workers (and queue every workload), or stop them at once."""
        self.metrics.is_leader.set(1 if leading else 0)
        if leading and not self._workers:
            self._workers = [
                asyncio.create_task(self._work(), name=f"worker-{n}")
                for n in range(self.options.workers)
            ]
            if self._synced:
                self._enqueue_all()
        elif not leading and self._workers:
            for task in self._workers:
                task.cancel()
            self._workers = []

    async def settled(self, timeout: float) -> None:
        """Wait until no work is queued or running (for tests and the demo)."""
        async with asyncio.timeout(timeout):
            while len(self.queue) or self.queue.busy:
                await self.queue.wait_idle()
            await self.reconciler.flush_events()

    def _enqueue_all(self) -> None:
        for key in self.workload_keys():
            self.queue.add(key)
        self.metrics.queue_depth.set(len(self.queue))

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            requeue: float | None = None
            try:
                outcome = await self.reconciler.reconcile(key)
                requeue = outcome.requeue_after
            except Exception:
                self.metrics.errors.labels(stage="reconcile").inc()
                log.exception("reconciling %s %s/%s failed", key[0], key[1], key[2])
                requeue = 5.0
            finally:
                self.queue.done(key)
            if requeue is not None:
                self.queue.add(key, requeue)
            self.metrics.queue_depth.set(len(self.queue))


def _only_hashes_differ(old: WorkloadView | None, new: WorkloadView) -> bool:
    """True if nothing but what kube-nudge writes changed (our own write echoed back:
    nothing to reconcile)."""
    return old is not None and old == replace(
        new,
        template_hash=old.template_hash,
        baseline_hash=old.baseline_hash,
        rolled_at=old.rolled_at,
    )
