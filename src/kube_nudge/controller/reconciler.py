"""Level-triggered reconcile of one workload, in four steps: read → decide → act → remember.

- **read**: the workload's view and its sources from the caches (one ``Inputs``, which
  ``assess`` judges), its memory record and the phase of its rollout from the rollout book
  (``book.py``, one ``Page``), each read at once; what that rollout did since the last
  pass is announced, recorded or rolled back (``following.py``), and a completed
  rollout's analysis measured (``analysis.py``);
- **decide**: the pure ``model.decide`` (noop, adopt, hold, apply), then the release gates
  for a rollout (``siblings.py``, over the pure ``model.gates``), unless the change's
  debounce window is still open;
- **act**: the workload's strategy adopts or rolls, and a maintaining strategy looks at
  its own objects. Every step adds what it would write to the workload to the pass's one
  ``WorkloadChanges``; the writer (``writer.py``) sends it as one PATCH at the end of the
  step, then runs the effects that say so (the strategies' Events among them). What it is
  about to write is in the book first (its echo can come before its response) and out
  again if the write fails. A rollback is the one write of its pass: the decision waits
  for the next pass, made on the template it put back;
- **remember**: the memory record and the book, the Events and notifications of a hold
  (``announcer.py``), and the ``Outcome``: the one way a pass asks to be looked at again
  (``requeue_after``, ``follow_up``; carried out by ``NextLooks`` in ``workers.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kube_nudge.controller.analysis import Analyser
from kube_nudge.controller.announcer import Announcer
from kube_nudge.controller.book import RolloutBook
from kube_nudge.controller.following import RolloutFollower
from kube_nudge.controller.reader import Reader, WorkloadKey
from kube_nudge.controller.siblings import SiblingGates
from kube_nudge.controller.writer import WorkloadWriter
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.events import WARNING
from kube_nudge.kube.pods import oldest_container_start
from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    Decision,
    Hold,
    WorkloadMemory,
    WorkloadView,
    assess,
    decide,
    describe_apply,
    input_warnings,
)
from kube_nudge.model.tracking import Phase, Tracking, progress_deadline, rollout_news
from kube_nudge.notifications.model import NotificationKind
from kube_nudge.strategies.base import (
    ExtendsModel,
    Maintaining,
    NotYet,
    Refused,
    Strategy,
    StrategyContext,
)
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = ["Action", "DebounceWindows", "Outcome", "Reconciler", "WorkloadKey"]

log = logging.getLogger(__name__)

MAINTAIN_AFTER_APPLY = 1.0
"""Seconds after a rollout before a maintaining strategy looks at its own objects."""


class Action(StrEnum):
    """What a pass did."""

    NONE = "none"
    ADOPTED = "adopted"
    ROLLED = "rolled"
    HELD = "held"
    LAGGING = "lagging"  # the caches don't show our own last write yet: nothing done
    GONE = "gone"
    FAILED = "failed"


#: The ``kube_nudge_workloads{state}`` a pass leaves a workload in, by its action (a hold's
#: is ``held-<reason>``; a workload gone has none).
_STATES = {
    Action.NONE: "current",
    Action.ADOPTED: "current",
    Action.ROLLED: "applied",
    Action.FAILED: "failed",
}


class DebounceWindows(Protocol):
    """Whether a change's debounce window is open for a workload (the work queue's)."""

    def window_open(self, key: WorkloadKey) -> bool:
        """True while a change's window is open for ``key``."""
        ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reconcile did, and the one way it asks to be looked at again, both on the work
    queue: after ``requeue_after`` seconds (work to wait for), and/or at ``follow_up`` (a
    watch: no work until then, and any earlier pass serves it). A ``failed`` outcome is
    retried with the queue's per-key backoff."""

    action: Action
    requeue_after: float | None = None
    state: str | None = None  # for holds: held-<reason>
    follow_up: float | None = None
    """Seconds until a rollout in progress would be called failed: look again then if
    nothing (a status change) brings the workload back before."""


@dataclass(frozen=True, slots=True)
class Reading:
    """What a pass read, before it decides."""

    key: WorkloadKey
    target: Target
    assessment: Assessment
    strategy: Strategy
    tracking: Tracking
    follow_up: float | None
    """When to look again if the rollout in progress stays stuck (``Outcome.follow_up``)."""
    oldest_pod_start: float | None


@dataclass(frozen=True, slots=True)
class Acted:
    """What a pass did: the decision that stands after its writes, and the view then."""

    action: Action  # none, adopted or rolled
    decision: Decision
    view: WorkloadView
    maintained: float | None = None
    """Seconds until a maintaining strategy wants another look (``Maintaining``)."""


class Reconciler:
    """Turns a workload key into at most one strategy action, plus Events and metrics.

    Its collaborators: the caches (``reader``), the strategies by name, the rollout book
    (``book``), and the context every strategy shares (the API client, Events, metrics,
    notifier, clock and installation key). It follows rollouts with a ``RolloutFollower``,
    gates them with ``SiblingGates`` and reports through an ``Announcer``, all built on
    those. ``windows`` is the work queue (a change's debounce window); ``max_concurrent``
    is ``--max-concurrent-rollouts``."""

    def __init__(
        self,
        reader: Reader,
        strategies: Mapping[str, Strategy],
        book: RolloutBook,
        context: StrategyContext,
        *,
        windows: DebounceWindows | None = None,
        max_concurrent: int | None = None,
        analyser: Analyser | None = None,
    ) -> None:
        self.reader = reader
        self.strategies = strategies
        self.book = book
        """The rollouts followed (the controller's, which its watch handler keeps)."""
        self.context = context
        self.windows = windows
        self.announcer = Announcer(context)
        self.follower = RolloutFollower(strategies, self.announcer, context)
        self.analyser = analyser or Analyser(context, None, context.metrics)
        self.writer = WorkloadWriter(context)
        self.gates = SiblingGates(reader, book, hmac_key=context.hmac_key, clock=context.clock,
                                  max_concurrent=max_concurrent)  # fmt: skip

    async def reconcile(self, key: WorkloadKey) -> Outcome:
        """One level-triggered pass over ``key``."""
        started = time.perf_counter()
        try:
            outcome = await self._reconcile(key)
        finally:
            self.context.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        if outcome.action not in (Action.GONE, Action.LAGGING):
            self.book.set_state(key, _STATES.get(outcome.action, outcome.state))
        return outcome

    async def _reconcile(self, key: WorkloadKey) -> Outcome:
        changes = WorkloadChanges()
        with self.writer.pass_of(key):
            reading = await self._read(key, changes)
            if isinstance(reading, Outcome):
                return reading  # gone, or lagging behind our own write
            if changes.operations is not None or changes.failure is not None:
                # Rolled back (or tried to): a decision now would be made on the template
                # the rollback replaces. The write's echo brings the next pass.
                return await self._write_read(reading, changes)
            decision = self._decide(reading)
            if decision is None:
                # An early pass (a retry, a follow-up) while the change's debounce window is
                # open: the pass at the window's end rolls it, with what else comes by then.
                return await self._write_read(reading, changes)
            acted = await self._act(reading, decision, changes)
            if isinstance(acted, Outcome):
                return acted  # the write failed
            return self._remember(reading, acted)

    async def _write_read(self, reading: Reading, changes: WorkloadChanges) -> Outcome:
        """A pass that acts on nothing writes what its read step gathered (an analysis's
        measurements, a failure's record, a rollback)."""
        try:
            await self.writer.write(reading.target, changes)
        except ApiError as exc:
            return self._failed(reading.target, exc)
        if changes.failure is not None:
            return self._failed(reading.target, changes.failure)
        return Outcome(Action.NONE, follow_up=reading.follow_up)

    # -- read ------------------------------------------------------------------------------

    async def _read(self, key: WorkloadKey, changes: WorkloadChanges) -> Reading | Outcome:
        """The view and its sources, the memory record and the rollout's phase; what the
        rollout did since the last pass is announced (and recorded, if it failed: in
        ``changes``)."""
        inputs = self.reader.inputs(key)
        if inputs is None:
            return Outcome(Action.GONE)
        view = inputs.view
        strategy = self.strategies[view.settings.strategy]
        page = self.book.page(key, view, capped=strategy.capped)
        if page.lagging is not None:
            # The cache still shows what our last write changed: acting on it would act
            # twice (confirm a hot reload again, post its Event again, roll again). Its
            # echo wakes this workload (``RolloutBook.caught_up``); the watch is in case
            # it never comes.
            log.debug("%s %s/%s: waiting for our own write's echo", *key)
            return Outcome(Action.LAGGING, follow_up=page.lagging)
        target = Target(*key, view)
        assessment = assess(view, inputs.sources.get, self.context.hmac_key)
        for reason, message in input_warnings(view, assessment):
            self.announcer.post(target, WARNING, reason, message)
        memory, tracking = page.memory, page.tracking
        news = rollout_news(page.followed, tracking)
        if news is not None:  # the follower's predicate: a pass with no news skips it
            await self.follower.follow(target, tracking, news, strategy, changes)
        follow_up = await self._analyse(target, tracking, changes)
        oldest = await self._oldest_pod_start(target, memory)
        return Reading(key, target, assessment, strategy, tracking, follow_up, oldest)

    async def _analyse(
        self, target: Target, tracking: Tracking, changes: WorkloadChanges
    ) -> float | None:
        """A completed rollout whose analysis is due: its measurements (``analysis.py``);
        when to look again, as for any rollout in progress (``_follow_up``)."""
        ref = target.view.settings.analysis
        analysis = tracking.analysis
        if ref is None or analysis is None or analysis.completed or tracking.config_hash is None:
            return self._follow_up(tracking)
        step = await self.analyser.step(target, ref, tracking.config_hash,
                                        target.view.analysis_run, changes)  # fmt: skip
        return step.next_look

    def _follow_up(self, tracking: Tracking) -> float | None:
        """Look again when a rollout in progress would be called failed (status changes
        wake it sooner; a stuck rollout sends none), whatever this pass decides."""
        if tracking.phase is Phase.ROLLING and tracking.deadline_at is not None:
            return max(tracking.deadline_at - self.context.clock.now(), MAINTAIN_AFTER_APPLY)
        return None

    # -- decide ----------------------------------------------------------------------------

    def _decide(self, reading: Reading) -> Decision | None:
        """The pure decision, and for a rollout the release gates; None while the change's
        debounce window is open (a pass taken early must not roll it)."""
        view = reading.target.view
        # The record as it is now (the book's): an echo handled while this pass read the
        # pods has taken our own write's hash out of it.
        memory = self.book.memory(reading.key) or WorkloadMemory()
        decision = self._decision(view, reading.assessment, memory,
                                  reading.strategy, reading.oldest_pod_start)  # fmt: skip
        if not isinstance(decision, Apply) or decision.config_hash == view.applied_hash:
            return decision
        if self.windows is not None and self.windows.window_open(reading.key):
            return None
        return self.gates.gate(reading.key, reading.target, reading.assessment, decision)

    def _decision(
        self,
        view: WorkloadView,
        assessment: Assessment,
        memory: WorkloadMemory,
        strategy: Strategy,
        oldest_pod_start: float | None = None,
    ) -> Decision:
        now = round(self.context.clock.now(), 3)
        return decide(
            view, assessment, memory, now, capped=strategy.capped,
            oldest_pod_start=oldest_pod_start,
            strategy=strategy.model if isinstance(strategy, ExtendsModel) else None,
        )  # fmt: skip

    # -- act -------------------------------------------------------------------------------

    async def _act(
        self, reading: Reading, decision: Decision, changes: WorkloadChanges
    ) -> Acted | Outcome:
        """Let the strategy carry ``decision`` out, then send the pass's changes. What it is
        about to write is in the book first (the write's watch echo can be handled before
        its response resumes this pass, and an echo not recognised as ours queues a
        reconcile whose earlier ready time would cut the next change's debounce window
        short); if the write raises, it is forgotten again (``RolloutBook.writing``). A
        strategy that refuses or fails before anything is sent leaves what the read step
        gathered (an analysis's measurement, say) to be written alone."""
        target, gathered = reading.target, changes.copy()
        try:
            with self.book.writing(reading.key):
                acted = await self._carry_out(reading, decision, changes)
                await self.writer.write(target, changes)
        except ApiError as exc:
            return await self._gathered(reading, gathered) or self._failed(target, exc)
        except Refused as refusal:
            failed = await self._gathered(reading, gathered)
            return failed or Acted(Action.NONE, refusal.hold, target.view)
        except NotYet as exc:
            log.debug("%s: not yet (%s); trying again shortly", target, exc)
            return await self._gathered(reading, gathered) or Outcome(Action.FAILED)
        self._written(reading, acted)
        return acted

    async def _gathered(self, reading: Reading, gathered: WorkloadChanges) -> Outcome | None:
        """After the strategy's part failed before any PATCH was sent (a refusal, a read
        that failed), write what the read step gathered; a failed outcome if that write
        fails too. A PATCH the API refused is not sent again, without the strategy's part
        or with it: the pass is retried."""
        if self.writer.tried(reading.key):
            return None
        try:
            await self.writer.write(reading.target, gathered)
        except ApiError as exc:
            return self._failed(reading.target, exc)
        return None

    async def _carry_out(
        self, reading: Reading, decision: Decision, changes: WorkloadChanges
    ) -> Acted:
        """The strategy's part of the pass, added to ``changes``; a maintaining strategy's
        look at its own objects when nothing changes the workload."""
        key, target, assessment = reading.key, reading.target, reading.assessment
        strategy, book = reading.strategy, self.book
        view, action = target.view, Action.NONE
        if isinstance(decision, Adopt):
            book.applying(key, strategy.name, decision.config_hash)
            await strategy.adopt(target, decision, assessment, changes)
            action = Action.ADOPTED
            # Adopted what runs now; only a hold for missing config can follow. Decide on
            # the record as it is now: the adopted hash is in it.
            decision = self._decision(view, assessment, book.memory(key) or WorkloadMemory(),
                                      strategy)  # fmt: skip
        if isinstance(decision, Apply):
            # Before the write, as above (one call: the book is the pass's to enter sparingly).
            book.started(key, strategy.name, decision.config_hash, followed=strategy.capped)
            await strategy.apply(target, decision, assessment, changes)
            return Acted(Action.ROLLED, decision, view)
        # The same test as isinstance(strategy, Maintaining), whose runtime protocol check
        # cost 2-3% of the CPU of a fan-out of 1,000 (py-spy).
        if isinstance(decision, Hold) or getattr(strategy, "maintain", None) is None:
            return Acted(action, decision, view)
        if action is Action.ADOPTED:
            # Its objects are kept by what the adoption writes (snapshot's copies of the
            # config the pods run): looked at once the caches show it.
            return Acted(action, decision, view, MAINTAIN_AFTER_APPLY)
        assert isinstance(strategy, Maintaining)  # nosec B101 # narrowing, after the cheap test
        maintained = await strategy.maintain(target, assessment, changes)
        return Acted(action, decision, view, maintained)

    def _written(self, reading: Reading, acted: Acted) -> None:
        """Once the pass's write is made: what an adoption's pods run is remembered; a
        rollout counts for the flap cap and, if its strategy restarts pods, is announced."""
        decision = acted.decision
        if acted.action is Action.ADOPTED:
            self.book.runs(reading.key, reading.assessment.states)
        if acted.action is not Action.ROLLED or not isinstance(decision, Apply):
            return
        target = reading.target
        self.book.rolled(reading.key, decision.rolled_at[-1], acted.view)
        if reading.strategy.capped:
            what = describe_apply(decision, reading.assessment.states, target.namespace)
            self.announcer.announce(target, NotificationKind.ROLLING, "Rolling",
                                   f"rolling: {what}", decision.config_hash)  # fmt: skip

    # -- remember --------------------------------------------------------------------------

    def _remember(self, reading: Reading, acted: Acted) -> Outcome:
        """A hold is reported; otherwise the pods now run (or are rolling to) what the
        sources hold: later Events name the keys that change from here. A rollout just
        started is looked at again at its deadline, and by a maintaining strategy once the
        caches show its new template."""
        decision, follow_up = acted.decision, reading.follow_up
        if isinstance(decision, Hold):
            self.announcer.held(reading.target, decision, reading.assessment.desired)
            return Outcome(Action.HELD, decision.retry_after, f"held-{decision.reason}", follow_up)
        self.book.runs(reading.key, reading.assessment.states)
        if acted.action is not Action.ROLLED:
            return Outcome(acted.action, acted.maintained, follow_up=follow_up)
        if reading.strategy.capped and acted.view.progress is not None:
            follow_up = progress_deadline(acted.view)  # a kind whose rollout can be followed
        maintains = getattr(reading.strategy, "maintain", None) is not None
        return Outcome(acted.action, MAINTAIN_AFTER_APPLY if maintains else None,
                       follow_up=follow_up)  # fmt: skip

    async def _oldest_pod_start(self, target: Target, memory: WorkloadMemory) -> float | None:
        """At first sight only: when the workload's longest-running pod read its config
        (one list of its pods). Unknown (None) when it can't be read: adopt, don't roll."""
        view = target.view
        first_sight = memory.applied is None and view.applied_hash is None
        if not (first_sight and view.settings.roll_stale_on_adoption and view.pod_selector):
            return None
        try:
            return await oldest_container_start(
                self.context.client, target.namespace, view.pod_selector
            )
        except ApiError as exc:
            log.warning(
                "%s: cannot list its pods to tell whether they are stale (%s); adopting "
                "without a rollout", target, exc,
            )  # fmt: skip
            return None

    def _failed(self, target: Target, exc: ApiError) -> Outcome:
        """A write the API refused: retried with backoff (gone: nothing to do)."""
        if exc.not_found:
            return Outcome(Action.GONE)
        self.announcer.write_failed(target, exc)
        return Outcome(Action.FAILED)
