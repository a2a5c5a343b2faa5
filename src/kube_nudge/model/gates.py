"""Whether a decided rollout may start now: the release gates (pure, clock as argument).

A change that `decide` would roll can still have to wait, in this order of precedence:

- **line stopped**: the rollout of another workload to the same source change failed
  (`kube-nudge.io/failed`), and nobody released it or changed the source since;
- **window**: `kube-nudge.io/rollout-window` is closed;
- **approval**: `kube-nudge.io/approval: required` and no approval since the change;
- **order**: a workload of a lower `kube-nudge.io/rollout-order` consuming the same
  changed source has not completed yet;
- **turn**: `--max-concurrent-rollouts` rollouts are in progress cluster-wide.

Every input is read from the workloads themselves, so a restart or a new leader holds
exactly what the previous one held.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kube_nudge.model.decide import MIN_RETRY, Hold
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.tracking import Phase, Tracking

__all__ = ["TURN_RETRY", "WINDOW_RECHECK", "Sibling", "Window", "display_workload", "gate"]

TURN_RETRY = 10.0
"""Seconds between looks while waiting for a turn; a rollout ending also wakes waiters."""
WINDOW_RECHECK = 86400.0
"""The longest a workload held by its rollout window waits before it is looked at again
(an internal timer: a window that never opens, or a clock set wrong, is looked at daily).
What the hold shows is the window's real next opening (``Hold.until``), however far."""
_MAX_NAMED = 3


def display_workload(kind: str, namespace: str, name: str) -> str:
    """A workload as ``kube-nudge release`` and ``approve`` take it (``-n NS kind/name``),
    for the messages that tell an operator what to run."""
    return f"-n {namespace} {kind.lower()}/{name}"


class Window(Protocol):
    """A rollout window (`model.windows.RolloutWindow`)."""

    def is_open(self, now: float) -> bool: ...

    def next_open(self, now: float) -> float: ...

    def describe(self) -> str: ...

    def describe_time(self, moment: float) -> str: ...


@dataclass(frozen=True, slots=True)
class Sibling:
    """Another workload consuming a source whose change this one is about to roll."""

    name: str
    """How Events name it: ``Deployment ns/name``."""
    order: int | None
    tracking: Tracking
    pending: bool
    """Its own desired config differs from what it runs: its rollout has not started."""
    released_at: float


def gate(
    view: WorkloadView,
    *,
    now: float,
    changed_at: float | None,
    siblings: Sequence[Sibling] = (),
    window: Window | None = None,
    rolling_elsewhere: int = 0,
    max_concurrent: int | None = None,
    workload_name: str = "-n NAMESPACE KIND/NAME",
) -> Hold | None:
    """The hold that keeps ``view``'s decided rollout from starting at ``now``, or None.

    ``changed_at`` is when the consumed data last changed (approvals before it don't
    count); ``rolling_elsewhere`` counts rollouts in progress on other workloads."""
    stopped = _line_stopped(view, siblings, workload_name)
    if stopped is not None:
        return stopped
    if window is not None and not window.is_open(now):
        return _outside(window, now)
    # Times of data changes have whole seconds (managedFields): an approval counts for
    # changes made before it or in the same second (an operator approving what they just
    # saw held must not be ignored; a change within that second is approved with it).
    if view.settings.approval_required and view.approved_at < (changed_at or 0.0):
        return Hold(
            "approval",
            "AwaitingApproval",
            f"held until approved (kube-nudge.io/approval: required): run `kube-nudge approve "
            f"{workload_name}`, or annotate kube-nudge.io/approved-at with the time in Unix "
            "seconds",
        )
    waiting = _lower_orders(view, siblings)
    if waiting:
        return Hold(
            "order",
            "WaitingForOrder",
            f"held: waiting for {_names(waiting)} (a lower kube-nudge.io/rollout-order) to "
            "complete its rollout of the same change",
        )
    if max_concurrent is not None and rolling_elsewhere >= max_concurrent:
        return Hold(
            "turn",
            "WaitingForTurn",
            f"held: {rolling_elsewhere} rollouts in progress, at most {max_concurrent} at once "
            "(--max-concurrent-rollouts)",
            retry_after=TURN_RETRY,
        )
    return None


def _outside(window: Window, now: float) -> Hold:
    """The hold of a closed window: until its real next opening, however far (the retry
    is capped: ``WINDOW_RECHECK``)."""
    opens = window.next_open(now)
    if not math.isfinite(opens):
        return Hold(
            "window", "OutsideWindow",
            f"held: the rollout window does not open within a year ({window.describe()}; "
            "kube-nudge.io/rollout-window)",
            retry_after=WINDOW_RECHECK,
        )  # fmt: skip
    return Hold(
        "window", "OutsideWindow",
        f"held until the rollout window opens at {window.describe_time(opens)} "
        f"({window.describe()}; kube-nudge.io/rollout-window)",
        retry_after=min(max(opens - now, MIN_RETRY), WINDOW_RECHECK),
        until=opens,
    )  # fmt: skip


def _lower_orders(view: WorkloadView, siblings: Sequence[Sibling]) -> list[str]:
    """The siblings of a lower rollout order still to roll or rolling the same change."""
    order = view.settings.rollout_order
    if order is None:
        return []
    return [
        s.name
        for s in siblings
        if s.order is not None
        and s.order < order
        and (s.pending or s.tracking.phase is Phase.ROLLING)
    ]


def _line_stopped(
    view: WorkloadView, siblings: Sequence[Sibling], workload_name: str
) -> Hold | None:
    for sibling in siblings:
        tracking = sibling.tracking
        if tracking.phase is not Phase.FAILED or sibling.pending:
            continue  # not failed, or its source changed again since: a new change
        failed_at = tracking.failed_at or tracking.deadline_at or 0.0
        if max(sibling.released_at, view.released_at) > failed_at:
            continue  # an operator released the line
        return Hold(
            "line-stopped",
            "LineStopped",
            f"held: the rollout of {sibling.name} to the same change failed "
            f"({tracking.detail or 'failed'}); the line restarts when the source changes "
            f"again or an operator releases it (`kube-nudge release {workload_name}`, or the "
            "failed workload)",
        )
    return None


def _names(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:_MAX_NAMED])
    return shown + (f" and {len(names) - _MAX_NAMED} more" if len(names) > _MAX_NAMED else "")
