"""What a reconcile tells people about what it found or could not do: Warning and Normal
Events, log lines, metrics and notifications. Strategies report what they write themselves
(through the same ``StrategyContext``)."""

from __future__ import annotations

import logging

from kube_nudge.kube.client import ApiError
from kube_nudge.kube.events import WARNING
from kube_nudge.kube.workloads import Target
from kube_nudge.model import Hold
from kube_nudge.notifications.model import NotificationKind
from kube_nudge.strategies.base import StrategyContext, notification

__all__ = ["ROUTINE_HOLDS", "Announcer"]

log = logging.getLogger(__name__)

#: Holds that are the release working as configured (its order, a turn, a window): Events
#: and metrics, but no notification (receivers hear what needs a human).
ROUTINE_HOLDS = frozenset({"order", "turn", "window"})


class Announcer:
    """Events, logs, metrics and notifications of the reconciler, from the context every
    strategy shares (its Events, metrics, notifier and clock)."""

    def __init__(self, context: StrategyContext) -> None:
        self._context = context
        self.metrics = context.metrics

    def post(self, target: Target, event_type: str, reason: str, message: str) -> None:
        """An Event on the workload (posted in the background)."""
        self._context.events.post(target.ref, event_type, reason, message)

    def announce(
        self,
        target: Target,
        kind: NotificationKind,
        reason: str,
        message: str,
        config_hash: str | None,
    ) -> None:
        """Tell the configured receivers (in the background; never blocks)."""
        now = self._context.clock.now()
        self._context.notify(notification(target, kind, reason, message, config_hash or "", now))

    def write_failed(self, target: Target, exc: ApiError) -> None:
        """A write the API refused (retried with backoff)."""
        self.metrics.errors.labels(stage="write").inc()
        log.warning("writing %s failed: %s", target, exc)
        if not exc.conflict:  # 409: uid changed (recreated); the next event settles it
            self.post(target, WARNING, "WriteFailed", f"could not update: {exc}")

    def held(self, target: Target, hold: Hold, config_hash: str) -> None:
        """A change held back: counted, logged, a Warning Event, and announced unless the
        hold is the release working as configured."""
        self.metrics.holds.labels(reason=hold.reason).inc()
        if hold.reason == "line-stopped":
            self.announce(target, NotificationKind.LINE_STOPPED, hold.event_reason,
                          hold.message, config_hash)  # fmt: skip
        elif hold.reason not in ROUTINE_HOLDS:
            self.announce(target, NotificationKind.HELD, hold.event_reason, hold.message,
                          config_hash)  # fmt: skip
        retry = f" (next try in {hold.retry_after:.1f} s)" if hold.retry_after else ""
        log.warning(
            "%s: %s%s", target, hold.message, retry,
            extra=target.log_fields("held", reason=hold.reason),
        )  # fmt: skip
        self.post(target, WARNING, hold.event_reason, hold.message)
