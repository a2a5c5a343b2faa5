"""Level-triggered reconcile of one workload, in four steps: read → decide → act → remember.

- **read**: the workload's view and its sources from the caches (``assess``), its memory
  record and the phase of its rollout from the rollout book (``controller/book.py``); what
  that rollout did since the last pass is announced (complete, failed: recorded, rolled
  back if asked);
- **decide**: the pure ``model.decide`` (noop, adopt, hold, apply), then the release gates
  for a rollout (``model.gates``), unless the change's debounce window is still open;
- **act**: the workload's strategy adopts or rolls; what it is about to write is in the
  book first (its echo can come before its response) and out again if the write fails;
- **remember**: the memory record and the book, the Events and notifications of a hold,
  and the ``Outcome``: the one way a pass asks to be looked at again (``requeue_after``,
  ``follow_up``; carried out by ``controller/nextlook.py``).

Events and metrics for holds and failures are posted here; strategies post their own for
what they do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from kube_nudge.controller.book import RolloutBook, WorkloadKey
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    Decision,
    Hold,
    SourceRef,
    SourceView,
    WorkloadMemory,
    WorkloadView,
    assess,
    decide,
    describe_apply,
)
from kube_nudge.model.annotations import FAILED
from kube_nudge.model.gates import Sibling, gate
from kube_nudge.model.records import format_failed
from kube_nudge.model.tracking import Phase, Tracking, progress_deadline
from kube_nudge.notifications.model import Notification, NotificationKind
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import (
    ExtendsModel,
    Maintaining,
    NotYet,
    Refused,
    RollingBack,
    Strategy,
    Target,
    notification,
)

__all__ = ["Outcome", "Reconciler", "WorkloadKey"]

log = logging.getLogger(__name__)

_STATES = {"none": "current", "adopted": "current", "rolled": "applied", "failed": "failed"}
MAINTAIN_AFTER_APPLY = 1.0
"""Seconds after a rollout before a maintaining strategy looks at its own objects."""
PodStartLookup = Callable[[str, str], Awaitable[float | None]]
"""(namespace, label selector) -> when the longest-running matching pod read its config."""
#: Holds that are the release working as configured (its order, a turn, a window): Events
#: and metrics, but no notification (receivers hear what needs a human).
ROUTINE_HOLDS = frozenset({"order", "turn", "window"})
Annotate = Callable[[Target, Mapping[str, str | None]], Awaitable[None]]
"""Writes annotations on a workload's metadata (None removes one)."""


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the release gates need to know beyond one workload: the other workloads
    consuming a source, and how many may roll at once."""

    consumers: Callable[[SourceRef], Iterable[WorkloadKey]]
    max_concurrent: int | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reconcile did, and the one way it asks to be looked at again: after
    ``requeue_after`` seconds (queued: work to wait for), and/or at ``follow_up`` (a timer:
    only scheduled). A ``failed`` outcome is retried with the queue's per-key backoff."""

    action: str  # "none" | "adopted" | "rolled" | "held" | "gone" | "failed"
    requeue_after: float | None = None
    state: str | None = None  # for holds: held-missing | held-flapping | held-invalid
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
    memory: WorkloadMemory
    tracking: Tracking
    follow_up: float | None
    """When to look again if the rollout in progress stays stuck (``Outcome.follow_up``)."""
    oldest_pod_start: float | None


@dataclass(frozen=True, slots=True)
class Acted:
    """What a pass did: the decision that stands after its writes, and the view then."""

    action: str  # "none" | "adopted" | "rolled"
    decision: Decision
    view: WorkloadView


class Reconciler:
    """Turns a workload key into at most one strategy action, plus Events and metrics."""

    def __init__(
        self,
        *,
        hmac_key: bytes,
        workload: Callable[[WorkloadKey], WorkloadView | None],
        source: Callable[[SourceRef], SourceView | None],
        strategies: Mapping[str, Strategy],
        events: BackgroundEvents,
        metrics: Metrics,
        pod_start: PodStartLookup | None = None,
        clock: Clock = SYSTEM_CLOCK,
        fleet: Fleet | None = None,
        annotate: Annotate | None = None,
        notify: Callable[[Notification], None] | None = None,
        window_open: Callable[[WorkloadKey], bool] = lambda key: False,
        book: RolloutBook | None = None,
    ) -> None:
        self.hmac_key = hmac_key
        self.window_open = window_open
        """Whether a change's debounce window is open for a workload (the work queue's)."""
        self.workload = workload
        self.source = source
        self.strategies = strategies
        self.events = events
        self.metrics = metrics
        self.pod_start = pod_start
        self.clock = clock
        self.fleet = fleet
        self.annotate = annotate
        self.notify = notify
        counting = fleet is not None and fleet.max_concurrent is not None
        self.book = book if book is not None else RolloutBook(
            workload, capped=lambda view: self.strategies[view.settings.strategy].capped,
            metrics=metrics, clock=clock, count_rolling=counting,
        )  # fmt: skip
        """The rollouts followed (the controller's, which its watch handler keeps)."""

    async def reconcile(self, key: WorkloadKey) -> Outcome:
        """One level-triggered pass over ``key``."""
        started = time.perf_counter()
        try:
            outcome = await self._reconcile(key)
        finally:
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        if outcome.action != "gone":
            self.book.set_state(key, _STATES.get(outcome.action, outcome.state))
        return outcome

    async def _reconcile(self, key: WorkloadKey) -> Outcome:
        reading = await self._read(key)
        if isinstance(reading, Outcome):
            return reading  # gone, or following its rollout failed
        decision = self._decide(reading)
        if decision is None:
            # An early pass (a retry, a follow-up) while the change's debounce window is
            # open: the pass at the window's end rolls it, with what else comes by then.
            return Outcome("none", follow_up=reading.follow_up)
        acted = await self._act(reading, decision)
        if isinstance(acted, Outcome):
            return acted  # the write failed
        return await self._remember(reading, acted)

    # -- read ------------------------------------------------------------------------------

    async def _read(self, key: WorkloadKey) -> Reading | Outcome:
        """The view and its sources, the memory record and the rollout's phase; what the
        rollout did since the last pass is announced (and recorded, if it failed)."""
        view = self.workload(key)
        if view is None:
            return Outcome("gone")
        target = Target(*key, view)
        assessment = assess(view, self.source, self.hmac_key)
        self._report_input(target, assessment)
        strategy = self.strategies[view.settings.strategy]
        memory = self.book.remember(key)
        tracking = self.book.tracking(key, view)
        try:
            await self._follow(key, target, tracking, strategy)
        except ApiError as exc:
            return self._failed(target, exc)
        follow_up = self._follow_up(tracking)
        oldest = await self._oldest_pod_start(target, memory)
        return Reading(key, target, assessment, strategy, memory, tracking, follow_up, oldest)

    def _report_input(self, target: Target, assessment: Assessment) -> None:
        """Warning Events for annotations that don't parse and sources not shared."""
        view = target.view
        if view.errors:
            self.events.post(target.ref, WARNING, "InvalidAnnotation", "; ".join(view.errors))
        for ref in assessment.refused:
            self.events.post(
                target.ref, WARNING, "SourceNotShared",
                f"ignoring {ref}: it does not list namespace {target.namespace!r} in "
                "kube-nudge.io/share-with (or does not exist)",
            )  # fmt: skip

    def _follow_up(self, tracking: Tracking) -> float | None:
        """Look again when a rollout in progress would be called failed (status changes
        wake it sooner; a stuck rollout sends none), whatever this pass decides."""
        if tracking.phase is Phase.ROLLING and tracking.deadline_at is not None:
            return max(tracking.deadline_at - self.clock.now(), MAINTAIN_AFTER_APPLY)
        return None

    # -- decide ----------------------------------------------------------------------------

    def _decide(self, reading: Reading) -> Decision | None:
        """The pure decision, and for a rollout the release gates; None while the change's
        debounce window is open (a pass taken early must not roll it)."""
        view = reading.target.view
        decision = self._decision(view, reading.assessment, reading.memory,
                                  reading.strategy, reading.oldest_pod_start)  # fmt: skip
        if not isinstance(decision, Apply) or decision.config_hash == view.applied_hash:
            return decision
        if self.window_open(reading.key):
            return None
        return self._gate(reading.key, reading.target, reading.assessment, decision)

    def _decision(
        self,
        view: WorkloadView,
        assessment: Assessment,
        memory: WorkloadMemory,
        strategy: Strategy,
        oldest_pod_start: float | None = None,
    ) -> Decision:
        now = round(self.clock.now(), 3)
        return decide(
            view, assessment, memory, now, capped=strategy.capped,
            oldest_pod_start=oldest_pod_start,
            strategy=strategy.model if isinstance(strategy, ExtendsModel) else None,
        )  # fmt: skip

    # -- act -------------------------------------------------------------------------------

    async def _act(self, reading: Reading, decision: Decision) -> Acted | Outcome:
        """Let the strategy carry ``decision`` out. What it is about to write is in the
        book first (the write's watch echo can be handled before its response resumes
        this pass, and an echo not recognised as ours queues a reconcile whose earlier
        ready time would cut the next change's debounce window short); if the write
        raises, it is forgotten again (``RolloutBook.writing``)."""
        target = reading.target
        try:
            with self.book.writing(reading.key, reading.memory):
                return await self._write(reading, decision)
        except ApiError as exc:
            return self._failed(target, exc)
        except Refused as refusal:
            return Acted("none", refusal.hold, target.view)
        except NotYet as exc:
            log.debug("%s: not yet (%s); trying again shortly", target, exc)
            return Outcome("failed")

    async def _write(self, reading: Reading, decision: Decision) -> Acted:
        key, target, assessment = reading.key, reading.target, reading.assessment
        strategy, memory = reading.strategy, reading.memory
        view, action = target.view, "none"
        if isinstance(decision, Adopt):
            memory.remember_applied(strategy.name, decision.config_hash)
            await strategy.adopt(target, decision, assessment)
            memory.rolled_with = assessment.states
            action = "adopted"
            # Adopted what runs now; only a hold for missing config can follow. Decide
            # on the view as cached now: if the write's echo came in before its
            # response, it has taken the adopted hash out of memory and into the view.
            view = self.workload(key) or view
            decision = self._decision(view, assessment, memory, strategy)
        if isinstance(decision, Apply):
            memory.remember_applied(strategy.name, decision.config_hash)
            self.book.started(key, followed=strategy.capped)  # before the write, as above
            await strategy.apply(target, decision, assessment)
            memory.remember_rollout(decision.rolled_at[-1], view)
            action = "rolled"
            if strategy.capped:
                what = describe_apply(decision, assessment.states, target.namespace)
                self._announce(target, NotificationKind.ROLLING, "Rolling",
                               f"rolling: {what}", decision.config_hash)  # fmt: skip
        return Acted(action, decision, view)

    # -- remember --------------------------------------------------------------------------

    async def _remember(self, reading: Reading, acted: Acted) -> Outcome:
        """A hold is reported; otherwise the pods now run (or are rolling to) what the
        sources hold: later Events name the keys that change from here. A rollout just
        started is looked at again at its deadline."""
        decision, follow_up = acted.decision, reading.follow_up
        if isinstance(decision, Hold):
            self._hold(reading.target, decision, reading.assessment.desired)
            return Outcome("held", decision.retry_after, f"held-{decision.reason}", follow_up)
        reading.memory.rolled_with = reading.assessment.states
        rolled = acted.action == "rolled" and reading.strategy.capped
        if rolled and acted.view.progress is not None:  # a kind whose rollout can be followed
            follow_up = progress_deadline(acted.view)
        return await self._maintain(reading, acted.action, follow_up)

    async def _maintain(self, reading: Reading, action: str, follow_up: float | None) -> Outcome:
        """The outcome, once a maintaining strategy has looked at its own objects."""
        strategy = reading.strategy
        # The same test as isinstance(strategy, Maintaining), whose runtime protocol check
        # cost 2-3% of the CPU of a fan-out of 1,000 (py-spy).
        if getattr(strategy, "maintain", None) is None:
            return Outcome(action, follow_up=follow_up)
        assert isinstance(strategy, Maintaining)  # nosec B101 # narrowing, after the cheap test
        if action == "rolled":
            # The cache doesn't show the new template yet: look again once it does.
            return Outcome(action, MAINTAIN_AFTER_APPLY, follow_up=follow_up)
        try:
            maintained = await strategy.maintain(reading.target, reading.assessment)
        except ApiError as exc:
            return self._failed(reading.target, exc)
        return Outcome(action, maintained, follow_up=follow_up)

    # -- following rollouts ----------------------------------------------------------------

    async def _follow(
        self, key: WorkloadKey, target: Target, tracking: Tracking, strategy: Strategy
    ) -> None:
        """Announce a rollout that completed; record (once) and announce one that failed,
        and roll it back if asked to (until it is: a failed rollback is tried again)."""
        before = self.book.followed(key)
        phase = tracking.phase
        if phase is Phase.FAILED and not tracking.recorded:
            await self._record_failure(target, tracking, strategy)
        if (
            phase is Phase.FAILED
            and target.view.settings.rollback_on_failure
            and isinstance(strategy, RollingBack)
            and tracking.config_hash is not None
            and not target.view.rolled_back
        ):
            await self._roll_back(target, strategy, tracking.config_hash)
        elif phase is Phase.COMPLETE and before is Phase.ROLLING:
            kind = target.kind.resource.kind
            self.metrics.rollouts_finished.labels(kind=kind, outcome="complete").inc()
            log.info(
                "%s: rollout to %s complete (%s)", target, tracking.config_hash,
                tracking.detail, extra=target.log_fields("complete"),
            )  # fmt: skip
            message = (
                f"rollout complete: {tracking.detail}" if tracking.detail else ("rollout complete")
            )
            self.events.post(target.ref, NORMAL, "RolloutComplete", message)
            self._announce(target, NotificationKind.COMPLETE, "RolloutComplete", message,
                           tracking.config_hash)  # fmt: skip
        progress = target.view.progress
        if progress is None or progress.observed:
            # (An unobserved status says nothing: remembering it as rolling would announce a
            # completion that was never a rollout, e.g. after an annotation write.)
            self.book.follow(key, phase)

    async def _record_failure(self, target: Target, tracking: Tracking, strategy: Strategy) -> None:
        """Write ``kube-nudge.io/failed`` (so a restart or a new leader stops the same line
        and announces nothing twice), then the Warning Event."""
        if self.annotate is None or tracking.config_hash is None:
            return
        now = round(self.clock.now(), 3)
        await self.annotate(target, {FAILED: format_failed(tracking.config_hash, now)})
        kind = target.kind.resource.kind
        self.metrics.rollouts_finished.labels(kind=kind, outcome="failed").inc()
        message = (
            f"rollout to config {tracking.config_hash} failed: {tracking.detail or 'no progress'}"
            f"; workloads rolling the same change are held (kube-nudge release "
            f"{_display(target)} restarts the line)"
        )
        if isinstance(strategy, RollingBack) and target.view.settings.rollback_on_failure:
            message += f"; rolling back to {strategy.rolls_back_to}"
        elif isinstance(strategy, RollingBack):
            message += (
                "; not rolled back (kube-nudge.io/on-failure: rollback would; or kubectl "
                "rollout undo)"
            )
        else:
            can = " or ".join(n for n, s in self.strategies.items() if isinstance(s, RollingBack))
            instead = f", or use strategy {can}" if can else ""
            message += (
                "; kube-nudge cannot roll it back: strategy rollout keeps no copy of the "
                f"earlier config (revert the source{instead})"
            )
        log.warning("%s: %s", target, message, extra=target.log_fields("failed"))
        self.events.post(target.ref, WARNING, "RolloutFailed", message)
        # After the record: a replica that dies in between loses this one announcement
        # rather than a new leader sending it twice (receivers can also drop repeats by id).
        self._announce(target, NotificationKind.FAILED, "RolloutFailed", message,
                       tracking.config_hash)  # fmt: skip

    async def _roll_back(self, target: Target, strategy: RollingBack, failed_hash: str) -> None:
        try:
            done = await strategy.rollback(target, failed_hash)
        except ApiError as exc:
            if exc.not_found:
                return
            log.warning("%s: rollback failed: %s", target, exc)
            self.events.post(
                target.ref,
                WARNING,
                "RollbackFailed",
                f"could not roll back (tried again at the next look): {exc}",
            )
            raise
        if done is None:
            message = "no earlier revision to roll back to: held on the failed config"
            self.events.post(target.ref, WARNING, "RollbackImpossible", message)
            return
        log.warning("%s: %s", target, done, extra=target.log_fields("rolled-back"))
        message = f"{done}, after a failed rollout"
        self.events.post(target.ref, WARNING, "RolledBack", message)
        self._announce(target, NotificationKind.ROLLED_BACK, "RolledBack", message, failed_hash)

    def _announce(
        self,
        target: Target,
        kind: NotificationKind,
        reason: str,
        message: str,
        config_hash: str | None,
    ) -> None:
        """Tell the configured receivers (in the background; never blocks)."""
        if self.notify is not None:
            now = self.clock.now()
            self.notify(notification(target, kind, reason, message, config_hash or "", now))

    def _gate(
        self, key: WorkloadKey, target: Target, assessment: Assessment, plan: Apply
    ) -> Decision:
        """``plan``, or the hold that keeps it from starting now."""
        view = target.view
        fleet = self.fleet
        siblings: list[Sibling] = []
        rolling = 0
        if fleet is not None:
            siblings = self._siblings(key, assessment, plan, fleet)
            if fleet.max_concurrent is not None:
                rolling = self.book.rolling_count(exclude=key)
        hold = gate(
            view, now=self.clock.now(), changed_at=assessment.changed_at, siblings=siblings,
            rolling_elsewhere=rolling, window=view.settings.window,
            max_concurrent=fleet.max_concurrent if fleet is not None else None,
            workload_name=_display(target),
        )  # fmt: skip
        return plan if hold is None else hold

    def _siblings(
        self, key: WorkloadKey, assessment: Assessment, plan: Apply, fleet: Fleet
    ) -> list[Sibling]:
        """The other workloads consuming a source that changed for ``plan`` that a gate
        may wait for: those whose rollout failed, and, for an ordered workload, those of a
        lower order. Unordered workloads with no failure about cost nothing here."""
        order = self.workload(key)
        mine = order.settings.rollout_order if order is not None else None
        if mine is None and not self.book.any_failed():
            return []
        changed = plan.changes.keys() if plan.changes else assessment.visible.keys()
        keys = {other for ref in changed for other in fleet.consumers(ref) if other != key}
        found = []
        for other in sorted(keys, key=lambda k: (str(k[0]), k[1], k[2])):
            view = self.workload(other)
            if view is None:
                continue
            lower = (
                mine is not None
                and view.settings.rollout_order is not None
                and view.settings.rollout_order < mine
            )
            if not lower and not self.book.failed(other):
                continue
            memory = self.book.memory(other) or WorkloadMemory()
            desired = assess(view, self.source, self.hmac_key).desired
            found.append(Sibling(
                name=f"{other[0].resource.kind} {other[1]}/{other[2]}",
                order=view.settings.rollout_order,
                tracking=self.book.tracking(other, view),
                pending=desired != (memory.applied or view.applied_hash),
                released_at=view.released_at,
            ))  # fmt: skip
        return found

    async def _oldest_pod_start(self, target: Target, memory: WorkloadMemory) -> float | None:
        """At first sight only: when the workload's longest-running pod read its config
        (one list of its pods). Unknown (None) when it can't be read: adopt, don't roll."""
        view = target.view
        first_sight = memory.applied is None and view.applied_hash is None
        if not (first_sight and view.settings.roll_stale_on_adoption and view.pod_selector):
            return None
        if self.pod_start is None:
            return None
        try:
            return await self.pod_start(target.namespace, view.pod_selector)
        except ApiError as exc:
            log.warning(
                "%s: cannot list its pods to tell whether they are stale (%s); adopting "
                "without a rollout", target, exc,
            )  # fmt: skip
            return None

    def _failed(self, target: Target, exc: ApiError) -> Outcome:
        if exc.not_found:
            return Outcome("gone")
        self.metrics.errors.labels(stage="write").inc()
        log.warning("writing %s failed: %s", target, exc)
        if not exc.conflict:  # 409: uid changed (recreated); the next event settles it
            self.events.post(target.ref, WARNING, "WriteFailed", f"could not update: {exc}")
        return Outcome("failed")

    def _hold(self, target: Target, hold: Hold, config_hash: str) -> None:
        self.metrics.holds.labels(reason=hold.reason).inc()
        if hold.reason == "line-stopped":
            self._announce(target, NotificationKind.LINE_STOPPED, hold.event_reason,
                           hold.message, config_hash)  # fmt: skip
        elif hold.reason not in ROUTINE_HOLDS:
            self._announce(target, NotificationKind.HELD, hold.event_reason, hold.message,
                           config_hash)  # fmt: skip
        retry = f" (next try in {hold.retry_after:.1f} s)" if hold.retry_after else ""
        log.warning(
            "%s: %s%s", target, hold.message, retry,
            extra=target.log_fields("held", reason=hold.reason),
        )  # fmt: skip
        self.events.post(target.ref, WARNING, hold.event_reason, hold.message)


def _display(target: Target) -> str:
    """The workload as ``kube-nudge release`` and ``approve`` take it."""
    return f"-n {target.namespace} {target.kind.resource.kind.lower()}/{target.name}"
