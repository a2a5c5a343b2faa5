"""The hold of a change: the debounce's ``auto`` quiet window and its writers (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.pacing import (
    AUTO_CAP,
    DEFAULT_QUIET_WINDOW,
    OWN_EVENT_DELAY,
    Pacing,
    hold_for_change,
    hold_for_own_event,
    quiet_window_for,
)


def test_auto_holds_for_the_quiet_window_of_the_slowest_writer() -> None:
    assert hold_for_change(None) == Pacing(quiet=DEFAULT_QUIET_WINDOW, cap=AUTO_CAP)
    assert hold_for_change(None, ("kubectl-edit",)) == Pacing(quiet=0.05, cap=2.0)
    assert hold_for_change(None, ("helm",)) == Pacing(quiet=0.5, cap=2.0)
    assert hold_for_change(None, ("kubectl-client-side-apply",)) == Pacing(quiet=1.5, cap=2.0)
    assert hold_for_change(None, ("helm", "kubectl-replace")) == Pacing(quiet=1.0, cap=2.0)
    assert hold_for_change(None, ("kubectl-edit",), quiet_window=0.1) == Pacing(quiet=0.1, cap=2.0)


def test_a_duration_is_a_fixed_window_and_zero_looks_at_once() -> None:
    assert hold_for_change(2.0, ("kubectl-client-side-apply",)) == Pacing(debounce=2.0)
    assert hold_for_change(0.0).immediate
    assert hold_for_change(None, ("kubectl-client-side-apply",), quiet_window=0).immediate


def test_own_events_wait_the_own_delay_or_the_debounce() -> None:
    assert hold_for_own_event(None) == OWN_EVENT_DELAY
    assert hold_for_own_event(3.0) == 3.0


def test_a_slow_writer_never_gets_a_shorter_window_than_the_default() -> None:
    assert quiet_window_for(("helm",), default=1.0) == 1.0


@given(
    opened=st.floats(0, 1e6),
    gaps=st.lists(st.floats(0, 5), max_size=20),
    quiet=st.floats(0.001, 1),
    cap=st.floats(0, 10),
)
def test_a_quiet_window_ends_after_its_last_change_and_by_its_cap(
    opened: float, gaps: list[float], quiet: float, cap: float
) -> None:
    hold = Pacing(quiet=quiet, cap=cap)
    last = opened + sum(gaps)
    end = hold.end(opened, opened, last)
    assert end <= opened + max(cap, quiet) + 1e-9
    assert end == pytest.approx(min(last + quiet, opened + max(cap, quiet)))
