"""`kube-nudge.io/rollout-window`: when a workload's config rollout may start (pure, the
clock is an argument; only the time zone database is read).

The value is one or more windows separated by `;`, then optionally one IANA time zone for
all of them (UTC when omitted)::

    Mon-Fri 09:00-17:00 Europe/Berlin
    Sat,Sun 02:00-04:00 UTC
    09:00-17:00 America/New_York          no days: every day
    Mon-Fri 22:00-02:00 UTC               crosses midnight: Mon 22:00 to Tue 02:00, ...
    Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris

- A window is `[DAYS] HH:MM-HH:MM`. DAYS is a comma-separated list of day names
  `Mon Tue Wed Thu Fri Sat Sun` (any case) and ranges such as `Mon-Fri`; a range may wrap
  around the week (`Fri-Mon` is Fri, Sat, Sun, Mon). No DAYS means every day.
- Times are on a 24-hour clock, `H:MM` or `HH:MM`. The window includes its start and
  excludes its end; `24:00` may end a window (`00:00-24:00` is the whole day). An end
  earlier than the start crosses midnight, and the window belongs to the day it starts on:
  `Fri 22:00-02:00` is open from Friday 22:00 to Saturday 02:00. Start equal to end is an
  error (an empty window).
- The time zone is an IANA name spelled as in the database (`Europe/Berlin`, `UTC`;
  not `utc` or `CEST`), after the last window.
- Spaces around `-`, `,` and `;` are ignored. At most 256 characters.

Times are wall-clock times in the zone: a window is open whenever a clock on the wall
there shows a listed day and a time inside it. So on daylight-saving days:

- spring forward (the clock skips an hour): a window starting in the skipped hour opens
  when the clock jumps, e.g. `02:30-04:00 Europe/Berlin` opens at 03:00 CEST on
  2025-03-30; a window lying wholly in the skipped hour (`02:00-03:00` there) does not
  open that night, and a held rollout waits for the next window;
- fall back (the clock repeats an hour): a window is open in both passes of the repeated
  hour, e.g. `02:00-02:30 Europe/Berlin` opens twice on 2025-10-26.

`parse_window` raises ValueError with a one-line message naming the annotation, quoting the
offending part and showing a valid example. `RolloutWindow.describe` gives the canonical
form of the value, which parses back to an equal window.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kube_nudge.model.quoting import show

__all__ = ["DAY_NAMES", "DEFAULT_ZONE", "MAX_CHARS", "RolloutWindow", "Span", "parse_window"]

DAY_NAMES: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
"""Indexed as `date.weekday()`: 0 is Monday."""
MAX_CHARS: Final = 256
"""The longest value accepted: a hostile annotation costs nothing."""
DEFAULT_ZONE: Final = "UTC"
"""The time zone of a value that names none."""

_EVERY_DAY: Final = frozenset(range(7))
_DAY_INDEX: Final = {name.lower(): i for i, name in enumerate(DAY_NAMES)}
_MINUTES_PER_DAY: Final = 1440
_SEPARATOR_SPACES = re.compile(r"\s*([-,;])\s*")
_DAYS_TOKEN = re.compile(r"[A-Za-z,-]+")
_TIME_RANGE = re.compile(r"([0-9]{1,2}):([0-9]{2})-([0-9]{1,2}):([0-9]{2})")
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")
_HOST_ZONE = "localtime"  # a link to the host's own zone where it exists: not a name
_SEARCH_DAYS: Final = ((-2, 15), (16, 400))
"""Days around `now` searched for the next opening: two weeks cover a weekly window whose
occurrence a DST jump skipped; the longer search is for time zones with odder histories."""

_EXAMPLE = '"Mon-Fri 09:00-17:00 Europe/Berlin"'
_EXAMPLE_MANY = '"Mon 09:00-12:00; Thu 14:00-16:00 Europe/Paris"'


@dataclass(frozen=True, slots=True)
class Span:
    """One window of a rollout window: on `days`, from `start` to `end` local time."""

    days: frozenset[int]
    """The days it starts on, 0 (Monday) to 6 (Sunday)."""
    start: int
    """Minutes after midnight, 0 to 1439."""
    end: int
    """Minutes after midnight, 1 to 1440; earlier than `start`: on the next day."""

    def __post_init__(self) -> None:
        if not (self.days and self.days <= _EVERY_DAY):
            raise ValueError(f"Span days must be a non-empty subset of 0..6, got {self.days}")
        if not (0 <= self.start < _MINUTES_PER_DAY and 0 <= self.end <= _MINUTES_PER_DAY):
            raise ValueError(f"Span minutes out of range: {self.start}-{self.end}")
        if self.start == self.end:
            raise ValueError(f"Span is empty: {self.start}-{self.end}")

    @property
    def crosses_midnight(self) -> bool:
        return self.end < self.start

    def contains(self, wall: datetime) -> bool:
        """Whether the local (naive) wall-clock time `wall` is inside this span."""
        weekday = wall.weekday()
        second = wall.hour * 3600 + wall.minute * 60 + wall.second
        start, end = self.start * 60, self.end * 60
        if not self.crosses_midnight:
            return weekday in self.days and start <= second < end
        return (weekday in self.days and second >= start) or (
            (weekday - 1) % 7 in self.days and second < end
        )

    def describe(self) -> str:
        """`Mon-Fri 09:00-17:00`: the canonical text of this span."""
        times = f"{_hhmm(self.start)}-{_hhmm(self.end)}"
        return times if self.days == _EVERY_DAY else f"{_describe_days(self.days)} {times}"


@dataclass(frozen=True, slots=True)
class RolloutWindow:
    """When rollouts may start: open while the local time in `zone` is inside any span.
    Build it with `parse_window`."""

    spans: tuple[Span, ...]
    zone: str
    """An IANA time zone name, e.g. `Europe/Berlin` or `UTC`."""

    def is_open(self, now: float) -> bool:
        """Whether the window is open at `now` (Unix seconds)."""
        return self._open_at(math.floor(now), self._tz())

    def next_open(self, now: float) -> float:
        """`now` if the window is open, else the Unix time it next opens (`math.inf` if it
        never does, which no real time zone and valid window comes near)."""
        if self.is_open(now):
            return now
        tz = self._tz()
        today = datetime.fromtimestamp(math.floor(now), tz).date()
        for first, last in _SEARCH_DAYS:
            opens = [
                moment
                for offset in range(first, last + 1)
                for moment in self._candidates(today + timedelta(days=offset), tz)
                if moment >= now and self._open_at(int(moment), tz)
            ]
            if opens:
                return min(opens)
        return math.inf

    def _open_at(self, second: int, tz: ZoneInfo) -> bool:
        # Every window opens and closes on a whole second (zones' offsets are whole
        # seconds), so the whole second decides; fromtimestamp would round a float up.
        wall = datetime.fromtimestamp(second, tz).replace(tzinfo=None)
        return any(span.contains(wall) for span in self.spans)

    def describe(self) -> str:
        """The canonical value, e.g. `Mon-Fri 09:00-17:00 Europe/Berlin`."""
        return "; ".join(span.describe() for span in self.spans) + " " + self.zone

    def describe_time(self, moment: float) -> str:
        """``moment`` (Unix seconds) on a wall clock of the window's zone, with the day, and
        in UTC too when the zone is another: `Mon 2027-01-18 09:00 Europe/Berlin
        (2027-01-18 08:00 UTC)`."""
        local = datetime.fromtimestamp(math.floor(moment), self._tz())
        shown = f"{local:%a %Y-%m-%d %H:%M} {self.zone}"
        if self.zone == DEFAULT_ZONE:
            return shown
        return f"{shown} ({datetime.fromtimestamp(math.floor(moment), UTC):%Y-%m-%d %H:%M} UTC)"

    def _tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)  # cached by zoneinfo: a dictionary look-up

    def _candidates(self, day: date, tz: ZoneInfo) -> list[float]:
        """Instants at which a span starting on `day` may open: where the clock reaches its
        start, and the DST jumps that may land the clock inside it. A superset: the caller
        keeps those at which the window is open."""
        moments: list[float] = []
        midnight = datetime.combine(day, time())
        for span in self.spans:
            if day.weekday() not in span.days:
                continue
            start = midnight + timedelta(minutes=span.start)
            length = (span.end - span.start) % _MINUTES_PER_DAY or _MINUTES_PER_DAY
            end = start + timedelta(minutes=length)
            fold0, fold1 = _instants(start, tz)
            moments += (fold0, fold1)
            if fold0 > fold1:  # the start is in a skipped hour: opens at the jump
                moments.append(_jump(fold1, fold0, tz))
            fold0, fold1 = _instants(end, tz)
            if fold0 < fold1:  # the end is in a repeated hour: may open again at the jump
                moments.append(_jump(fold0, fold1, tz))
        return moments


def parse_window(name: str, value: str) -> RolloutWindow:
    """The rollout window in the annotation `name`'s `value` (syntax: see the module).
    Raises ValueError with a one-line message naming `name`."""
    if len(value) > MAX_CHARS:
        raise ValueError(
            f"{name}: too long ({len(value)} characters, at most {MAX_CHARS}): {show(value)}; "
            f"want a few windows such as {_EXAMPLE_MANY}"
        )
    text = _SEPARATOR_SPACES.sub(r"\1", value.strip())
    if not text:
        raise ValueError(
            f"{name}: empty value {show(value)}: want days, hours and a time zone such as "
            f"{_EXAMPLE}"
        )
    parts = text.split(";")
    spans: list[Span] = []
    zone = DEFAULT_ZONE
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        tokens = part.split()
        if not tokens:
            raise ValueError(
                f'{name}: missing window next to ";" in {show(value)}: want windows '
                f'separated by ";" such as {_EXAMPLE_MANY}'
            )
        if len(tokens) == 1 and _is_zone(tokens[0]):
            raise ValueError(
                f"{name}: missing time range before the time zone {show(tokens[0])}: want "
                f'days and hours, then the zone after the last window (no ";"), as in '
                f"{_EXAMPLE}"
            )
        span, rest = _parse_span(name, tokens)
        spans.append(span)
        if rest and not last:
            raise ValueError(
                f"{name}: unexpected {show(' '.join(rest))} after "
                f"{show(' '.join(tokens[: len(tokens) - len(rest)]))}: separate windows with "
                f'";" and give one time zone at the end, as in {_EXAMPLE_MANY}'
            )
        if rest:
            zone = _parse_zone(name, rest[0])
            if len(rest) > 1:
                raise ValueError(
                    f"{name}: unexpected {show(' '.join(rest[1:]))} after the time zone "
                    f"{show(zone)}: the time zone ends the value, as in {_EXAMPLE}"
                )
    return RolloutWindow(spans=tuple(spans), zone=zone)


def _parse_span(name: str, tokens: list[str]) -> tuple[Span, list[str]]:
    """The span at the start of `tokens` and the tokens after it."""
    days, rest = _EVERY_DAY, tokens
    if _DAYS_TOKEN.fullmatch(tokens[0]):
        days, rest = _parse_days(name, tokens[0]), tokens[1:]
        if not rest:
            raise ValueError(
                f"{name}: missing time range after {show(tokens[0])}: want HH:MM-HH:MM on a "
                f'24-hour clock, as in "{tokens[0]} 09:00-17:00"'
            )
    start, end = _parse_times(name, rest[0])
    return Span(days=days, start=start, end=end), rest[1:]


def _parse_days(name: str, token: str) -> frozenset[int]:
    days: set[int] = set()
    for item in token.split(","):
        ends = item.split("-")
        if not item or len(ends) > 2 or not all(ends):
            raise ValueError(
                f"{name}: bad days {show(token)}: want day names separated by commas, or "
                'ranges such as "Mon-Fri" or "Fri-Mon"'
            )
        indexes = []
        for end in ends:
            index = _DAY_INDEX.get(end.lower())
            if index is None:
                raise ValueError(
                    f"{name}: unknown day {show(end)}: want Mon, Tue, Wed, Thu, Fri, Sat or "
                    'Sun, in a range such as "Mon-Fri" or a list such as "Sat,Sun"'
                )
            indexes.append(index)
        first, last = indexes[0], indexes[-1]
        days.update((first + i) % 7 for i in range((last - first) % 7 + 1))
    return frozenset(days)


def _parse_times(name: str, token: str) -> tuple[int, int]:
    match = _TIME_RANGE.fullmatch(token)
    if match is not None:
        start_h, start_m, end_h, end_m = (int(group) for group in match.groups())
        start, end = start_h * 60 + start_m, end_h * 60 + end_m
        if start_h < 24 and start_m < 60 and end_m < 60 and end <= _MINUTES_PER_DAY:
            if start == end:
                raise ValueError(
                    f"{name}: empty window {show(token)}: the start and the end are the same; "
                    'want a range such as "09:00-17:00", or "00:00-24:00" for the whole day'
                )
            return start, end
    raise ValueError(
        f"{name}: bad time range {show(token)}: want HH:MM-HH:MM on a 24-hour clock, as in "
        '"09:00-17:00" or "22:00-02:00" (24:00 may end a range)'
    )


def _parse_zone(name: str, key: str) -> str:
    if _is_zone(key):
        return key
    raise ValueError(
        f'{name}: unknown time zone {show(key)}: want an IANA name such as "Europe/Berlin" or "UTC"'
    )


def _is_zone(key: str) -> bool:
    if _ZONE_KEY.fullmatch(key) is None or key == _HOST_ZONE:
        return False
    try:
        ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False  # not a zone, a directory of zones, a stray file
    return True


def _instants(wall: datetime, tz: ZoneInfo) -> tuple[float, float]:
    """The Unix times of the naive `wall` in `tz` with fold 0 and fold 1: equal for an
    ordinary time; in a repeated hour, fold 0 is the first pass (earlier); in a skipped
    hour, fold 0 reads it with the offset before the jump (later)."""
    return (
        wall.replace(tzinfo=tz, fold=0).timestamp(),
        wall.replace(tzinfo=tz, fold=1).timestamp(),
    )


def _jump(before: float, after: float, tz: ZoneInfo) -> float:
    """The first whole second in (`before`, `after`] with another UTC offset than `before`
    (a transition lies there: both bounds are whole seconds)."""
    low, high = int(before), int(after)
    offset = _offset(low, tz)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(middle, tz) == offset:
            low = middle
        else:
            high = middle
    return float(high)


def _offset(moment: float, tz: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(moment, tz).utcoffset()


def _describe_days(days: frozenset[int]) -> str:
    """`Mon-Fri`, `Sat,Sun`, `Mon,Wed,Sun`, `Fri-Mon`: in Mon..Sun order, runs of three or
    more days as ranges; a run of three or more across Sunday-Monday as one wrapping range."""
    runs: list[list[int]] = []
    for day in sorted(days):
        if runs and runs[-1][-1] + 1 == day:
            runs[-1].append(day)
        else:
            runs.append([day])
    wraps = len(runs) > 1 and runs[0][0] == 0 and runs[-1][-1] == 6
    if wraps and len(runs[0]) + len(runs[-1]) > 2:
        runs[-1] += runs.pop(0)
    items = []
    for run in runs:
        names = [DAY_NAMES[d] for d in run]
        items += [f"{names[0]}-{names[-1]}"] if len(run) > 2 else names
    return ",".join(items)


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
