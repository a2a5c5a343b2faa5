"""What each watch event enqueues: the mapping from a change the cache saw to the workload
keys to look at, and when (controller-runtime's ``Watches(..., EnqueueRequestsFromMapFunc)``).

One table, ``EventHandlers``, names a handler per kind of event:

- ``sources`` (``SourceEvents``): a ConfigMap's or Secret's change → every workload
  consuming it (the cache's index), each in a debounce window the change opens or joins;
- ``source_pods``: the same change of a source that names pods (a ``pod-selector`` before
  or after it: the filter is controller-runtime's predicate) → the source itself, on the
  queue of the runnable that replaces those pods (``PodReplacer.source_changed``);
- ``workloads`` (``WorkloadEvents``): a workload's own change → itself (first sight and a
  dropped hash at once, anything else a moment later but opening no window: its own events
  never shorten a change's window), and, when its rollout moved on, the workloads waiting
  for another's rollout;
- ``opt_in_errors`` (``OptInErrors``): a workload left out because its opt-in is not a
  boolean → a Warning Event, once per message while the Events remember it (the recorder's
  dedupe window: a message seen again after it is said again);
- ``runners`` (``RunnerEvents``): the workload running another's template changed (an Argo
  Rollout with ``workloadRef``) → that template's owner, as an event of its own: its
  rollout is the runner's (``runner_cache.py``).

Every key goes onto the queue through ``Enqueue``, with its pacing (``model/pacing.py``); the
next looks (``workers.py``) use it too. Nothing here reconciles: the workers drain the queue.
A handler gets the event and the queue, as controller-runtime's ``EventHandler``: no reader
and no rollout book. What a workload's change means for our own writes comes with the event
(``OwnNews``: the caches ask the book first, as client-go's indexers run before the
handlers); a source's consumers come from its map function (``Consumers``, the caches'
index); those waiting for a rollout are woken through ``Waiters``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kube_nudge.controller.reader import OwnNews, WorkloadKey
from kube_nudge.kube.events import WARNING, ObjectRef
from kube_nudge.kube.informer import Handler, Key
from kube_nudge.kube.resources import Resource
from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadDefaults,
    WorkloadView,
)
from kube_nudge.model.pacing import hold_for_change, hold_for_own_event
from kube_nudge.model.replacement import replacement_selector
from kube_nudge.model.settings import mistyped_opt_in
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.queue import WorkQueue

__all__ = [
    "Enqueue",
    "EventHandlers",
    "OptInErrors",
    "RunnerEvents",
    "SourceEvents",
    "Waiters",
    "WorkloadEvents",
]

log = logging.getLogger(__name__)

SourceChanged = Callable[[SourceRef, SourceView | None, SourceView | None], None]
Consumers = Callable[[SourceRef], list[tuple[WorkloadKey, WorkloadView]]]
"""The workloads consuming a source, with their views (``Cache.consumers``, the caches'
index): the map function of a source's events, as controller-runtime's
``EnqueueRequestsFromMapFunc`` is given one."""
"""A source's change as a runnable of its own queues it (``PodReplacer.source_changed``)."""


class Waiters(Protocol):
    """The workloads held for another's rollout (``NextLooks``)."""

    def rollout_moved(self, key: WorkloadKey) -> None:
        """``key``'s rollout moved on: those waiting look again."""
        ...


class Enqueue:
    """Puts workload keys on the work queue with the pacing each kind of event gets."""

    def __init__(
        self,
        queue: WorkQueue[WorkloadKey],
        workload: Callable[[WorkloadKey], WorkloadView | None],
        *,
        quiet_window: float,
    ) -> None:
        self._queue = queue
        self._workload = workload
        """A key's cached view, for the pacing its settings ask (``Cache.workload``)."""
        self._quiet_window = quiet_window

    def at_once(self, key: WorkloadKey) -> None:
        """Look at ``key`` now (first sight, a dropped record, a resync, a due follow-up)."""
        self._queue.add(key)

    def change(self, key: WorkloadKey, view: WorkloadView, writers: Iterable[str]) -> None:
        """A config ``key`` (cached as ``view``) consumes changed: it opens a debounce window,
        or joins the open one, sized by the workload's debounce and who wrote the change."""
        hold = hold_for_change(view.settings.debounce, tuple(writers), self._quiet_window)
        self._queue.add(key, hold)

    def own(self, key: WorkloadKey, *, promptly: bool = False) -> None:
        """An event of ``key``'s own (its status, an edit, another's rollout it waits for):
        looked at a moment later (``promptly``: now), but it opens no window a change could
        ride in, and never extends, shortens or restarts one."""
        view = self._workload(key)
        if view is not None:
            debounce = view.settings.debounce
            hold = hold_for_change(debounce, (), self._quiet_window)
            delay = 0.0 if promptly else hold_for_own_event(debounce)
            self._queue.add_own(key, delay, hold)

    def forget(self, key: WorkloadKey) -> None:
        """``key`` is gone: nothing to look at."""
        self._queue.forget(key)


class SourceEvents:
    """A ConfigMap's or Secret's change → the workloads consuming it."""

    def __init__(
        self,
        consumers: Consumers,
        enqueue: Enqueue,
        events: BackgroundEvents,
        synced: asyncio.Event,
    ) -> None:
        self._consumers = consumers
        self._enqueue = enqueue
        self._events = events
        self._synced = synced

    def __call__(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            self._report_errors(resource, ref, new)
        if old is not None and new is not None:
            if old.settings.ignore and new.settings.ignore:
                return  # changes to an ignored source never trigger anything
            if old.state == new.state and old.settings == new.settings:
                return  # labels, other annotations, or errors only
        if not self._synced.is_set():
            return  # every workload is queued once the initial lists are in
        writers = new.writers if new is not None else ()
        for key, view in self._consumers(ref):
            self._enqueue.change(key, view, writers)

    def _report_errors(self, resource: Resource, ref: SourceRef, view: SourceView) -> None:
        log.warning("%s: %s", ref, "; ".join(view.errors))
        if not view.uid:
            return
        obj = ObjectRef(resource.api_version, resource.kind, ref.namespace, ref.name, view.uid)
        self._events.post(obj, WARNING, "InvalidAnnotation", "; ".join(view.errors))


class WorkloadEvents:
    """A workload's own change → itself; its rollout moving on → those waiting for one."""

    def __init__(self, enqueue: Enqueue, looks: Waiters, synced: asyncio.Event) -> None:
        self._enqueue = enqueue
        self._looks = looks
        self._synced = synced

    def __call__(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None,
        news: OwnNews,
    ) -> None:  # fmt: skip
        own_write, woken = news.echo, news.caught_up
        if new is not None and new.errors and (old is None or old.errors != new.errors):
            kind = key[0]
            log.warning("%s %s/%s: %s", kind.resource.kind, key[1], key[2], "; ".join(new.errors))
        synced = self._synced.is_set()
        if new is None:
            self._enqueue.forget(key)
        elif old is None and synced:
            # First sight adopts at once: the baseline must record the config the pods
            # started with, not what it has become a debounce window later.
            self._enqueue.at_once(key)
        elif synced and not (own_write and old is not None and old.same_but_records(new)):
            if _dropped_record(old, new, news):
                self._enqueue.at_once(key)  # as at first sight: its next look adopts what runs
            else:
                # The workload's own event (its status, an edit of its spec or annotations)
                # is looked at a debounce later, but opens no window: a config change
                # arriving meanwhile still waits its whole window, from its own time. A
                # completed rollout whose analysis starts now is looked at now: the gate's
                # schedule runs from its start, and every moment before it is delay added.
                self._enqueue.own(key, promptly=_analysis_starts(old, new))
        elif woken and synced:
            # The echo of our own write, which a pass read too early was held back for.
            self._enqueue.own(key)
        if synced and old is not None and new is not None and _rollout_moved(old, new):
            self._looks.rollout_moved(key)


def _dropped_record(old: WorkloadView | None, new: WorkloadView, news: OwnNews) -> bool:
    """Whether an edit took away the hash kube-nudge recorded on a workload (a template
    applied without it), with nothing remembered instead (``news``): the next look then
    adopts what the sources hold, as the restarted pods read it now, so it must be now."""
    return (
        old is not None
        and old.applied_hash is not None
        and new.applied_hash is None
        and new.has_template
        and not news.remembered
    )


def _analysis_starts(old: WorkloadView | None, new: WorkloadView) -> bool:
    """Whether ``new`` is a workload gated by an analysis whose rollout just completed
    (observed and done), so that its analysis can start."""

    def completed(view: WorkloadView | None) -> bool:
        progress = view.progress if view is not None else None
        return progress is not None and progress.done and progress.observed

    return new.settings.analysis is not None and completed(new) and not completed(old)


def _rollout_moved(old: WorkloadView, new: WorkloadView) -> bool:
    """Whether what others may wait for changed: progress, a failure, a release."""
    return (old.progress, old.failed, old.released_at, old.rolled_at) != (
        new.progress,
        new.failed,
        new.released_at,
        new.rolled_at,
    )


class OptInErrors:
    """A workload left out because its opt-in is not a boolean (`enabled: "yes"`): the
    combined Warning Event ``InvalidAnnotation`` and a log line, once per message, as for
    opted-in workloads (the reconciler) and sources, instead of silence. It keeps no state:
    "once" is the Events' own memory (``BackgroundEvents.post_new``: the recorder's
    dedupe window, bounded), so a left-out workload's every update says nothing new."""

    def __init__(self, events: BackgroundEvents, defaults: WorkloadDefaults) -> None:
        self._events = events
        self._defaults = defaults

    def __call__(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        metadata = obj.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        errors = mistyped_opt_in(metadata.get("annotations"), namespace, self._defaults)
        uid = str(metadata.get("uid") or "")
        if not errors or not uid:
            return
        message = "; ".join(errors)
        ref = ObjectRef(kind.resource.api_version, kind.resource.kind, namespace, name, uid)
        if self._events.post_new(ref, WARNING, "InvalidAnnotation", message):
            log.warning("%s %s/%s: not opted in: %s", kind.resource.kind, namespace, name, message)


class RunnerEvents:
    """The runner of a workload's template changed → that workload, as its own event; and
    those waiting for its rollout, since its progress is the runner's."""

    def __init__(self, enqueue: Enqueue, looks: Waiters, synced: asyncio.Event) -> None:
        self._enqueue = enqueue
        self._looks = looks
        self._synced = synced

    def __call__(self, key: WorkloadKey, view: WorkloadView | None) -> None:
        if self._synced.is_set() and view is not None:
            self._enqueue.own(key)
            self._looks.rollout_moved(key)


@dataclass(frozen=True, slots=True)
class EventHandlers:
    """The table: one named handler per kind of event the cache reports."""

    sources: SourceEvents
    source_pods: SourceChanged
    workloads: WorkloadEvents
    opt_in_errors: OptInErrors
    runners: RunnerEvents

    def source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        """A ConfigMap or Secret changed."""
        if replacement_selector(old) is not None or replacement_selector(new) is not None:
            self.source_pods(ref, old, new)
        self.sources(resource, ref, old, new)

    def source_handler(self, kind: SourceKind, resource: Resource) -> Handler[SourceView]:
        """``source_changed`` as one informer of ``kind``'s objects calls it, by (namespace,
        name): the cache registers it on the informer itself."""
        return functools.partial(self._source_keyed, kind, resource)

    def _source_keyed(
        self,
        kind: SourceKind,
        resource: Resource,
        key: Key,
        old: SourceView | None,
        new: SourceView | None,
    ) -> None:
        self.source_changed(resource, SourceRef(kind, *key), old, new)

    def workload_changed(
        self, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None,
        news: OwnNews,
    ) -> None:  # fmt: skip
        """An opted-in workload changed (``news``: what it means for our own writes)."""
        self.workloads(key, old, new, news)

    def left_out(self, kind: WorkloadKind, obj: dict[str, Any]) -> None:
        """A workload the projection left out."""
        self.opt_in_errors(kind, obj)

    def runner_changed(self, key: WorkloadKey, view: WorkloadView | None) -> None:
        """The workload running ``key``'s template changed (``view``: ``key``'s)."""
        self.runners(key, view)
