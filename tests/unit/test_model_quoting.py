"""How bad input is quoted in messages: escaped, and bounded after escaping."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.quoting import SHOWN_CHARS, show


def test_short_values_are_quoted_whole() -> None:
    assert show('ab"c') == '"ab\\"c"'
    assert show(5) == '"5"'


def test_long_values_are_cut_with_an_ellipsis() -> None:
    assert show("x" * 200) == '"' + "x" * SHOWN_CHARS + '..."'


def test_control_characters_count_as_escaped() -> None:
    """200 ESCs escape to 1,200 characters; the message still gets about 100."""
    shown = show("\x1b" * 200)
    assert shown.startswith('"\\u001b')
    assert len(shown) <= SHOWN_CHARS + 5


@given(st.text())
def test_shown_text_is_one_bounded_line(value: str) -> None:
    shown = show(value)
    assert len(shown) <= SHOWN_CHARS + 5
    assert "\n" not in shown
