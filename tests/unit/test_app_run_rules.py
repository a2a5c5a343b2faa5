"""`kube-nudge run --debounce` and `--max-rollouts` take the annotations' rules: one parser
of each (`debounce_seconds`, `rollout_cap` in model/annotation_values.py), worded by the flag.
Whatever the annotation accepts the flag accepts with the same value, and the reverse."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kube_nudge.app.run_command import _debounce, parse_max_rollouts
from kube_nudge.model import parse_workload
from kube_nudge.model.annotations import DEBOUNCE, MAX_ROLLOUTS, WorkloadDefaults

NS = "shop"
_UNITS = st.sampled_from(["ms", "s", "m", "h", "x", ""])
_DURATIONS = st.one_of(
    st.builds("{}{}".format, st.integers(-5, 100_000), _UNITS),
    st.text(alphabet="0123456789.+-smhu", max_size=8),
)
_CAPS = st.one_of(
    # A count with leading zeros, in range or not, and a window in range or not.
    st.builds("{}{}/{}".format, st.text("0", max_size=14), st.integers(0, 2000), _DURATIONS),
    st.text(alphabet="0123456789/smh.+- ", max_size=20),
)


REFUSED = "refused"


def _annotation(name: str, value: str) -> object:
    """The setting the annotation gives, or REFUSED."""
    settings, errors = parse_workload({name: value}, NS, WorkloadDefaults())
    if errors:
        return REFUSED
    if name == MAX_ROLLOUTS:
        return (settings.max_rollouts, settings.rollout_window)
    return settings.debounce


def _flag(parse: Callable[[str], object], value: str) -> object:
    """The value the flag gives, or REFUSED."""
    try:
        return parse(value)
    except ValueError:
        return REFUSED


# A count of more than 10 digits: the flag took it, the annotation refused it.
@example("00000000003/5m")
@example("00000000000000000001/1s")
@given(value=_CAPS)
def test_max_rollouts_flag_and_annotation_agree(value: str) -> None:
    value = value.strip()  # the annotation's value comes stripped; the flag's as typed
    assert _flag(parse_max_rollouts, value) == _annotation(MAX_ROLLOUTS, value)


@example("auto")
@example("3600s")
@given(value=st.one_of(_DURATIONS, st.sampled_from(["Auto", "auto2", "1h0m0.001s", "-0"])))
def test_debounce_flag_and_annotation_agree(value: str) -> None:
    value = value.strip()  # the annotation's value comes stripped; the flag's as typed
    assert _flag(_debounce, value) == _annotation(DEBOUNCE, value)


@pytest.mark.parametrize(
    ("parse", "value", "says"),
    [
        (parse_max_rollouts, "3", "--max-rollouts '3': want N/DURATION, e.g. 3/5m"),
        (parse_max_rollouts, "٣/5m", "--max-rollouts '٣/5m': want N/DURATION, e.g. 3/5m"),
        (parse_max_rollouts, "1001/5m", "--max-rollouts '1001/5m': N must be from 1 to 1000"),
        (parse_max_rollouts, "9" * 5000 + "/5m", "N must be from 1 to 1000, e.g. 3/5m"),
        (parse_max_rollouts, "3/soon", "--max-rollouts '3/soon': the window: invalid duration"),
        (parse_max_rollouts, "3/25h", "'3/25h': the window must be from 1s to 24h, e.g. 3/5m"),
        (_debounce, "soon", '--debounce: invalid duration "soon"'),
        (_debounce, "-1s", "--debounce '-1s': want a duration from 0ms to 1h"),
        (_debounce, " auto", '--debounce: invalid duration " auto"'),
    ],
)
def test_a_refusal_says_which_part_is_wrong(
    parse: Callable[[str], object], value: str, says: str
) -> None:
    with pytest.raises(ValueError, match=r"\A") as refused:
        parse(value)
    assert says in str(refused.value)
