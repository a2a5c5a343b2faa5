"""Level-triggered reconcile of one workload: compute the hash of the config it consumes now,
compare with the hash its pods run, and write only when they differ (and it is safe)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kube_nudge.controller.views import SourceView, WorkloadKind, WorkloadView
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.events import NORMAL, WARNING, EventRecorder, ObjectRef
from kube_nudge.model import (
    ABSENT,
    Consumption,
    SourceRef,
    SourceState,
    changed_keys,
    config_hash,
    cross_namespace_allowed,
    missing_requirements,
)
from kube_nudge.ops.metrics import Metrics
from kube_nudge.strategies import rollout

log = logging.getLogger(__name__)

WorkloadKey = tuple[WorkloadKind, str, str]  # (kind, namespace, name)
_MAX_RECORDED_ROLLOUTS = 10  # kept on the workload; caps above this are enforced in memory
_CLOCK_SKEW = 60.0  # rollout times recorded by another replica this far ahead still count


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a reconcile did; ``requeue_after`` asks for another pass (seconds)."""

    action: str  # "none" | "adopted" | "rolled" | "held" | "gone" | "failed"
    requeue_after: float | None = None


class Reconciler:
    """Turns a workload key into at most one write, plus Events and metrics."""

    def __init__(
        self,
        client: KubeClient,
        *,
        hmac_key: bytes,
        workload: Callable[[WorkloadKey], WorkloadView | None],
        source: Callable[[SourceRef], SourceView | None],
        recorder: EventRecorder,
        metrics: Metrics,
    ) -> None:
        self.client = client
        self.hmac_key = hmac_key
        self.workload = workload
        self.source = source
        self.recorder = recorder
        self.metrics = metrics
        self._rollouts: dict[WorkloadKey, set[float]] = {}
        self._rolled_with: dict[WorkloadKey, Mapping[SourceRef, SourceState]] = {}
        # Hash we wrote but whose watch event has not arrived yet: a reconcile in between
        # must not write the same value again.
        self._written: dict[WorkloadKey, str] = {}
        self._failures: dict[WorkloadKey, int] = {}
        self._events: set[asyncio.Task[None]] = set()

    def observed(self, key: WorkloadKey, view: WorkloadView | None) -> bool:
        """Called by the workload cache on every change of ``key``'s view; True when the
        change is our own last write coming back."""
        if view is None:
            for table in (self._rollouts, self._rolled_with, self._written, self._failures):
                table.pop(key, None)
        elif key in self._written and self._written[key] == view.applied_hash:
            del self._written[key]
            return True
        return False

    async def reconcile(self, key: WorkloadKey) -> Outcome:
        """One level-triggered pass over ``key``."""
        started = time.perf_counter()
        try:
            return await self._reconcile(key)
        finally:
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)

    async def _reconcile(self, key: WorkloadKey) -> Outcome:
        kind, namespace, name = key
        view = self.workload(key)
        if view is None:
            return Outcome("gone")
        ref = ObjectRef(kind.resource.api_version, kind.resource.kind, namespace, name, view.uid)
        if view.errors:
            self.event(ref, WARNING, "InvalidAnnotation", "; ".join(view.errors))
        if not view.has_template:
            path = ".".join(kind.template_path)
            await self._hold(ref, "invalid", "NoPodTemplate", f"no pod template at {path}")
            return Outcome("held")

        consumed, refused = self._visible(view.consumed, namespace)
        for source_ref in refused:
            self.event(
                ref, WARNING, "SourceNotShared",
                f"ignoring {source_ref}: it does not list namespace {namespace!r} in "
                "kube-nudge.io/share-with (or does not exist)",
            )  # fmt: skip
        states = {source_ref: self._state(source_ref) for source_ref in consumed}
        desired = config_hash(self.hmac_key, consumed, states)
        applied = self._written.get(key, view.applied_hash)
        if applied is None:
            # First sight: record what the pods run now (even if some of it is missing, so
            # that its arrival rolls them) and restart nothing.
            patch = rollout.adopt_patch(view.uid, desired)
            outcome = await self._write(key, ref, patch, desired, states, "adopted")
            if outcome.action != "adopted":
                return outcome
            applied = desired

        missing = missing_requirements(consumed, states, namespace=namespace)
        if missing:
            await self._hold(ref, "missing", "ConfigMissing", "not rolling: " + "; ".join(missing))
            return Outcome("held")
        if desired == applied:
            self._rolled_with[key] = states
            return Outcome("none")

        now = round(time.time(), 3)
        recent = self._recent_rollouts(key, view, now)
        if len(recent) >= view.settings.max_rollouts:
            wait = recent[0] + view.settings.rollout_window - now
            await self._hold(
                ref, "flapping", "RolloutsCapped",
                f"held: {len(recent)} rollouts in the last {view.settings.rollout_window:g} s "
                f"(max {view.settings.max_rollouts}); will roll the latest config in {wait:.0f} s",
            )  # fmt: skip
            return Outcome("held", requeue_after=max(wait, 0.05))

        # The cap needs only the last max_rollouts times; recording more would grow the
        # workload object (and every watch event of it) with each rollout.
        keep = min(view.settings.max_rollouts, _MAX_RECORDED_ROLLOUTS) - 1
        rolled_at = [*recent[max(len(recent) - keep, 0) :], now]
        patch = rollout.rollout_patch(
            kind, view.uid, desired, had_baseline=bool(view.baseline_hash), rolled_at=rolled_at
        )
        outcome = await self._write(key, ref, patch, desired, states, "rolled")
        if outcome.action == "rolled":
            self._rollouts.setdefault(key, set()).add(now)
            self.metrics.nudges.labels(kind=kind.resource.kind).inc()
            message = self._describe(consumed, self._rolled_with.get(key), states, namespace)
            self.event(ref, NORMAL, "Rolling", message)
        self._rolled_with[key] = states
        return outcome

    async def _write(
        self,
        key: WorkloadKey,
        ref: ObjectRef,
        patch: dict[str, object],
        desired: str,
        states: Mapping[SourceRef, SourceState],
        action: str,
    ) -> Outcome:
        kind, namespace, name = key
        try:
            await rollout.write(self.client, kind, namespace, name, patch)
        except ApiError as exc:
            if exc.not_found:
                return Outcome("gone")
            self.metrics.errors.labels(stage="write").inc()
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            log.warning("writing %s %s/%s failed: %s", kind.resource.kind, namespace, name, exc)
            if not exc.conflict:  # 409: uid changed (recreated); the next event settles it
                self.event(ref, WARNING, "WriteFailed", f"could not update: {exc}")
            return Outcome("failed", requeue_after=min(0.5 * 2**failures, 60.0))
        self._failures.pop(key, None)
        self._written[key] = desired
        self.metrics.writes.labels(kind=kind.resource.kind).inc()
        if action == "adopted":
            self._rolled_with[key] = states
            self.event(
                ref, NORMAL, "Adopted",
                "recorded the hash of the config the pods run; the next change rolls them",
            )  # fmt: skip
        log.info("%s %s %s/%s to %s", action, kind.resource.kind, namespace, name, desired)
        return Outcome(action)

    def _visible(
        self, consumed: Mapping[SourceRef, Consumption], namespace: str
    ) -> tuple[dict[SourceRef, Consumption], list[SourceRef]]:
        """Drop ignored sources, and sources of other namespaces that were not shared."""
        visible: dict[SourceRef, Consumption] = {}
        refused: list[SourceRef] = []
        for source_ref, use in consumed.items():
            view = self.source(source_ref)
            if source_ref.namespace != namespace and (
                view is None
                or not cross_namespace_allowed(namespace, source_ref.namespace, view.settings)
            ):
                refused.append(source_ref)
            elif view is None or not view.settings.ignore:
                visible[source_ref] = use
        return visible, refused

    def _state(self, ref: SourceRef) -> SourceState:
        view = self.source(ref)
        return view.state if view is not None else ABSENT

    def _recent_rollouts(self, key: WorkloadKey, view: WorkloadView, now: float) -> list[float]:
        """Rollouts within the window, oldest first: those this process made, and those
        recorded on the workload (by this process before a restart, or by another leader)."""
        known = self._rollouts.setdefault(key, set())
        known.update(view.rolled_at)
        horizon = now - view.settings.rollout_window
        known.difference_update([t for t in known if t <= horizon])
        return sorted(t for t in known if t <= now + _CLOCK_SKEW)

    @staticmethod
    def _describe(
        consumed: Mapping[SourceRef, Consumption],
        before: Mapping[SourceRef, SourceState] | None,
        after: Mapping[SourceRef, SourceState],
        namespace: str,
    ) -> str:
        if before is None:
            return "rolling: config changed while kube-nudge was not watching"
        parts = []
        for source_ref, keys in changed_keys(consumed, before, after).items():
            label = source_ref.display(namespace)
            if not keys:
                parts.append(f"{label} appeared" if after.get(source_ref, ABSENT).present
                             else f"{label} removed")  # fmt: skip
            else:
                parts.append(f"{label} keys [{', '.join(keys)}] changed")
        return "rolling: " + ("; ".join(parts) if parts else "consumed sources changed")

    async def _hold(self, ref: ObjectRef, reason: str, event_reason: str, message: str) -> None:
        self.metrics.holds.labels(reason=reason).inc()
        log.warning("%s %s/%s: %s", ref.kind, ref.namespace, ref.name, message)
        self.event(ref, WARNING, event_reason, message)

    def event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        """Post an Event in the background (see ``flush_events``)."""
        # Posted in the background: Events have their own budget and never delay a rollout.
        task = asyncio.create_task(self._post_event(ref, event_type, reason, message))
        self._events.add(task)
        task.add_done_callback(self._events.discard)

    async def _post_event(self, ref: ObjectRef, event_type: str, reason: str, message: str) -> None:
        if not await self.recorder.record(ref, event_type, reason, message):
            self.metrics.errors.labels(stage="event").inc()

    async def flush_events(self) -> None:
        """Wait until every Event scheduled so far has been posted (or failed)."""
        while self._events:
            await asyncio.gather(*list(self._events), return_exceptions=True)
