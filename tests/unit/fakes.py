"""Test doubles of the runtime's injectable parts."""

from __future__ import annotations


class FakeClock:
    """A clock that moves only when told to (both wall and monotonic time)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.time = start

    def now(self) -> float:
        return self.time

    def monotonic(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds
