"""Following the rollouts kube-nudge started, at the start of a pass (the read step) whose
rollout has news (``model.tracking.rollout_news``): a rollout that completed is announced;
one that failed is recorded on the workload (once: ``kube-nudge.io/failed``, so a restart
or a new leader stops the same line and announces nothing twice), announced, and rolled
back when asked to and the strategy can. The record and the rollback go in the pass's one
write (``WorkloadChanges``); their announcements are its effects, made once it is written."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial

from kube_nudge.controller.announcer import Announcer
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.workloads import Target
from kube_nudge.model.annotations import FAILED
from kube_nudge.model.gates import display_workload
from kube_nudge.model.records import format_failed
from kube_nudge.model.tracking import Phase, RolloutNews, Tracking
from kube_nudge.notifications.model import NotificationKind
from kube_nudge.strategies.base import CannotRollBack, RollingBack, Strategy, StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = ["RolloutFollower"]

log = logging.getLogger(__name__)


class RolloutFollower:
    """Announces, records and rolls back the rollouts the book follows, when a pass finds
    news of one (``model.tracking.rollout_news``, from the phase on its ``Page``)."""

    def __init__(
        self,
        strategies: Mapping[str, Strategy],
        announcer: Announcer,
        context: StrategyContext,
    ) -> None:
        self._strategies = strategies
        self._announcer = announcer
        self._context = context

    async def follow(
        self, target: Target, tracking: Tracking, news: RolloutNews, strategy: Strategy,
        changes: WorkloadChanges,
    ) -> None:  # fmt: skip
        """Announce a rollout that completed; record (once) and announce one that failed,
        and roll it back if asked to (until it is: a failed rollback is tried again).
        ``news``: what the rollout did (``model.tracking.rollout_news``); ``changes``: the
        pass's, which the record and the rollback go in."""
        if news is Phase.COMPLETE:
            self._completed(target, tracking)
            return
        # Failed (the only other news, as its type says).
        if not tracking.recorded:
            self._record_failure(target, tracking, strategy, changes)
        if (
            target.view.settings.rollback_on_failure
            and isinstance(strategy, RollingBack)
            and tracking.config_hash is not None
            and not target.view.rolled_back
        ):
            await self._roll_back(target, strategy, tracking.config_hash, changes)

    def _completed(self, target: Target, tracking: Tracking) -> None:
        kind = target.kind.resource.kind
        self._announcer.metrics.rollouts_finished.labels(kind=kind, outcome="complete").inc()
        log.info(
            "%s: rollout to %s complete (%s)", target, tracking.config_hash,
            tracking.detail, extra=target.log_fields("complete"),
        )  # fmt: skip
        message = f"rollout complete: {tracking.detail}" if tracking.detail else "rollout complete"
        self._announcer.post(target, NORMAL, "RolloutComplete", message)
        self._announcer.announce(target, NotificationKind.COMPLETE, "RolloutComplete", message,
                                tracking.config_hash)  # fmt: skip

    def _record_failure(
        self, target: Target, tracking: Tracking, strategy: Strategy, changes: WorkloadChanges
    ) -> None:
        """Record ``kube-nudge.io/failed`` (so a restart or a new leader stops the same line
        and announces nothing twice); once written, the Warning Event."""
        if tracking.config_hash is None:
            return
        now = round(self._context.clock.now(), 3)
        changes.annotate({FAILED: format_failed(tracking.config_hash, now)})
        changes.then(lambda: self._failed(target, tracking, strategy))

    def _failed(self, target: Target, tracking: Tracking, strategy: Strategy) -> None:
        """Say a rollout failed: the metric, a log line, the Event and the notification."""
        assert tracking.config_hash is not None  # nosec B101 # recorded only with one
        kind = target.kind.resource.kind
        self._announcer.metrics.rollouts_finished.labels(kind=kind, outcome="failed").inc()
        message = (
            f"rollout to config {tracking.config_hash} failed: {tracking.detail or 'no progress'}"
            f"; workloads rolling the same change are held (kube-nudge release "
            f"{display_workload(kind, target.namespace, target.name)} restarts the line)"
        ) + self._after_failure(target, strategy)
        log.warning("%s: %s", target, message, extra=target.log_fields("failed"))
        self._announcer.post(target, WARNING, "RolloutFailed", message)
        # After the record: a replica that dies in between loses this one announcement
        # rather than a new leader sending it twice (receivers can also drop repeats by id).
        self._announcer.announce(target, NotificationKind.FAILED, "RolloutFailed", message,
                                tracking.config_hash)  # fmt: skip

    def _after_failure(self, target: Target, strategy: Strategy) -> str:
        """What happens next, for the failure's message."""
        if target.kind.revisions is None:
            # (An Argo Rollout, a --workload kind: no strategy has a revision to go back to.)
            return (
                f"; kube-nudge cannot roll back a {target.kind.resource.kind}: it reads no "
                f"revisions of that kind (revert the source)"
            )
        if isinstance(strategy, RollingBack) and target.view.settings.rollback_on_failure:
            return f"; rolling back to {strategy.rolls_back_to}"
        if isinstance(strategy, RollingBack):
            return (
                "; not rolled back (kube-nudge.io/on-failure: rollback would; or kubectl "
                "rollout undo)"
            )
        can = " or ".join(n for n, s in self._strategies.items() if isinstance(s, RollingBack))
        instead = f", or use strategy {can}" if can else ""
        return (
            f"; kube-nudge cannot roll it back: strategy {strategy.name} keeps no copy of the "
            f"earlier config (revert the source{instead})"
        )

    async def _roll_back(
        self, target: Target, strategy: RollingBack, failed_hash: str, changes: WorkloadChanges
    ) -> None:
        """Put ``target`` back (the pass's write), and say so once written; or say why not
        (once the failure's record is written)."""
        try:
            done = await strategy.rollback(target, failed_hash, changes)
        except CannotRollBack as exc:
            # Never "RolledBack" when the earlier config is not what the pods get back.
            message = f"not rolled back: {exc}; held on the failed config"
            log.warning("%s: %s", target, message, extra=target.log_fields("rollback-impossible"))
            changes.then(lambda: self._announcer.post(target, WARNING, "RollbackImpossible",
                                                      message))  # fmt: skip
            return
        except ApiError as exc:
            if exc.not_found:
                return
            changes.then(partial(self._rollback_failed, target, exc))
            changes.failure = exc  # the failure's record is written all the same
            return
        message = f"{done}, after a failed rollout"

        def rolled_back() -> None:
            log.warning("%s: %s", target, done, extra=target.log_fields("rolled-back"))
            self._announcer.post(target, WARNING, "RolledBack", message)
            self._announcer.announce(target, NotificationKind.ROLLED_BACK, "RolledBack",
                                     message, failed_hash)  # fmt: skip

        changes.said_of_operations(rolled_back, partial(self._rollback_failed, target))

    def _rollback_failed(self, target: Target, exc: ApiError) -> None:
        """Say a rollback could not be read or written: it is tried again at the next look."""
        log.warning("%s: rollback failed: %s", target, exc)
        self._announcer.post(
            target, WARNING, "RollbackFailed",
            f"could not roll back (tried again at the next look): {exc}",
        )  # fmt: skip
