"""Level-triggered reconcile of one workload: read → decide → apply → remember.

Read the workload's view and its sources from the caches, let the pure ``model.decide``
choose (noop, adopt, hold, apply), let the workload's strategy carry it out, then update
the one memory record kept per workload. Events and metrics for holds and failures are
posted here; strategies post their own for what they do.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from kube_nudge.kube.client import ApiError
from kube_nudge.kube.events import WARNING
from kube_nudge.kube.workloads import WorkloadKind
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
)
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import Maintaining, NotYet, Refused, Strategy, Target

__all__ = ["Outcome", "Reconciler", "WorkloadKey"]

log = logging.getLogger(__name__)

WorkloadKey = tuple[WorkloadKind, str, str]  # (kind, namespace, name)
_STATES = {"none": "current", "adopted": "current", "rolled": "applied", "failed": "failed"}
MAINTAIN_AFTER_APPLY = 1.0
"""Seconds after a rollout before a maintaining strategy (snapshot) looks at its objects."""
PodStartLookup = Callable[[str, str], Awaitable[float | None]]
"""(namespace, label selector) -> when the longest-running matching pod read its config."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reconcile did; ``requeue_after`` asks for another pass (seconds). A
    ``failed`` outcome is retried with the queue's per-key backoff."""

    action: str  # "none" | "adopted" | "rolled" | "held" | "gone" | "failed"
    requeue_after: float | None = None
    state: str | None = None  # for holds: held-missing | held-flapping | held-invalid


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
    ) -> None:
        self.hmac_key = hmac_key
        self.workload = workload
        self.source = source
        self.strategies = strategies
        self.events = events
        self.metrics = metrics
        self.pod_start = pod_start
        self.clock = clock
        self._memory: dict[WorkloadKey, WorkloadMemory] = {}

    def observed(self, key: WorkloadKey, view: WorkloadView | None) -> bool:
        """Called by the workload cache on every change of ``key``'s view; True when the
        change is our own last write coming back."""
        if view is None:
            gone = self._memory.pop(key, None)
            if gone is not None:
                self._count_state(gone, None)
            return False
        memory = self._memory.get(key)
        return memory is not None and memory.observe(view)

    async def reconcile(self, key: WorkloadKey) -> Outcome:
        """One level-triggered pass over ``key``."""
        started = time.perf_counter()
        try:
            outcome = await self._reconcile(key)
        finally:
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        memory = self._memory.get(key)
        if memory is not None and outcome.action != "gone":
            self._count_state(memory, _STATES.get(outcome.action, outcome.state))
        return outcome

    def _count_state(self, memory: WorkloadMemory, state: str | None) -> None:
        """Move the workload from its last state's count to ``state``'s."""
        if memory.state == state:
            return
        if memory.state is not None:
            self.metrics.workloads.labels(state=memory.state).dec()
        if state is not None:
            self.metrics.workloads.labels(state=state).inc()
        memory.state = state

    async def _reconcile(self, key: WorkloadKey) -> Outcome:
        kind, namespace, name = key
        view = self.workload(key)
        if view is None:
            return Outcome("gone")
        target = Target(kind, namespace, name, view)
        if view.errors:
            self.events.post(target.ref, WARNING, "InvalidAnnotation", "; ".join(view.errors))
        assessment = assess(view, self.source, self.hmac_key)
        for ref in assessment.refused:
            self.events.post(
                target.ref, WARNING, "SourceNotShared",
                f"ignoring {ref}: it does not list namespace {namespace!r} in "
                "kube-nudge.io/share-with (or does not exist)",
            )  # fmt: skip
        strategy = self.strategies[view.settings.strategy]
        memory = self._memory.setdefault(key, WorkloadMemory())
        oldest = await self._oldest_pod_start(target, memory)
        decision = self._decide(view, assessment, memory, strategy, oldest)
        action = "none"
        # What we are about to write is remembered first: the watch echo of a write can be
        # handled before the write's own response resumes this coroutine, and an echo not
        # recognised as ours queues a reconcile whose earlier ready time would then cut
        # the next change's debounce window short.
        before = (memory.applied, memory.strategy)
        try:
            if isinstance(decision, Adopt):
                memory.remember_applied(strategy.name, decision.config_hash)
                await strategy.adopt(target, decision, assessment)
                memory.rolled_with = assessment.states
                action = "adopted"
                # Adopted what runs now; only a hold for missing config can follow. Decide
                # on the view as cached now: if the write's echo came in before its
                # response, it has taken the adopted hash out of memory and into the view.
                view = self.workload(key) or view
                decision = self._decide(view, assessment, memory, strategy)
            if isinstance(decision, Apply):
                memory.remember_applied(strategy.name, decision.config_hash)
                await strategy.apply(target, decision, assessment)
                now = decision.rolled_at[-1]
                memory.remember_rollout(now, view)
                action = "rolled"
        except ApiError as exc:
            memory.applied, memory.strategy = before
            return self._failed(target, exc)
        except Refused as refusal:
            memory.applied, memory.strategy = before
            decision = refusal.hold
        except NotYet as exc:
            memory.applied, memory.strategy = before
            log.debug("%s: not yet (%s); trying again shortly", target, exc)
            return Outcome("failed")
        except BaseException:
            # Cancelled (this replica stopped leading mid-write) or a bug: the write may not
            # have happened, so it must not be remembered as done. (The fault suite lost
            # changes this way: the next leader term took the unwritten hash for applied.)
            memory.applied, memory.strategy = before
            raise
        if isinstance(decision, Hold):
            self._hold(target, decision)
            return Outcome("held", decision.retry_after, f"held-{decision.reason}")
        # The pods now run (or are rolling to) what the sources hold: later Events name
        # the keys that change from here.
        memory.rolled_with = assessment.states
        if not isinstance(strategy, Maintaining):
            return Outcome(action)
        if action == "rolled":
            # The cache doesn't show the new template yet: look again once it does.
            return Outcome(action, MAINTAIN_AFTER_APPLY)
        try:
            return Outcome(action, await strategy.maintain(target, assessment))
        except ApiError as exc:
            return self._failed(target, exc)

    def _decide(
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
        )  # fmt: skip

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

    def _hold(self, target: Target, hold: Hold) -> None:
        self.metrics.holds.labels(reason=hold.reason).inc()
        retry = f" (next try in {hold.retry_after:.1f} s)" if hold.retry_after else ""
        log.warning(
            "%s: %s%s", target, hold.message, retry,
            extra=target.log_fields("held", reason=hold.reason),
        )  # fmt: skip
        self.events.post(target.ref, WARNING, hold.event_reason, hold.message)

    def memory(self, key: WorkloadKey) -> WorkloadMemory | None:
        """The memory record of ``key`` (for tests and status)."""
        return self._memory.get(key)
