"""Wires the controller together, as controller-runtime's manager does; it holds no logic.

    cache.py      informers → projections → the index; lookups (Reader)   every replica
    handlers.py   each change → the workload keys it enqueues, paced
    workers.py    the queue → reconciler.py → NextLooks (the next look)   leader only
    reconciler.py read → decide → act (a strategy) → remember, with the rollout book
                  (book.py), following (following.py), the sibling gates (siblings.py)
                  and the announcer (announcer.py)

Runnables: ``cache`` (every replica, so a standby's caches are warm when it takes over),
``workers`` and ``replacer`` (the leader), ``pending_kinds`` when some ``--workload`` isn't
served yet.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable, Sequence

from kube_nudge.controller.analysis import Analyser
from kube_nudge.controller.book import RolloutBook
from kube_nudge.controller.cache import Cache
from kube_nudge.controller.handlers import (
    Enqueue,
    EventHandlers,
    OptInErrors,
    RunnerEvents,
    SourceEvents,
    WorkloadEvents,
)
from kube_nudge.controller.options import ControllerOptions
from kube_nudge.controller.pending_kinds import PendingKinds
from kube_nudge.controller.reader import WorkloadKey
from kube_nudge.controller.reconciler import Reconciler
from kube_nudge.controller.replacer import PodReplacer
from kube_nudge.controller.workers import NextLooks, Workers
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.workloads import resolve
from kube_nudge.model import SourceRef, SourceView
from kube_nudge.notifications.model import Notification
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.expectations import WriteExpectations
from kube_nudge.runtime.manager import Runnable
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.prometheus import PrometheusClient
from kube_nudge.runtime.queue import WorkQueue
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.registry import build_strategies

__all__ = ["Controller", "ControllerOptions"]


class Controller:
    """The kube-nudge controller: its parts, wired, and the runnables that drive them."""

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
            recorder, on_failure=metrics.errors.labels(stage="event").inc
        )
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(monotonic=clock.monotonic)
        metrics.queue_depth.set_function(self.queue.__len__)
        expectations: WriteExpectations[WorkloadKey] = WriteExpectations(clock)
        context = StrategyContext(
            client, self.events, metrics, hmac_key, clock=clock, expectations=expectations
        )
        context = dataclasses.replace(context, notify=notify) if notify is not None else context
        strategies = build_strategies(context)
        self.cache = Cache(client, options, metrics)
        self.synced = self.cache.synced
        self.book = RolloutBook(
            self.cache.workload, capped=strategies.capped, metrics=metrics, clock=clock,
            count_rolling=options.max_concurrent_rollouts is not None, expectations=expectations,
        )  # fmt: skip
        self.prometheus = (
            PrometheusClient(options.prometheus) if options.prometheus is not None else None
        )
        self.reconciler = Reconciler(
            self.cache, strategies, self.book, context,
            windows=self.queue, max_concurrent=options.max_concurrent_rollouts,
            analyser=Analyser(context, self.prometheus, metrics, options, self.cache.templates),
        )  # fmt: skip
        enqueue = Enqueue(self.queue, self.cache.workload, quiet_window=options.quiet_window)
        self.looks = NextLooks(self.queue, waiting=self.book.waiting, look_again=enqueue.own)
        self.replacer = PodReplacer(
            client, self.events, metrics, source=self.cache.source,
            sources=self.cache.source_refs, synced=self.synced, clock=clock,
        )  # fmt: skip
        self.cache.add_handlers(EventHandlers(
            sources=SourceEvents(self.cache.consumers, enqueue, self.events, self.synced),
            source_pods=self.replacer.source_changed,
            workloads=WorkloadEvents(enqueue, self.looks, self.synced),
            opt_in_errors=OptInErrors(self.events, options.defaults),
            runners=RunnerEvents(enqueue, self.looks, self.synced),
        ), own_writes=self.book)  # fmt: skip
        self.workers = Workers(
            self.queue, self.reconciler, self.looks, self.cache,
            synced=self.synced, metrics=metrics, workers=options.workers,
        )  # fmt: skip
        self.pending_kinds = PendingKinds(
            options.pending_kinds, resolve=functools.partial(resolve, client),
            watch=self.cache.watch_kind, metrics=metrics,
        )  # fmt: skip

    @property
    def runnables(self) -> Sequence[Runnable]:
        """What the manager runs: the caches everywhere (and, if some ``--workload`` isn't
        served yet, its retry), the workers and the pod replacer on the leader (and the
        Prometheus client's connections, closed when the workers stop)."""
        found: list[Runnable] = [self.cache]
        if self.options.pending_kinds:
            found.append(self.pending_kinds)
        found += [self.workers, self.replacer]
        if self.prometheus is not None:
            found.append(self.prometheus)
        return tuple(found)

    # -- what the webhook server, the probes and tests read (strategies.base.Host) ---------

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of a ConfigMap/Secret, if it exists (and is in scope)."""
        return self.cache.source(ref)

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
