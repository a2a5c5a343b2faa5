"""Time, injectable: the system clock in production, a fake one in tests."""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    """Wall-clock time for what is recorded or compared across processes, monotonic time
    for delays within this process."""

    def now(self) -> float:
        """Unix seconds."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...


class SystemClock:
    """The real clocks."""

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
