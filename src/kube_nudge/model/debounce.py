"""Why a key is queued on the work queue, and so when it is due: the debounce windows, as
data (pure: no clock, no event loop; the queue's delaying layer, runtime/queue/delaying.py,
passes the time in).

A key is due at the earliest of its reasons:

- a change (``Pending.change``, the work queue's ``add(key, hold)``): opens a window, or
  joins the one already open, so changes arriving inside it coalesce into one reconcile.
  The window ends (``Pacing.end``) when the fixed part (``hold.debounce`` from when it
  opened) is over and, with a quiet window (``hold.quiet``, ``debounce: auto``), once no
  change has arrived for that long, but never later than ``hold.cap`` after it opened. A
  longer debounce asked while the window is open (the workload's debounce was raised) makes
  it longer, counted from when it opened; a shorter one (lowered) can end it sooner,
  ``debounce`` from now.
- an event of the key's own (``Pending.own_event``, ``add_own``: a workload's status
  update, an edit of its other fields): due after its delay, but it opens no window. A
  change that comes while only such events wait gets its own whole window, from its own
  time; the events wait with it (at most one window longer). While a window is open they
  join it without extending, shortening or restarting it.
- an immediate look, a retry or a requeue (``Pending.at_most``): at its own time, never held
  back by a window.
- a watch (``Pending.watch_until``, the work queue's ``watch_after``): a look the key gets
  only if nothing brings it sooner (the deadline of a rollout in progress). Due like a
  requeue, but it is no work to wait for (``Pending.work``) until it is due.

The windows are the model's, not the queue's: the queue only keeps one ``Pending`` per key
and hands the key on at ``ready_at``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kube_nudge.model.pacing import Pacing

__all__ = ["Pending", "Window"]


@dataclass(slots=True)
class Window:
    """A window a change opened: its fixed part, its latest change and its hold."""

    opened: float
    fixed: tuple[float, float]
    """(start, length) of the fixed part (the debounce)."""
    last: float
    hold: Pacing

    @property
    def end(self) -> float:
        """When the window ends (monotonic seconds)."""
        return self.hold.end(self.opened, self.fixed[0] + self.fixed[1], self.last)

    def join(self, now: float, hold: Pacing, *, change: bool) -> None:
        """Another change (``change``) or an own event of the key arrived at ``now``."""
        self.fixed = _join(self.fixed, (now, hold.debounce))
        if change:
            self.last = now
        # No quiet window once the debounce is a duration; else the slowest writer seen in
        # the window sets it (an own event brings no writer of its own).
        quiet = 0.0
        if hold.quiet > 0:
            quiet = max(hold.quiet, self.hold.quiet) if change else self.hold.quiet
        self.hold = Pacing(hold.debounce, quiet, hold.cap)


@dataclass(slots=True)
class Pending:
    """Why a key is queued: it is due at the earliest of ``at``, ``watch`` and either the end
    of its window or, with no window open, ``own``."""

    at: float = math.inf
    """Immediate looks and retries: never held back."""
    watch: float = math.inf
    """A look only if nothing comes sooner: never held back, and no work meanwhile."""
    window: Window | None = None
    """The window a change opened."""
    own: float = math.inf
    """The key's own events, while no window is open."""

    @property
    def work(self) -> bool:
        """Whether the key is queued for anything but a watch (work a caller may wait for)."""
        return self.window is not None or self.at < math.inf or self.own < math.inf

    @property
    def ready_at(self) -> float:
        """When the key is due (monotonic seconds)."""
        if self.window is not None:
            return min(self.at, self.watch, self.window.end)
        return min(self.at, self.watch, self.own)

    def at_most(self, at: float) -> None:
        """Due by ``at`` whatever else holds the key (a look, a retry, a requeue)."""
        self.at = min(self.at, at)

    def watch_until(self, at: float) -> None:
        """Due by ``at`` unless something brings the key sooner (a watch)."""
        self.watch = min(self.watch, at)

    def change(self, now: float, hold: Pacing) -> None:
        """A change: open a window, or join (and maybe resize) the open one; the key's own
        events waiting without a window now wait for it."""
        if self.window is None:
            self.window = Window(now, (now, hold.debounce), now, hold)
        else:
            self.window.join(now, hold, change=True)
        self.own = math.inf

    def own_event(self, now: float, delay: float, hold: Pacing) -> None:
        """An event of the key's own: due ``delay`` after ``now`` unless a window is open,
        which it joins (``hold`` may resize its fixed part)."""
        if self.window is None:
            self.own = min(self.own, now + delay)
        else:
            self.window.join(now, hold, change=False)


def _join(window: tuple[float, float], new: tuple[float, float]) -> tuple[float, float]:
    """The fixed part after ``new`` (asked at its time, with its length) while ``window`` is
    open: a longer length lengthens it from its start; else the earlier end wins."""
    opened, length = window
    if new[1] > length:
        return opened, new[1]
    return new if new[0] + new[1] < opened + length else window
