"""Why a key is queued and when it is due (model/debounce.py, pure: times passed
in): a change's window, the key's own events, and looks no window holds back."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.debounce import Pending
from kube_nudge.model.pacing import Pacing

AUTO = Pacing(quiet=0.05, cap=2.0)


def test_nothing_queued_is_never_due() -> None:
    assert Pending().ready_at == math.inf


def test_a_change_opens_a_window_and_a_look_is_never_held_back_by_it() -> None:
    pending = Pending()
    pending.change(10.0, Pacing(debounce=2.0))
    assert pending.ready_at == 12.0
    pending.at_most(11.0)  # a retry, a requeue
    assert pending.ready_at == 11.0
    pending.at_most(11.5)  # the earliest look wins
    assert pending.ready_at == 11.0 and pending.window is not None


def test_own_events_open_no_window_and_wait_with_a_change_that_comes() -> None:
    pending = Pending()
    pending.own_event(10.0, 1.0, Pacing(debounce=1.0))
    pending.own_event(10.5, 1.0, Pacing(debounce=1.0))  # the earliest own event wins
    assert pending.window is None and pending.ready_at == 11.0
    pending.change(10.8, Pacing(debounce=1.0))  # the change's whole window, from its own time
    assert pending.ready_at == pytest.approx(11.8)
    assert pending.own == math.inf


def test_a_raised_debounce_counts_from_the_opening_and_a_lowered_one_from_now() -> None:
    raised = Pending()
    raised.change(0.0, Pacing(debounce=2.0))
    raised.own_event(1.0, 2.0, Pacing(debounce=10.0))
    assert raised.ready_at == 10.0
    lowered = Pending()
    lowered.change(0.0, Pacing(debounce=10.0))
    lowered.change(1.0, Pacing(debounce=2.0))
    assert lowered.ready_at == 3.0


times = st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=1, max_size=20).map(sorted)
holds = st.one_of(
    st.builds(Pacing, debounce=st.floats(0.01, 5.0)),
    st.builds(Pacing, quiet=st.floats(0.01, 1.0), cap=st.floats(0.0, 3.0)),
)


@given(opened=st.floats(0.0, 1.0), events=times, hold=holds, delay=st.floats(0.0, 5.0))
def test_own_events_never_move_the_end_of_an_open_window(
    opened: float, events: list[float], hold: Pacing, delay: float
) -> None:
    pending = Pending()
    pending.change(opened, hold)
    end = pending.ready_at
    for at in events:
        pending.own_event(opened + at, delay, hold)
        assert pending.ready_at == end


@given(changes=times, quiet=st.floats(0.01, 1.0), cap=st.floats(0.0, 3.0))
def test_a_quiet_window_ends_a_quiet_window_after_the_last_change_up_to_its_cap(
    changes: list[float], quiet: float, cap: float
) -> None:
    pending = Pending()
    for at in changes:
        pending.change(at, Pacing(quiet=quiet, cap=cap))
    opened, last = changes[0], changes[-1]
    assert pending.ready_at == min(last + quiet, opened + max(cap, quiet))
