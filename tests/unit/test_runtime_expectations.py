"""Our own writes the caches have not shown yet: a pass reading them earlier waits, the
echo wakes it, and a write whose echo never comes holds nothing back past the TTL."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.runtime.expectations import EXPECTATION_TTL, WriteExpectations
from tests.unit.fakes import FakeClock


def written(version: str) -> dict[str, object]:
    return {"metadata": {"resourceVersion": version}}


def test_a_pass_over_an_older_view_waits_and_the_echo_wakes_it() -> None:
    clock = FakeClock(0.0)
    expectations: WriteExpectations[str] = WriteExpectations(clock)
    expectations.wrote("web", written("105"))
    assert expectations.lagging("web", 104) == EXPECTATION_TTL
    clock.advance(2)
    assert expectations.lagging("web", 104) == EXPECTATION_TTL - 2
    assert not expectations.observed("web", 104)  # an older event: still waiting
    assert expectations.observed("web", 105)  # the echo: the held-back pass looks again
    assert expectations.lagging("web", 105) is None
    assert len(expectations) == 0


def test_the_echo_of_a_write_no_pass_waited_for_wakes_nothing() -> None:
    expectations: WriteExpectations[str] = WriteExpectations(FakeClock(0.0))
    expectations.wrote("web", written("7"))
    assert not expectations.observed("web", 8)  # a later version covers the write too
    assert expectations.lagging("web", 7) is None


def test_an_echo_that_never_comes_holds_back_no_longer_than_the_ttl() -> None:
    clock = FakeClock(0.0)
    expectations: WriteExpectations[str] = WriteExpectations(clock, ttl=5.0)
    expectations.wrote("web", written("9"))
    clock.advance(5.0)
    assert expectations.lagging("web", 8) is None
    assert len(expectations) == 0


def test_writes_without_an_integer_version_or_of_deleted_objects_set_nothing() -> None:
    expectations: WriteExpectations[str] = WriteExpectations(FakeClock(0.0))
    expectations.wrote("web", {})
    expectations.wrote("web", written("abc"))
    assert expectations.lagging("web", 0) is None
    expectations.wrote("api", written("3"))
    expectations.forget("api")
    assert expectations.lagging("api", 1) is None


def test_a_later_write_raises_the_expectation_and_keeps_the_waiting_pass() -> None:
    expectations: WriteExpectations[str] = WriteExpectations(FakeClock(0.0))
    expectations.wrote("web", written("10"))
    assert expectations.lagging("web", 9) is not None
    expectations.wrote("web", written("12"))
    expectations.wrote("web", written("11"))  # an older response arriving late
    assert not expectations.observed("web", 10)
    assert expectations.lagging("web", 11) is not None
    assert expectations.observed("web", 12)


@given(
    writes=st.lists(st.integers(1, 1_000), min_size=1, max_size=8),
    seen=st.integers(0, 1_100),
)
def test_a_view_lags_exactly_while_it_is_older_than_the_newest_write(
    writes: list[int], seen: int
) -> None:
    expectations: WriteExpectations[str] = WriteExpectations(FakeClock(0.0))
    for version in writes:
        expectations.wrote("web", written(str(version)))
    assert (expectations.lagging("web", seen) is not None) == (seen < max(writes))
