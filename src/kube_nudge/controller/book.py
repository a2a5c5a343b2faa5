"""The rollout book: what the controller remembers of each workload between passes.

One object, owned by the controller, told of every change of a workload's view by the
caches (``news``, before any handler runs) and written by the reconciler (``page``,
``writing``, ``started``, ``rolled``, ``runs``); its records are immutable values only the
book replaces, and a record forgotten (the workload deleted) is never brought back by a pass
still under way. A pass reads all
it needs of its workload at its start, in one ``Page``:

- each workload's memory record (``model/memory.py``): the hash written but not yet seen
  in a watch event (so the echo of our own write is recognised), its recent rollouts, the
  source states its pods last got, and the state its last pass left it in;
- the phase each followed rollout was last seen in (Events when it completes);
- which rollouts may be rolling (--max-concurrent-rollouts), kept up to date from every
  view, so that gate never walks every workload (which failed is the caches' index: it
  needs nothing but the view);
- who waits for another workload's rollout (its order, a stopped line, a turn);
- our own writes the caches have not shown yet (``runtime.expectations``, shared with the
  strategies that write): a pass over such a workload waits for the echo.

Nothing here talks to the API server; the caches are read through ``workload``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace

from kube_nudge.controller.reader import OwnNews
from kube_nudge.kube.workloads import WorkloadKey
from kube_nudge.model import SourceRef, WorkloadMemory, WorkloadView
from kube_nudge.model.hashing import SourceState
from kube_nudge.model.tracking import Phase, Tracking, track
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.expectations import WriteExpectations
from kube_nudge.runtime.metrics import Metrics

__all__ = ["WAITING", "Page", "RolloutBook", "WorkloadKey"]

#: States of a workload held for another's rollout: its order, a stopped line, a turn.
WAITING = frozenset({"held-order", "held-line-stopped", "held-turn"})


@dataclass(frozen=True, slots=True)
class Page:
    """What the book holds of one workload when a pass starts, read in one call
    (``RolloutBook.page``)."""

    lagging: float | None
    """Seconds to wait at most for the echo of our last write (``RolloutBook.lagging``);
    None when the caches show our writes."""
    memory: WorkloadMemory
    """Its memory record, started empty at its first pass (``RolloutBook.remember``)."""
    tracking: Tracking
    """The phase of its latest rollout (as ``RolloutBook.tracking``, with the pass's
    strategy's ``capped``)."""
    followed: Phase | None
    """The phase its rollout was last seen in, before this pass follows it."""


class RolloutBook:
    """The state of the rollouts the controller follows, per workload key."""

    def __init__(
        self,
        workload: Callable[[WorkloadKey], WorkloadView | None],
        *,
        capped: Callable[[WorkloadView], bool],
        metrics: Metrics,
        clock: Clock = SYSTEM_CLOCK,
        count_rolling: bool = False,
        expectations: WriteExpectations[WorkloadKey] | None = None,
    ) -> None:
        self._workload = workload
        self._expectations: WriteExpectations[WorkloadKey] = (
            expectations if expectations is not None else WriteExpectations(clock)
        )
        """Written by the strategies (``StrategyContext.expectations``, the same object)."""
        self._capped = capped
        """Whether a view's strategy restarts pods (only those rollouts are followed)."""
        self._metrics = metrics
        self._clock = clock
        self._count_rolling = count_rolling
        """Whether every view updates the rolling set (--max-concurrent-rollouts is set)."""
        self._memory: dict[WorkloadKey, WorkloadMemory] = {}
        # The keys whose state is in WAITING, kept as states change: ``waiting`` is asked on
        # every rollout's progress, and a scan of every memory made a fan-out quadratic.
        self._waiting: set[WorkloadKey] = set()
        self._followed: dict[WorkloadKey, Phase] = {}
        """The phase each followed rollout was last seen in (Events on completion)."""
        self._maybe_rolling: set[WorkloadKey] = set()
        """Every workload whose rollout was last seen in progress (a superset: checked when
        counted), so --max-concurrent-rollouts never walks every workload per rollout (a
        fan-out to a thousand took 13.7 s instead of 4.5 s)."""

    # -- the watch handler ---------------------------------------------------------------

    def observed(self, key: WorkloadKey, view: WorkloadView | None) -> bool:
        """Called on every change of ``key``'s cached view (None: deleted); True when the
        change is our own last write coming back."""
        if view is None:
            self.forget(key)
            return False
        own_echo = False
        memory = self._memory.get(key)
        if memory is not None:
            self._memory[key], own_echo = memory.observed(view)
        self._count_if_rolling(key, view)
        return own_echo

    def news(self, key: WorkloadKey, view: WorkloadView | None) -> OwnNews:
        """Called by the caches on every change of ``key``'s cached view (None: deleted),
        before the handlers: kept (``observed``, ``caught_up``), and what it means for our
        own writes, which the workload handler gets with the event (``OwnWrites``)."""
        echo, caught_up = self.observed(key, view), self.caught_up(key, view)
        memory = self._memory.get(key)
        return OwnNews(echo, caught_up, memory is not None and memory.applied is not None)

    def caught_up(self, key: WorkloadKey, view: WorkloadView | None) -> bool:
        """Called on every change of ``key``'s cached view: True when it is the echo of our
        own write that a pass was held back for (``lagging``): look at ``key`` again."""
        if view is None:
            self._expectations.forget(key)
            return False
        return self._expectations.observed(key, view.resource_version)

    def lagging(self, key: WorkloadKey, view: WorkloadView) -> float | None:
        """Seconds to wait at most when ``view`` (cached) is older than our last write of
        ``key``: a pass must not act on it (it would act again on what it acted on);
        ``caught_up`` wakes it. None when the caches show our writes."""
        return self._expectations.lagging(key, view.resource_version)

    def progress_moved(self, key: WorkloadKey) -> None:
        """``key``'s rollout progress moved with no change of its own view (the workload
        running its template changed: ``runner_cache.py``)."""
        view = self._workload(key)
        if view is not None:
            self._count_if_rolling(key, view)

    def _count_if_rolling(self, key: WorkloadKey, view: WorkloadView) -> None:
        # Judged on the caches' view, which joins a runner's progress (``Cache.workload``).
        if self._count_rolling and self.tracking(key, self._workload(key) or view).phase is (
            Phase.ROLLING
        ):
            self._maybe_rolling.add(key)

    def forget(self, key: WorkloadKey) -> None:
        """Drop everything kept for a deleted workload (and its count in the state gauge)."""
        self._followed.pop(key, None)
        self._maybe_rolling.discard(key)
        self._waiting.discard(key)
        self._expectations.forget(key)
        gone = self._memory.pop(key, None)
        if gone is not None:
            self._count_state(gone, None)

    # -- a pass ----------------------------------------------------------------------------

    def page(self, key: WorkloadKey, view: WorkloadView, *, capped: bool) -> Page:
        """What a pass over ``key`` (``view`` as cached; ``capped``: its strategy restarts
        pods) starts from: whether it must wait for our own write's echo, its memory
        record, the phase of its rollout and the phase last followed. A pass that need not
        wait has now seen that phase, and follows it from here, unless its status is not
        observed yet or it is a failure not recorded yet."""
        memory = self.remember(key)
        lagging = self.lagging(key, view)
        tracking = self._tracking(key, view, capped)
        before = self._followed.get(key)
        # An unobserved status says nothing: remembering it as rolling would announce a
        # completion that was never a rollout (e.g. after an annotation write). A failure is
        # followed once recorded: the pass that records it may fail or be cancelled, and a
        # rollout that then completes must still be announced.
        said = view.progress is None or view.progress.observed
        unrecorded_failure = tracking.phase is Phase.FAILED and not tracking.recorded
        if lagging is None and said and not unrecorded_failure:
            self._followed[key] = tracking.phase
        return Page(lagging, memory, tracking, before)

    # -- memory --------------------------------------------------------------------------

    def memory(self, key: WorkloadKey) -> WorkloadMemory | None:
        """The memory record of ``key``, if it has one."""
        return self._memory.get(key)

    def remember(self, key: WorkloadKey) -> WorkloadMemory:
        """The memory record of ``key`` as it is now, started empty at its first pass.
        Records are values: the book replaces them (below), nobody else changes one."""
        return self._memory.setdefault(key, WorkloadMemory())

    def applying(self, key: WorkloadKey, strategy: str, config_hash: str) -> None:
        """``strategy`` is about to apply (or adopt) ``config_hash`` on ``key`` (inside
        ``writing``: forgotten if the write raises)."""
        self._update(key, lambda memory: memory.applying(strategy, config_hash))

    def rolled(self, key: WorkloadKey, at: float, view: WorkloadView) -> None:
        """A rollout of ``key`` (``view`` as the pass read it) was written at ``at``: the
        flap cap counts it."""
        self._update(key, lambda memory: memory.with_rollout(at, view))

    def runs(self, key: WorkloadKey, states: Mapping[SourceRef, SourceState]) -> None:
        """``key``'s pods now run (or are rolling to) ``states``: later Events name the
        keys that change from here."""
        self._update(key, lambda memory: replace(memory, rolled_with=states))

    def _update(self, key: WorkloadKey, change: Callable[[WorkloadMemory], WorkloadMemory]) -> None:
        """Replace ``key``'s record by ``change`` of it. A record forgotten meanwhile (the
        workload was deleted while its pass awaited) stays forgotten: bringing it back
        would leave it, and its count in the state gauge, behind for good."""
        memory = self._memory.get(key)
        if memory is not None:
            self._memory[key] = change(memory)

    def set_state(self, key: WorkloadKey, state: str | None) -> None:
        """The state ``key``'s last pass left it in (the ``workloads{state}`` gauge)."""
        memory = self._memory.get(key)
        if memory is not None:
            self._count_state(memory, state)
            self._memory[key] = replace(memory, state=state)
            if state in WAITING:
                self._waiting.add(key)
            else:
                self._waiting.discard(key)

    def _count_state(self, memory: WorkloadMemory, state: str | None) -> None:
        """Move the workload from its last state's count to ``state``'s."""
        if memory.state == state:
            return
        if memory.state is not None:
            self._metrics.workloads.labels(state=memory.state).dec()
        if state is not None:
            self._metrics.workloads.labels(state=state).inc()

    def waiting(self) -> list[WorkloadKey]:
        """Workloads whose last pass held them for another workload's rollout: its order,
        a stopped line, or a turn (--max-concurrent-rollouts)."""
        return list(self._waiting)

    # -- following rollouts --------------------------------------------------------------

    def tracking(self, key: WorkloadKey, view: WorkloadView) -> Tracking:
        """The phase of ``view``'s latest rollout. Strategies that restart nothing (not
        capped) have none to follow; a write whose echo is still on its way is rolling."""
        return self._tracking(key, view, self._capped(view))

    def _tracking(self, key: WorkloadKey, view: WorkloadView, capped: bool) -> Tracking:
        if not capped:
            return Tracking(Phase.IDLE)
        applied = memory.applied if (memory := self._memory.get(key)) is not None else None
        if applied is not None and applied != view.applied_hash:
            return Tracking(Phase.ROLLING, applied)
        return track(view, self._clock.now(), self._followed.get(key))

    @contextmanager
    def writing(self, key: WorkloadKey) -> Iterator[None]:
        """Around a write of ``key``: what it is about to write is
        remembered first (``started``, ``applying``), since its
        watch echo can come before its response; if the write raises (failed, refused,
        cancelled, a bug), that is forgotten again: the write may not have happened, and
        a new leader term must not take the unwritten hash for applied (the fault suite
        lost changes that way)."""
        before = self._memory.get(key) or WorkloadMemory()
        followed = self._followed.get(key)
        try:
            yield
        except BaseException:
            if key in self._memory:  # not forgotten meanwhile (deleted): nothing to restore
                self._update(key, lambda now: replace(
                    now, applied=before.applied, strategy=before.strategy
                ))  # fmt: skip
                if followed is None:
                    self._followed.pop(key, None)
                else:
                    self._followed[key] = followed
            raise

    def started(self, key: WorkloadKey, strategy: str, config_hash: str, *, followed: bool) -> None:
        """A rollout of ``key`` to ``config_hash`` by ``strategy`` is about to be written
        (inside ``writing``): remembered as applying, counted as rolling at once, and, if
        ``followed``, its phase is rolling, so a sibling's order gate does not take the new
        template's not yet observed status for the previous rollout's completion."""
        self.applying(key, strategy, config_hash)
        self._maybe_rolling.add(key)
        if followed:
            self._followed[key] = Phase.ROLLING

    # -- the fleet -----------------------------------------------------------------------

    def rolling_count(self, exclude: WorkloadKey | None = None) -> int:
        """Rollouts in progress on every workload but ``exclude`` (from the caches, so a
        restart counts what the previous leader started)."""
        count = 0
        for key in list(self._maybe_rolling):
            view = self._workload(key)
            if view is None or self.tracking(key, view).phase is not Phase.ROLLING:
                self._maybe_rolling.discard(key)
            elif key != exclude:
                count += 1
        return count
