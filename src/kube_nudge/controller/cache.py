"""The caches: one informer per watched resource and namespace, keeping projections, the
index of which workloads consume each source, the lookups everyone else reads them through
(``Reader``), and the gauges that report them; with analysis on, the analysis templates
(``templates.py``).

Like controller-runtime's cache, it only keeps state: what each change means (which keys it
enqueues) is the handlers' (``handlers.py``), registered with ``add_handlers`` before it
runs. It runs on every replica, so a standby's caches are warm when it takes over.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from kube_nudge.controller.mounted_cache import MountedSources
from kube_nudge.controller.options import ControllerOptions
from kube_nudge.controller.reader import Inputs, OwnNews, OwnWrites, WorkloadKey
from kube_nudge.controller.runner_cache import Runners
from kube_nudge.controller.templates import TEMPLATE_RESOURCES, Templates
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Handler, Informer, InformerConfig, Key
from kube_nudge.kube.resources import Resource, mount_resource, source_resource
from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadView,
    project_source,
    project_workload,
)
from kube_nudge.model.runners import run_by, runs_elsewhere
from kube_nudge.model.source_kinds import SourceKindRow, kind_enabled, source_kind_rows
from kube_nudge.model.tracking import failure_recorded
from kube_nudge.runtime.index import ReverseIndex
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.registry import owned_source_labels

__all__ = ["Cache", "Handlers", "ObjectSources", "Sources"]

log = logging.getLogger(__name__)


def _dropped(*_: object) -> None:
    """What an informer calls before ``Cache.add_handlers``: nothing (it is not running)."""


class Handlers(Protocol):
    """What every change of what the caches keep is handed to (``handlers.py``): by the
    cache, or, for a source, by its informer (``source_handler``, registered on it)."""

    def source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        """A source changed (None: absent)."""
        ...

    def source_handler(self, kind: SourceKind, resource: Resource) -> Handler[SourceView]:
        """``source_changed`` as an informer of ``kind``'s objects calls it, by key."""
        ...

    def workload_changed(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None,
        news: OwnNews,
    ) -> None:  # fmt: skip
        """An opted-in workload changed (None: absent, or no longer opted in); ``news``:
        what that means for our own writes (``OwnWrites``, asked first)."""
        ...

    def left_out(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        """A workload the projection left out (not opted in, or an opt-in that isn't one)."""
        ...

    def runner_changed(self, key: WorkloadKey, view: WorkloadView | None) -> None:
        """The workload running ``key``'s template (``runner_cache.py``) changed; ``view``:
        ``key``'s, as ``workload`` gives it (None: not cached)."""
        ...


class Sources(Protocol):
    """One kind's sources as the caches keep them."""

    @property
    def resource(self) -> Resource:
        """What its informers watch."""
        ...

    @property
    def informers(self) -> Sequence[Informer[Any]]:
        """Its informers, one per watched scope."""
        ...

    def view(self, ref: SourceRef) -> SourceView | None:
        """The source's view, None if not known."""
        ...

    def keys(self) -> list[Key]:
        """(namespace, name) of every source known."""
        ...

    def add_handlers(self, handlers: Handlers) -> None:
        """Hand every change of a source to ``handlers`` from now on."""
        ...


class ObjectSources:
    """A kind held in its own objects: one informer of them per watched scope."""

    def __init__(
        self, kind: SourceKind, resource: Resource, informers: list[Informer[SourceView]]
    ) -> None:
        self.kind = kind
        self.resource = resource
        self.informers = informers

    def view(self, ref: SourceRef) -> SourceView | None:
        """The source's view, if it exists (and is in scope)."""
        for informer in self.informers:
            if informer.config.namespace in (None, ref.namespace):
                return informer.store.get((ref.namespace, ref.name))
        return None

    def keys(self) -> list[Key]:
        """(namespace, name) of every source kept."""
        return [key for informer in self.informers for key in informer.store]

    def add_handlers(self, handlers: Handlers) -> None:
        """Each informer hands its changes to ``handlers`` itself, by key."""
        for informer in self.informers:
            informer.handler = handlers.source_handler(self.kind, self.resource)


class Cache:
    """Informers, index and lookups (a ``Reader``); a runnable that sets ``synced`` once
    the initial lists are in."""

    name = "cache"
    needs_leader = False

    def __init__(self, client: KubeClient, options: ControllerOptions, metrics: Metrics) -> None:
        self._client = client
        self._options = options
        self._metrics = metrics
        self._handlers: Handlers | None = None
        self._own_writes: OwnWrites | None = None
        self.index: ReverseIndex[WorkloadKey] = ReverseIndex()
        """Which workloads consume each source, kept from every workload change."""
        self._failed: set[WorkloadKey] = set()
        """The workloads whose view records that their current rollout failed, kept from
        every workload change as the index is: the release gates ask on every rollout, and
        must not walk all consumers of a source (a fan-out to a thousand workloads would
        otherwise cost a million lookups)."""
        self.synced = asyncio.Event()
        scopes: tuple[str | None, ...] = options.namespaces or (None,)
        self._scopes = scopes
        # Each enabled kind's sources, from where its row says: its own objects, or the
        # statuses of its mounts (``mounted_cache.py``).
        self._sources: dict[SourceKind, Sources] = {
            row.kind: self._sources_of(row)
            for row in source_kind_rows()
            if kind_enabled(row.kind, options.defaults)
        }
        self._workloads = {
            kind: [self._workload_informer(kind, ns) for ns in scopes] for kind in options.kinds
        }
        self._runners = [self._runners_of(kind) for kind in options.kinds
                         if runs_elsewhere(kind.resource.group_kind)]  # fmt: skip
        self.templates = (
            Templates(client, options, self._start, self._restart_counter)
            if options.prometheus is not None
            else None
        )
        """The analysis templates, with analysis on (``--prometheus-url``)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        self._gauges()

    def add_handlers(self, handlers: Handlers, own_writes: OwnWrites) -> None:
        """What each change enqueues (before ``run``; events before it are dropped). A
        source's informer calls its handler itself, as client-go's ``AddEventHandler``
        registers one: the caches index no sources, so a source's change makes no stop
        here; a workload's goes through ``on_change``, which updates the indexes and asks
        ``own_writes`` (the rollout book) first, handing its answer to the handler: the
        handlers get the event and the queue, never the book."""
        self._handlers = handlers
        self._own_writes = own_writes
        for sources in self._sources.values():
            sources.add_handlers(handlers)

    # -- lookups (Reader) ------------------------------------------------------------------

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of a source, if it exists (and is in scope; a kind known once
        mounted: once mounted)."""
        sources = self._sources.get(ref.kind)
        return sources.view(ref) if sources is not None else None

    def workload(self, key: WorkloadKey) -> WorkloadView | None:
        """The cached view of an opted-in workload; if another workload runs its template
        (``runner_cache.py``), with that one's progress."""
        kind, namespace, name = key
        for informer in self._workloads.get(kind, ()):
            if informer.config.namespace in (None, namespace):
                view = informer.store.get((namespace, name))
                return self._joined(view, namespace, kind, name)
        return None

    def inputs(self, key: WorkloadKey) -> Inputs | None:
        """The cached view of an opted-in workload and of every source it consumes (what a
        pass assesses), read at once."""
        view = self.workload(key)
        if view is None:
            return None
        return Inputs(view, {ref: self.source(ref) for ref in view.consumed})

    def _joined(
        self, view: WorkloadView | None, namespace: str, kind: WorkloadKind, name: str
    ) -> WorkloadView | None:
        """``view`` with the progress of the workload running its template, if one does."""
        if view is None or not self._runners:
            return view
        owner = f"{kind.resource.group_kind}/{name}"
        for runners in self._runners:
            if (runner := runners.running(namespace, owner)) is not None:
                return dataclasses.replace(view, progress=run_by(runner, view.generation))
        return view

    def consumers(self, ref: SourceRef) -> list[tuple[WorkloadKey, WorkloadView]]:
        """The cached workloads whose templates consume ``ref`` (the index), with their
        views as ``workload`` gives them."""
        return [(key, view) for key in self.index.consumers(ref)
                if (view := self.workload(key)) is not None]  # fmt: skip

    def failed(self, key: WorkloadKey) -> bool:
        """Whether ``key``'s cached view records that its current rollout failed."""
        return key in self._failed

    def any_failed(self) -> bool:
        """Whether any cached workload records that its current rollout failed."""
        return bool(self._failed)

    def source_keys(self, kind: SourceKind) -> list[Key]:
        """(namespace, name) of every cached source of ``kind``."""
        sources = self._sources.get(kind)
        return sources.keys() if sources is not None else []

    def source_refs(self) -> list[SourceRef]:
        """Every cached source, of every kind."""
        kinds = [row.kind for row in source_kind_rows()]
        return [SourceRef(kind, *key) for kind in kinds for key in self.source_keys(kind)]

    def workload_keys(self) -> list[WorkloadKey]:
        """Every opted-in workload currently cached."""
        return [
            (kind, namespace, name)
            for kind, group in self._workloads.items()
            for informer in group
            for namespace, name in informer.store
        ]

    def informers(self) -> list[Informer[Any]]:
        """Every informer started with the caches, sources first (the templates' start once
        their kinds are served: ``templates.py``)."""
        found: list[Informer[Any]] = [
            i for group in self._sources.values() for i in group.informers
        ]
        found += [i for group in self._workloads.values() for i in group]
        return found + [i for runners in self._runners for i in runners.informers]

    # -- the informers ---------------------------------------------------------------------

    def _sources_of(self, row: SourceKindRow) -> Sources:
        """``row``'s sources: its own objects' informers, or its mount statuses'."""
        mounts = mount_resource(row.kind)
        if mounts is not None:
            restarts = self._restart_counter(mounts)
            configs = self._unfiltered_configs()
            return MountedSources(row.kind, mounts, self._client, configs, restarts)
        informers = [self._source_informer(row, ns) for ns in self._scopes]
        return ObjectSources(row.kind, source_resource(row.kind), informers)

    def _source_informer(self, row: SourceKindRow, namespace: str | None) -> Informer[SourceView]:
        resource = source_resource(row.kind)
        config = InformerConfig(
            namespace=namespace,
            label_selector=self._options.source_selector,
            field_selector=row.field_selector,
            page_size=self._options.page_size,
            inactivity_timeout=self._options.watch_inactivity,
        )

        compat = self._options.defaults.compat
        owned = owned_source_labels()

        def project(obj: dict[str, Any]) -> SourceView | None:
            # A strategy's own objects (copies) are never sources: not kept. (Filtered here,
            # not by a label selector on the watch: in a fault run such a watch resumed after
            # an API server restart without the 410 that makes every other watch re-list.)
            labels = (obj.get("metadata") or {}).get("labels") or {}
            return None if not owned.isdisjoint(labels) else project_source(obj, compat=compat)

        return Informer(
            self._client, resource, project, _dropped, config,
            on_restart=self._restart_counter(resource),
        )  # fmt: skip

    def _unfiltered_configs(self) -> list[InformerConfig]:
        """One informer config per watched scope, with no selector (mount statuses and
        Argo's objects carry no labels of the user's to select on)."""
        return [
            InformerConfig(
                namespace=namespace,
                page_size=self._options.page_size,
                inactivity_timeout=self._options.watch_inactivity,
            )
            for namespace in self._scopes
        ]

    def _workload_informer(
        self, kind: WorkloadKind, namespace: str | None
    ) -> Informer[WorkloadView]:
        config = InformerConfig(
            namespace=namespace,
            label_selector=self._options.workload_selector,
            page_size=self._options.page_size,
            inactivity_timeout=self._options.watch_inactivity,
        )
        defaults = self._options.defaults

        def project(obj: dict[str, Any]) -> WorkloadView | None:
            view = project_workload(
                obj, kind.template_path, defaults, kind=kind.resource.group_kind
            )
            if view is None and self._handlers is not None:
                self._handlers.left_out(kind, obj)
            return view

        def on_change(key: Key, old: WorkloadView | None, new: WorkloadView | None) -> None:
            workload = (kind, *key)
            # The indexes first, as client-go's indexers: a handler reads them updated.
            self.index.update(workload, old.consumed if old else (), new.consumed if new else ())
            if new is not None and failure_recorded(new):
                self._failed.add(workload)
            else:
                self._failed.discard(workload)
            if self._own_writes is not None and self._handlers is not None:
                news = self._own_writes.news(workload, new)
                self._handlers.workload_changed(workload, old, new, news)

        return Informer(
            self._client, kind.resource, project, on_change, config,
            on_restart=self._restart_counter(kind.resource),
        )  # fmt: skip

    def _runners_of(self, kind: WorkloadKind) -> Runners:
        """The informers of ``kind``'s workloads that run another's template."""
        configs = self._unfiltered_configs()

        def on_change(namespace: str, owner: str) -> None:
            group_kind, _, name = owner.partition("/")
            watched = [k for k in self._workloads if k.resource.group_kind == group_kind]
            if self._own_writes is not None and self._handlers is not None and watched:
                key = (watched[0], namespace, name)
                # Before sync too: a restart counts what is rolling.
                self._own_writes.progress_moved(key)
                self._handlers.runner_changed(key, self.workload(key))

        restarts = self._restart_counter(kind.resource)
        return Runners(self._client, kind, configs, on_change, restarts)

    def watch_kind(self, kind: WorkloadKind) -> None:
        """Start watching a workload kind that became available after start. Its workloads
        are queued as its informers list them; readiness does not wait for them."""
        if any(str(known.resource) == str(kind.resource) for known in self._workloads):
            log.warning("%s is already watched", kind)
            return
        informers = [self._workload_informer(kind, ns) for ns in self._scopes]
        self._workloads[kind] = informers
        self._gauge_tracked(kind.resource, informers)
        self._metrics.seed_kind(kind.resource.kind)
        started: list[Informer[Any]] = list(informers)
        if runs_elsewhere(kind.resource.group_kind):
            self._runners.append(self._runners_of(kind))
            started += self._runners[-1].informers
        if self._running:
            self._start(started)

    def _start(self, informers: Sequence[Informer[Any]]) -> None:
        """Run ``informers``, added while the caches run, among their tasks."""
        self._tasks += [asyncio.create_task(i.run(), name=str(i.resource)) for i in informers]

    # -- gauges ----------------------------------------------------------------------------

    def _gauges(self) -> None:
        """Gauges read the state they report when scraped, never set at each call site;
        the per-kind counters start at 0 (runtime/metrics.py says why)."""
        metrics = self._metrics
        for kind in self._options.kinds:
            metrics.kind_available.labels(resource=str(kind.resource)).set(1)
            metrics.seed_kind(kind.resource.kind)
        metrics.seed_holds(r for model in self._options.defaults.extensions
                           for r in model.hold_reasons)  # fmt: skip
        for sources in self._sources.values():
            self._gauge_tracked(sources.resource, sources.informers)
        for workload_kind, group in self._workloads.items():
            self._gauge_tracked(workload_kind.resource, group)
        if self.templates is not None:
            for template_kind, kept in self.templates.informers.items():
                self._gauge_tracked(TEMPLATE_RESOURCES[template_kind], kept)

    def _gauge_tracked(self, resource: Resource, informers: Sequence[Informer[Any]]) -> None:
        """``kube_nudge_objects_tracked{resource}``: the caches' sizes, read when scraped."""
        self._metrics.objects_tracked.labels(resource=str(resource)).set_function(
            lambda: sum(len(informer.store) for informer in informers)
        )

    def _restart_counter(self, resource: Resource) -> Any:
        self._metrics.seed_watch(str(resource))

        def count(reason: str) -> None:
            self._metrics.watch_restarts.labels(resource=str(resource), reason=reason).inc()

        return count

    # -- the runnable ----------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False if an informer task died."""
        return not any(task.done() for task in self._tasks)

    async def run(self) -> None:
        """Start informers, wait for the initial lists, then serve until cancelled."""
        informers = self.informers()
        self._running = True
        self._tasks = [asyncio.create_task(i.run(), name=str(i.resource)) for i in informers]
        synced = [informer.synced for informer in informers]
        if self.templates is not None:
            self._tasks.append(asyncio.create_task(self.templates.run(), name="templates"))
            synced.append(self.templates.synced)
        try:
            await asyncio.gather(*(event.wait() for event in synced))
            self.synced.set()
            log.info(
                "caches synced: %d workloads opted in, %d sources referenced",
                len(self.workload_keys()),
                len(self.index),
            )
            # An informer added later by ``watch_kind`` that dies shows in ``healthy``.
            await asyncio.gather(*self._tasks)
        finally:
            self._running = False
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
