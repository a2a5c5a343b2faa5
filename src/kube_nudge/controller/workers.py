"""The workers that drain the work queue while this replica leads, and the one place a
pass's ``Outcome`` is carried out: when each workload is looked at again.

``Workers`` (a runnable that needs the leader): once the caches are in, every workload is
queued once (level-triggered: a restart or a new leader with nothing changed writes
nothing), then N workers take keys off the queue and reconcile them. Each pass's
``Outcome`` goes to ``NextLooks.after``, once the key is done:

- ``failed`` (or the pass crashed): retried with the queue's per-key backoff;
- ``requeue_after``: queued again after that many seconds (the end of a hold, a
  maintaining strategy's next look); it counts as queued work meanwhile;
- ``follow_up``: the deadline of a rollout in progress, a watch on the same queue
  (``WorkQueue.watch_after``): the workload is looked at then if nothing (a status change)
  brought it back before. Until it is due it is no queued work (``Controller.settled``
  does not wait for it), and any pass that takes the key serves it, as every reason;
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

    def after(self, key: WorkloadKey, outcome: Outcome) -> None:
        """A pass over ``key`` ended with ``outcome`` (after ``WorkQueue.done``)."""
        self._queue.settle(key, failed=outcome.action is Action.FAILED,
                           again=outcome.requeue_after, watch=outcome.follow_up)  # fmt: skip

    def rollout_moved(self, key: WorkloadKey) -> None:
        """``key``'s rollout moved on (progressed, failed, was released): the workloads
        waiting for another's rollout look again."""
        for other in set(self._waiting()) - {key}:
            self._look_again(other)
