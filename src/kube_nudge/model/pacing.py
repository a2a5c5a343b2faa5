"""How long a change is held before its workload is looked at: the debounce, as data.

By default (``debounce: auto``) a change waits for a short *quiet window*: it is looked at
once no further change to the same workload's sources has arrived for that long, and never
later than ``AUTO_CAP`` after the first one. So a single edit rolls within about the quiet
window, while the writes of one ``helm upgrade`` or ``kubectl apply -f`` of several
documents, which arrive one after another, coalesce into one rollout.

The quiet window depends on who wrote the change (the field manager of the latest data
write, from ``managedFields``): tools that write several objects one by one leave a gap
between two objects' writes. Each window is three times the largest gap its writer leaves
against an API server ``ASSUMED_RTT`` away: the gap measured on the local development
cluster (bench scenario ``writers``, in the committed bench/results/latest.json), plus one
round trip per request the writer makes for each object, rounded up to half a second
(tests/unit/test_pacing_windows.py derives them from that file):

- ``helm`` upgrade sends one request per object back to back: one round trip and helm's
  local gap.
- Client-side ``kubectl apply`` (``kubectl-client-side-apply``) reads each object, computes
  a three-way patch, then patches it: two round trips per object.
- ``kubectl apply --server-side`` (manager ``kubectl``), ``kubectl replace`` and
  ``kubectl create`` (``kubectl-replace``, ``kubectl-create``): one request per object,
  and the client-side apply's local gap as theirs (the same kubectl process between
  objects; the committed run doesn't measure them).

Any other writer (``kubectl edit`` or ``patch``, a controller, a script) gets the default,
``DEFAULT_QUIET_WINDOW``: one edit rolls at once, and ``--quiet-window`` raises it.

An explicit ``debounce`` of a duration keeps its old meaning: a fixed window from the first
change (raised debounces, a long window for anyone who wants one); ``0`` looks at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ASSUMED_RTT",
    "AUTO_CAP",
    "DEFAULT_QUIET_WINDOW",
    "OWN_EVENT_DELAY",
    "WRITER_QUIET_WINDOWS",
    "Pacing",
    "hold_for_change",
    "hold_for_own_event",
    "quiet_window_for",
]

DEFAULT_QUIET_WINDOW: Final = 0.05
"""Seconds without a further change before a change is looked at (``--quiet-window``)."""
AUTO_CAP: Final = 2.0
"""A stream of changes that never goes quiet is looked at this long after its first change
(the fixed window kube-nudge had by default before: never later than it was)."""
OWN_EVENT_DELAY: Final = 1.0
"""With ``debounce: auto``, a workload's own events (its status updates during a rollout,
edits of its other fields) are looked at this long after they arrive: promptness buys
nothing there, and a rollout's many status updates coalesce into a few looks."""
ASSUMED_RTT: Final = 0.1
"""The round trip to the API server the per-writer windows are sized for (seconds): a
managed control plane in another zone or region than the runner that applies."""
WRITER_QUIET_WINDOWS: Final[tuple[tuple[str, float], ...]] = (
    ("helm", 0.5),
    ("kubectl-client-side-apply", 1.5),
    ("kubectl", 1.0),
    ("kubectl-replace", 1.0),
    ("kubectl-create", 1.0),
    # Not measured: the Secrets Store CSI driver's rotation writes a pod's status, then the
    # Secrets its class syncs (secretObjects), one pass apart; one change, one rollout. Its
    # field manager is its user agent's first part (v1.6.0 on the real node).
    ("csi-secrets-store", 1.0),
)
"""Field managers known to pace their writes more slowly than the default quiet window
allows, and their windows (how they are sized: the module's docstring)."""


@dataclass(frozen=True, slots=True)
class Pacing:
    """How long a change waits (its debounce; not ``model.decide.Hold``, a decision to hold
    a workload): at least ``debounce`` after the first change of its window, and
    (``quiet`` > 0) until ``quiet`` seconds pass without another, but no longer than ``cap``
    after the first. ``Pacing()`` looks at once."""

    debounce: float = 0.0
    quiet: float = 0.0
    cap: float = 0.0

    @property
    def immediate(self) -> bool:
        """True when nothing holds the change back."""
        return self.debounce <= 0 and self.quiet <= 0

    def end(self, opened: float, fixed_end: float, last: float) -> float:
        """When a window opened at ``opened``, whose fixed part ends at ``fixed_end`` and
        whose latest change came at ``last``, ends under this hold."""
        if self.quiet <= 0:
            return fixed_end
        return max(fixed_end, min(last + self.quiet, opened + max(self.cap, self.quiet)))


def quiet_window_for(writers: Iterable[str], default: float = DEFAULT_QUIET_WINDOW) -> float:
    """The quiet window for a change written by ``writers`` (the field managers of its latest
    data write; several when they share its second): the longest that applies, never
    shorter than ``default``."""
    windows = dict(WRITER_QUIET_WINDOWS)
    return max([default, *(windows.get(writer, default) for writer in writers)])


def hold_for_change(
    debounce: float | None, writers: Iterable[str] = (), quiet_window: float = DEFAULT_QUIET_WINDOW
) -> Pacing:
    """The pacing of a source change for a workload whose debounce is ``debounce`` (None:
    ``auto``)."""
    if debounce is not None:
        return Pacing(debounce=debounce)
    quiet = quiet_window_for(writers, quiet_window) if quiet_window > 0 else 0.0
    return Pacing(quiet=quiet, cap=AUTO_CAP) if quiet > 0 else Pacing()


def hold_for_own_event(debounce: float | None) -> float:
    """Seconds after which a workload's own event is looked at."""
    return OWN_EVENT_DELAY if debounce is None else debounce
