"""The workers that drain the work queue while this replica leads, and the one place a
pass's ``Outcome`` is carried out: when each workload is looked at again.

``Workers`` (a runnable that needs the leader): once the caches are in, every workload is
queued once (level-triggered: a restart or a new leader with nothing changed writes
nothing), then N workers take keys off the queue and reconcile them. Each pass's
``Outcome`` goes to ``NextLooks.after``, once the key is done:

- ``failed`` (or the pass crashed): retried with the queue's per-key backoff;
- ``requeue_after``: queued again after that many seconds (the end of a hold, a
  maintaining strategy's next look); it counts as queued work meanwhile;
- ``follow_up``: a timer at the deadline of a rollout in progress, replaced or cancelled by
  each pass that does not fail, that queues the workload if nothing (a status change)
  brought it back before. Timers, not delayed queue entries: work that is merely scheduled
  is not work in progress (``Controller.settled``). They are all cancelled when the workers
  stop: the next leader's resync follows every rollout again;
- a hold for another workload's rollout (its order, a stopped line, a turn: the rollout
  book's ``waiting``): looked at again when some rollout moves on (``rollout_moved``, from
  the workload watch handler), as an event of its own, which opens no debounce window.
  Only those: a thousand workloads rolling one change must not queue each other a million
  times.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kube_nudge.controller.reader import Reader, WorkloadKey
from kube_nudge.controller.reconciler import Action, Outcome, Reconciler
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.queue import WorkQueue

__all__ = ["NextLooks", "Workers"]

log = logging.getLogger(__name__)


class Workers:
    """Reconciles queued workloads with N concurrent workers, only while leading."""

    name = "workers"
    needs_leader = True

    def __init__(
        self,
        queue: WorkQueue[WorkloadKey],
        reconciler: Reconciler,
        looks: NextLooks,
        reader: Reader,
        *,
        synced: asyncio.Event,
        metrics: Metrics,
        workers: int,
    ) -> None:
        self._queue = queue
        self._reconciler = reconciler
        self._looks = looks
        self._reader = reader
        self._synced = synced
        self._metrics = metrics
        self._workers = workers

    async def run(self) -> None:
        """Wait for the caches, queue every workload once, then work until cancelled."""
        await self._synced.wait()
        for key in self._reader.workload_keys():
            self._queue.add(key)
        workers = [
            asyncio.create_task(self._work(), name=f"worker-{n}") for n in range(self._workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            self._looks.stop()  # the next leader's resync follows every rollout again

    async def _work(self) -> None:
        queue = self._queue
        while True:
            key = await queue.get()
            outcome = Outcome(Action.FAILED)  # a crashed pass is retried as a failed one
            try:
                outcome = await self._reconciler.reconcile(key)
            except Exception:
                self._metrics.errors.labels(stage="reconcile").inc()
                log.exception("reconciling %s %s/%s failed", key[0], key[1], key[2])
            finally:
                queue.done(key)
            self._looks.after(key, outcome)  # its next look: only what it asked for


class NextLooks:
    """Arranges each workload's next look from what its last pass asked for."""

    def __init__(
        self,
        queue: WorkQueue[WorkloadKey],
        *,
        waiting: Callable[[], Iterable[WorkloadKey]],
        look_again: Callable[[WorkloadKey], None],
    ) -> None:
        self._queue = queue
        self._waiting = waiting
        """The workloads held for another's rollout (``RolloutBook.waiting``)."""
        self._look_again = look_again
        """Queues a workload as for an event of its own (no window)."""
        self._follow_ups: dict[WorkloadKey, asyncio.TimerHandle] = {}
        """One timer per workload whose rollout is followed."""

    def after(self, key: WorkloadKey, outcome: Outcome) -> None:
        """A pass over ``key`` ended with ``outcome`` (after ``WorkQueue.done``)."""
        if outcome.action is Action.FAILED:
            self._queue.settle(key, failed=True)
            return
        self._follow_up(key, outcome.follow_up)
        self._queue.settle(key, failed=False, again=outcome.requeue_after)

    def rollout_moved(self, key: WorkloadKey) -> None:
        """``key``'s rollout moved on (progressed, failed, was released): the workloads
        waiting for another's rollout look again."""
        for other in set(self._waiting()) - {key}:
            self._look_again(other)

    def stop(self) -> None:
        """Cancel every follow-up (the workers stopped: this replica no longer leads)."""
        for timer in self._follow_ups.values():
            timer.cancel()
        self._follow_ups.clear()

    def _follow_up(self, key: WorkloadKey, delay: float | None) -> None:
        previous = self._follow_ups.pop(key, None)
        if previous is not None:
            previous.cancel()
        if delay is not None:
            loop = asyncio.get_running_loop()
            self._follow_ups[key] = loop.call_later(delay, self._due, key)

    def _due(self, key: WorkloadKey) -> None:
        self._follow_ups.pop(key, None)
        self._queue.add(key)
