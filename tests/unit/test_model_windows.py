"""`kube-nudge.io/rollout-window`: parsing, its error messages, and when a window is open
or next opens, DST included (examples checked against hand-computed UTC instants, and
properties over several time zones)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_nudge.model.windows import MAX_CHARS, RolloutWindow, Span, parse_window

NAME = "kube-nudge.io/rollout-window"
MINUTE = 60.0
DAY = 86400.0


def window(value: str) -> RolloutWindow:
    return parse_window(NAME, value)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    """Unix seconds of a UTC wall time (independent of zoneinfo)."""
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


def test_utc_helper_matches_hand_computed_epochs() -> None:
    assert utc(1970, 1, 1) == 0
    assert utc(2025, 3, 30, 1) == 1_743_296_400  # 20_177 days * 86_400 + 3_600
    assert utc(2025, 10, 26, 1) == 1_761_440_400


# --- parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        ("Mon-Fri 09:00-17:00 Europe/Berlin", "Mon-Fri 09:00-17:00 Europe/Berlin"),
        ("Sat,Sun 02:00-04:00 UTC", "Sat,Sun 02:00-04:00 UTC"),
        ("09:00-17:00 America/New_York", "09:00-17:00 America/New_York"),
        ("Mon-Fri 22:00-02:00 UTC", "Mon-Fri 22:00-02:00 UTC"),
        (
            "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris",
            "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris",
        ),
        ("Mon-Fri 09:00-17:00", "Mon-Fri 09:00-17:00 UTC"),  # no zone: UTC
        ("  mon - FRI   9:00 - 17:30  ", "Mon-Fri 09:00-17:30 UTC"),  # case, spaces, H:MM
        ("Mon 09:00-12:00 ;Thu 14:00-16:00", "Mon 09:00-12:00; Thu 14:00-16:00 UTC"),
        ("Fri-Mon 10:00-11:00", "Fri-Mon 10:00-11:00 UTC"),  # wraps around the week
        ("Sun,Mon,Wed 10:00-11:00", "Mon,Wed,Sun 10:00-11:00 UTC"),
        ("Mon,Tue,Wed,Sat 10:00-11:00", "Mon-Wed,Sat 10:00-11:00 UTC"),
        ("Mon,Wed,Sat-Sun 10:00-11:00", "Wed,Sat-Mon 10:00-11:00 UTC"),
        ("Sat-Sat 10:00-11:00", "Sat 10:00-11:00 UTC"),
        ("Mon-Sun 00:00-24:00", "00:00-24:00 UTC"),  # every day: no days shown
        ("Tue-Mon 00:00-24:00", "00:00-24:00 UTC"),
        ("Mon,Mon 20:00-24:00", "Mon 20:00-24:00 UTC"),
        ("23:59-00:00 Etc/GMT+5", "23:59-00:00 Etc/GMT+5"),
        (
            "00:00-00:01 America/Argentina/Buenos_Aires",
            "00:00-00:01 America/Argentina/Buenos_Aires",
        ),
    ],
)
def test_parse_and_describe(value: str, canonical: str) -> None:
    parsed = window(value)
    assert parsed.describe() == canonical
    assert window(canonical) == parsed


def test_parse_structure() -> None:
    assert window("Fri-Mon 22:00-02:00; 09:00-24:00 Europe/Berlin") == RolloutWindow(
        spans=(
            Span(days=frozenset({4, 5, 6, 0}), start=22 * 60, end=2 * 60),
            Span(days=frozenset(range(7)), start=9 * 60, end=24 * 60),
        ),
        zone="Europe/Berlin",
    )


def test_value_length_is_bounded() -> None:
    value = "09:00-10:00 UTC"
    assert window(value.ljust(MAX_CHARS)).describe() == value
    with pytest.raises(ValueError, match=r"too long \(257 characters, at most 256\)"):
        window(value.ljust(MAX_CHARS + 1))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # unknown time zone
        (
            "Mon-Fri 09:00-17:00 Europe/Berln",
            'unknown time zone "Europe/Berln": want an IANA name such as "Europe/Berlin" or "UTC"',
        ),
        (
            "09:00-10:00 utc",
            'unknown time zone "utc": want an IANA name such as "Europe/Berlin" or "UTC"',
        ),
        (
            "09:00-10:00 Europe",  # a directory of zones, not a zone
            'unknown time zone "Europe": want an IANA name such as "Europe/Berlin" or "UTC"',
        ),
        (
            "09:00-10:00 localtime",  # the host's zone, where it exists
            'unknown time zone "localtime": want an IANA name such as "Europe/Berlin" or "UTC"',
        ),
        (
            "09:00-10:00 ../../etc/passwd",
            'unknown time zone "../../etc/passwd": want an IANA name such as "Europe/Berlin" '
            'or "UTC"',
        ),
        # bad day
        (
            "Mnd-Fri 09:00-17:00",
            'unknown day "Mnd": want Mon, Tue, Wed, Thu, Fri, Sat or Sun, in a range such as '
            '"Mon-Fri" or a list such as "Sat,Sun"',
        ),
        (
            "Monday 09:00-17:00",
            'unknown day "Monday": want Mon, Tue, Wed, Thu, Fri, Sat or Sun, in a range such '
            'as "Mon-Fri" or a list such as "Sat,Sun"',
        ),
        (
            "Mon,,Fri 09:00-17:00",
            'bad days "Mon,,Fri": want day names separated by commas, or ranges such as '
            '"Mon-Fri" or "Fri-Mon"',
        ),
        (
            "Mon-Wed-Fri 09:00-17:00",
            'bad days "Mon-Wed-Fri": want day names separated by commas, or ranges such as '
            '"Mon-Fri" or "Fri-Mon"',
        ),
        # bad time
        (
            "Mon-Fri 9-17",
            'bad time range "9-17": want HH:MM-HH:MM on a 24-hour clock, as in "09:00-17:00" '
            'or "22:00-02:00" (24:00 may end a range)',
        ),
        (
            "24:00-02:00",
            'bad time range "24:00-02:00": want HH:MM-HH:MM on a 24-hour clock, as in '
            '"09:00-17:00" or "22:00-02:00" (24:00 may end a range)',
        ),
        (
            "09:00-24:01",
            'bad time range "09:00-24:01": want HH:MM-HH:MM on a 24-hour clock, as in '
            '"09:00-17:00" or "22:00-02:00" (24:00 may end a range)',
        ),
        (
            "09:60-10:00",
            'bad time range "09:60-10:00": want HH:MM-HH:MM on a 24-hour clock, as in '
            '"09:00-17:00" or "22:00-02:00" (24:00 may end a range)',
        ),
        (
            "Mon-Fri Europe/Berlin 09:00-17:00",
            'bad time range "Europe/Berlin": want HH:MM-HH:MM on a 24-hour clock, as in '
            '"09:00-17:00" or "22:00-02:00" (24:00 may end a range)',
        ),
        (
            "Mon-Fri",
            'missing time range after "Mon-Fri": want HH:MM-HH:MM on a 24-hour clock, as in '
            '"Mon-Fri 09:00-17:00"',
        ),
        (
            "Europe/Berlin",
            'missing time range before the time zone "Europe/Berlin": want days and hours, '
            'then the zone after the last window (no ";"), as in "Mon-Fri 09:00-17:00 '
            'Europe/Berlin"',
        ),
        (
            "Mon 09:00-12:00; UTC",
            'missing time range before the time zone "UTC": want days and hours, then the '
            'zone after the last window (no ";"), as in "Mon-Fri 09:00-17:00 Europe/Berlin"',
        ),
        (
            "Mon 09:00-12:00;",
            'missing window next to ";" in "Mon 09:00-12:00;": want windows separated by ";" '
            'such as "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris"',
        ),
        (
            "  ",
            'empty value "  ": want days, hours and a time zone such as "Mon-Fri 09:00-17:00 '
            'Europe/Berlin"',
        ),
        # empty window
        (
            "Mon 09:00-09:00",
            'empty window "09:00-09:00": the start and the end are the same; want a range '
            'such as "09:00-17:00", or "00:00-24:00" for the whole day',
        ),
        (
            "00:00-00:00 UTC",
            'empty window "00:00-00:00": the start and the end are the same; want a range '
            'such as "09:00-17:00", or "00:00-24:00" for the whole day',
        ),
        # trailing garbage
        (
            "Mon-Fri 09:00-17:00 UTC please",
            'unexpected "please" after the time zone "UTC": the time zone ends the value, as '
            'in "Mon-Fri 09:00-17:00 Europe/Berlin"',
        ),
        (
            "Mon 09:00-12:00 UTC; Thu 14:00-16:00 UTC",
            'unexpected "UTC" after "Mon 09:00-12:00": separate windows with ";" and give one '
            'time zone at the end, as in "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris"',
        ),
    ],
)
def test_error_messages(value: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        window(value)
    assert str(raised.value) == f"{NAME}: {message}"


def test_error_quotes_are_escaped_and_truncated() -> None:
    bad_zone = "Europe/" + "X" * 200
    with pytest.raises(ValueError) as raised:
        window(f"09:00-10:00 {bad_zone}")
    assert f'unknown time zone "{bad_zone[:100]}...": want' in str(raised.value)
    with pytest.raises(ValueError) as raised:
        window('09:00-10:00 "UTC"')  # quoted twice in YAML
    assert str(raised.value).startswith(f'{NAME}: unknown time zone "\\"UTC\\"": want')
    with pytest.raises(ValueError) as raised:
        window("09:00-10:00 UTC\nextra")
    assert "\n" not in str(raised.value)


def test_span_checks_its_fields() -> None:
    with pytest.raises(ValueError, match="empty"):
        Span(days=frozenset({0}), start=60, end=60)
    with pytest.raises(ValueError, match="out of range"):
        Span(days=frozenset({0}), start=1440, end=60)
    with pytest.raises(ValueError, match="subset"):
        Span(days=frozenset({7}), start=0, end=60)
    with pytest.raises(ValueError, match="subset"):
        Span(days=frozenset(), start=0, end=60)


# --- open and next open ------------------------------------------------------------------

BERLIN_WORKDAYS = "Mon-Fri 09:00-17:00 Europe/Berlin"


@pytest.mark.parametrize(
    ("value", "now", "is_open"),
    [
        # Wed 2025-01-15, CET (UTC+1)
        (BERLIN_WORKDAYS, utc(2025, 1, 15, 8), True),  # 09:00 CET: the start is in
        (BERLIN_WORKDAYS, utc(2025, 1, 15, 7, 59, 59), False),
        (BERLIN_WORKDAYS, utc(2025, 1, 15, 15, 59, 59), True),
        (BERLIN_WORKDAYS, utc(2025, 1, 15, 16), False),  # 17:00 CET: the end is out
        (BERLIN_WORKDAYS, utc(2025, 1, 18, 10), False),  # Saturday
        # Wed 2025-07-16, CEST (UTC+2)
        (BERLIN_WORKDAYS, utc(2025, 7, 16, 7), True),
        (BERLIN_WORKDAYS, utc(2025, 7, 16, 6, 59), False),
        (BERLIN_WORKDAYS, utc(2025, 7, 16, 15), False),
        # crossing midnight: belongs to the day it starts
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 17, 23), True),  # Fri 23:00
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 18, 1, 59), True),  # Sat 01:59: Friday's
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 18, 2), False),
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 18, 22), False),  # Sat 22:00
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 20, 1), False),  # Mon 01:00: Sunday's
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 20, 22), True),
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 14, 0, 30), True),  # Tue 00:30: Monday's
        # wrapping day range: Fri, Sat, Sun, Mon
        ("Fri-Mon 10:00-11:00 UTC", utc(2025, 1, 19, 10, 30), True),  # Sunday
        ("Fri-Mon 10:00-11:00 UTC", utc(2025, 1, 20, 10, 30), True),  # Monday
        ("Fri-Mon 10:00-11:00 UTC", utc(2025, 1, 21, 10, 30), False),  # Tuesday
        ("Fri-Mon 10:00-11:00 UTC", utc(2025, 1, 16, 10, 30), False),  # Thursday
        # 24:00 ends the day
        ("Sun 20:00-24:00 UTC", utc(2025, 1, 19, 23, 59, 59), True),
        ("Sun 20:00-24:00 UTC", utc(2025, 1, 20), False),
        # every day, New York (EST, UTC-5)
        ("09:00-17:00 America/New_York", utc(2025, 1, 18, 14), True),  # Sat 09:00 EST
        ("09:00-17:00 America/New_York", utc(2025, 1, 18, 13, 59), False),
    ],
)
def test_is_open(value: str, now: float, is_open: bool) -> None:
    assert window(value).is_open(now) is is_open


@pytest.mark.parametrize(
    ("value", "now", "opens"),
    [
        # Fri 17:00 CET -> Mon 09:00 CET
        (BERLIN_WORKDAYS, utc(2025, 1, 17, 16), utc(2025, 1, 20, 8)),
        # Sat 02:00, after Friday's night window -> Mon 22:00
        ("Mon-Fri 22:00-02:00 UTC", utc(2025, 1, 18, 2), utc(2025, 1, 20, 22)),
        # Tue noon -> Fri 10:00
        ("Fri-Mon 10:00-11:00 UTC", utc(2025, 1, 14, 12), utc(2025, 1, 17, 10)),
        # Mon 12:00 CET, after the first window -> Thu 14:00 CET
        (
            "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris",
            utc(2025, 1, 13, 11),
            utc(2025, 1, 16, 13),
        ),
        # Thu 16:00 CET -> next Mon 09:00 CET
        (
            "Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris",
            utc(2025, 1, 16, 15),
            utc(2025, 1, 20, 8),
        ),
        # a second before the start
        (BERLIN_WORKDAYS, utc(2025, 1, 15, 7, 59, 59), utc(2025, 1, 15, 8)),
        # from Sunday into Monday's 00:00
        ("Mon 00:00-01:00 UTC", utc(2025, 1, 19, 12), utc(2025, 1, 20)),
    ],
)
def test_next_open(value: str, now: float, opens: float) -> None:
    assert window(value).next_open(now) == opens


def test_a_float_just_before_the_start_is_not_rounded_into_the_window() -> None:
    w = window("Mon 00:00-00:01 UTC")
    start = utc(2032, 1, 5)  # a Monday
    just_before = start - 2.5e-7  # fromtimestamp would round it up to the start
    assert just_before < start
    assert not w.is_open(just_before)
    assert w.next_open(just_before) == start
    assert w.is_open(start + 59.999)
    assert not w.is_open(start + 60)


def test_next_open_is_now_while_open() -> None:
    now = utc(2025, 1, 15, 12) + 0.25
    assert window(BERLIN_WORKDAYS).next_open(now) == now


def test_a_far_opening_is_found_and_shown_on_the_windows_clock() -> None:
    """A window three days away (or six) opens when it opens: nothing caps
    the search at a day. The time is shown in the window's zone, and in UTC beside it."""
    friday = utc(2025, 1, 17, 18)  # Fri 19:00 in Berlin, after the workday
    opens = window(BERLIN_WORKDAYS).next_open(friday)
    assert opens == utc(2025, 1, 20, 8)  # Mon 09:00 CET
    assert window(BERLIN_WORKDAYS).describe_time(opens) == (
        "Mon 2025-01-20 09:00 Europe/Berlin (2025-01-20 08:00 UTC)"
    )
    sunday = window("Sun 02:00-04:00 UTC")
    assert sunday.next_open(utc(2025, 1, 13, 12)) == utc(2025, 1, 19, 2)  # six days
    assert sunday.describe_time(utc(2025, 1, 19, 2)) == "Sun 2025-01-19 02:00 UTC"


# DST. Europe/Berlin: 2025-03-30 at 01:00 UTC, 02:00 CET jumps to 03:00 CEST; 2025-10-26
# at 01:00 UTC, 03:00 CEST falls back to 02:00 CET. America/New_York: 2025-03-09 at 07:00
# UTC, 02:00 EST jumps to 03:00 EDT; 2025-11-02 at 06:00 UTC, 02:00 EDT falls back to 01:00
# EST.
BERLIN_SPRING = 1_743_296_400.0  # 2025-03-30T01:00:00Z
BERLIN_FALL = 1_761_440_400.0  # 2025-10-26T01:00:00Z
NEW_YORK_SPRING = 1_741_503_600.0  # 2025-03-09T07:00:00Z
NEW_YORK_FALL = 1_762_063_200.0  # 2025-11-02T06:00:00Z


def test_dst_instants_are_the_transitions() -> None:
    for zone, moment in [
        ("Europe/Berlin", BERLIN_SPRING),
        ("Europe/Berlin", BERLIN_FALL),
        ("America/New_York", NEW_YORK_SPRING),
        ("America/New_York", NEW_YORK_FALL),
    ]:
        before = datetime.fromtimestamp(moment - 1, ZoneInfo(zone)).utcoffset()
        assert datetime.fromtimestamp(moment, ZoneInfo(zone)).utcoffset() != before


def test_spring_forward_start_in_skipped_hour_opens_at_the_jump() -> None:
    # 02:30 does not exist on 2025-03-30 in Berlin: the window opens when the clock jumps
    # to 03:00 CEST (01:00 UTC), the first instant the clock shows a time inside it.
    w = window("02:30-04:00 Europe/Berlin")
    assert w.next_open(utc(2025, 3, 29, 23)) == BERLIN_SPRING == utc(2025, 3, 30, 1)
    assert not w.is_open(BERLIN_SPRING - 1)  # 01:59:59 CET
    assert w.is_open(BERLIN_SPRING)
    assert w.is_open(utc(2025, 3, 30, 1, 59))  # 03:59 CEST
    assert not w.is_open(utc(2025, 3, 30, 2))  # 04:00 CEST
    # The next day, 02:30 CEST is 00:30 UTC again.
    assert w.next_open(utc(2025, 3, 30, 2)) == utc(2025, 3, 31, 0, 30)
    # New York: 03:00 EDT is 07:00 UTC.
    w = window("02:30-04:00 America/New_York")
    assert w.next_open(utc(2025, 3, 9, 5)) == NEW_YORK_SPRING == utc(2025, 3, 9, 7)


def test_spring_forward_window_wholly_in_skipped_hour_waits_for_the_next() -> None:
    w = window("02:00-03:00 Europe/Berlin")
    assert w.next_open(utc(2025, 3, 29, 23)) == utc(2025, 3, 31, 0)  # Mon 02:00 CEST
    # A weekly window waits a week: Sunday 2025-03-16 02:00 EDT.
    w = window("Sun 02:00-03:00 America/New_York")
    assert w.next_open(utc(2025, 3, 9, 5)) == utc(2025, 3, 16, 6)


def test_spring_forward_window_ending_in_skipped_hour_closes_at_the_jump() -> None:
    w = window("01:30-02:30 Europe/Berlin")
    assert w.is_open(utc(2025, 3, 30, 0, 30))  # 01:30 CET
    assert w.is_open(BERLIN_SPRING - 1)  # 01:59:59 CET
    assert not w.is_open(BERLIN_SPRING)  # 03:00 CEST
    assert w.next_open(BERLIN_SPRING) == utc(2025, 3, 30, 23, 30)  # Mon 01:30 CEST


def test_fall_back_window_in_repeated_hour_opens_in_both_passes() -> None:
    w = window("02:00-02:30 Europe/Berlin")
    assert w.next_open(utc(2025, 10, 25, 23)) == utc(2025, 10, 26, 0)  # 02:00 CEST
    assert w.is_open(utc(2025, 10, 26, 0, 29))
    assert not w.is_open(utc(2025, 10, 26, 0, 30))  # 02:30 CEST
    assert w.next_open(utc(2025, 10, 26, 0, 30)) == BERLIN_FALL  # 02:00 CET
    assert w.is_open(utc(2025, 10, 26, 1, 29))
    assert w.next_open(utc(2025, 10, 26, 1, 30)) == utc(2025, 10, 27, 1)  # Mon 02:00 CET
    # New York: Sunday 01:15-01:45 runs at 05:15 UTC (EDT), then 06:15 UTC (EST).
    w = window("Sun 01:15-01:45 America/New_York")
    assert w.next_open(utc(2025, 11, 2, 4)) == utc(2025, 11, 2, 5, 15)
    assert w.next_open(utc(2025, 11, 2, 5, 45)) == utc(2025, 11, 2, 6, 15)
    assert w.is_open(utc(2025, 11, 2, 6, 44))
    assert w.next_open(utc(2025, 11, 2, 6, 45)) == utc(2025, 11, 9, 6, 15)


def test_fall_back_clock_jumping_back_into_a_window_reopens_it() -> None:
    # 01:00-02:30 Berlin: open 01:00-02:30 CEST (23:00-00:30 UTC), then the clock falls
    # back from 03:00 CEST to 02:00 CET, inside the window again, until 02:30 CET.
    w = window("01:00-02:30 Europe/Berlin")
    assert not w.is_open(utc(2025, 10, 26, 0, 45))  # 02:45 CEST
    assert w.next_open(utc(2025, 10, 26, 0, 45)) == BERLIN_FALL
    assert not w.is_open(utc(2025, 10, 26, 1, 30))  # 02:30 CET
    # New York: 00:30-01:30 EDT (04:30-05:30 UTC), closed 01:30-02:00 EDT, and the clock
    # falls back to 01:00 EST at 06:00 UTC: open again until 01:30 EST (06:30 UTC).
    w = window("00:30-01:30 America/New_York")
    assert w.next_open(utc(2025, 11, 2, 5, 30)) == NEW_YORK_FALL
    assert w.next_open(utc(2025, 11, 2, 6, 30)) == utc(2025, 11, 3, 5, 30)  # 00:30 EST


# --- properties --------------------------------------------------------------------------

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # 30-minute DST
    "America/Sao_Paulo",  # DST began at midnight (until 2019)
    "America/Santiago",  # transitions at 24:00
    "Pacific/Apia",  # skipped 2011-12-30 entirely
    "Asia/Kathmandu",  # UTC+05:45
]
FIRST, LAST = utc(2008, 1, 1), utc(2032, 1, 1)


@functools.cache
def transitions() -> tuple[float, ...]:
    """Every UTC-offset change of ZONES between FIRST and LAST (to the second)."""
    found = []
    for zone in ZONES:
        tz = ZoneInfo(zone)

        def offset(moment: float, tz: ZoneInfo = tz) -> object:
            return datetime.fromtimestamp(moment, tz).utcoffset()

        moment = FIRST
        while moment < LAST:
            if offset(moment) != offset(moment + DAY):
                low, high = int(moment), int(moment + DAY)
                while high - low > 1:
                    middle = (low + high) // 2
                    low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
                found.append(float(high))
            moment += DAY
    return tuple(found)


spans = st.builds(
    lambda days, start, length: Span(days=days, start=start, end=(start + length) % 1440 or 1440),
    st.frozensets(st.integers(0, 6), min_size=1),
    st.integers(0, 1439),
    st.integers(1, 1439),
)
windows = st.builds(
    RolloutWindow,
    spans=st.lists(spans, min_size=1, max_size=3).map(tuple),
    zone=st.sampled_from(ZONES),
)
instants = st.one_of(
    st.floats(min_value=FIRST, max_value=LAST),
    st.builds(
        lambda moment, shift: moment + shift,
        st.deferred(lambda: st.sampled_from(transitions())),
        st.floats(min_value=-2 * DAY, max_value=2 * DAY),
    ),
)
PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(windows)
def test_describe_parses_back(w: RolloutWindow) -> None:
    assert window(w.describe()) == w


@PROPS
@given(windows, instants)
def test_next_open_is_open_and_not_before_now(w: RolloutWindow, now: float) -> None:
    opens = w.next_open(now)
    assert opens >= now
    assert w.is_open(opens)
    assert (opens == now) is w.is_open(now)
    assert opens - now < 15 * DAY


@settings(PROPS, max_examples=75)
@given(windows, instants)
def test_nothing_opens_before_next_open(w: RolloutWindow, now: float) -> None:
    opens = w.next_open(now)
    if opens == now:
        return
    moment = now + MINUTE
    while moment < opens:  # every window is open for a minute at least
        assert not w.is_open(moment), (w.describe(), now, moment, opens)
        moment += MINUTE
    assert opens - 0.5 <= now or not w.is_open(opens - 0.5)


@PROPS
@given(
    st.one_of(
        st.text(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    "Mon", "fri", "Sun", "-", ",", ";", " ", "09:00", "24:00", "9:5", "00:00",
                    "22:00-02:00", "UTC", "Europe/Berlin", "Europe", "x", ":", "\n", "é",
                ]
            ),
            max_size=30,
        ).map("".join),
    )
)  # fmt: skip
def test_parse_raises_only_one_line_value_errors(value: str) -> None:
    try:
        parsed = window(value)
    except ValueError as exc:
        message = str(exc)
        assert message.startswith(f"{NAME}: ")
        assert "\n" not in message
        assert len(message) < 500
    else:
        assert window(parsed.describe()) == parsed
