"""Wait, with a time limit, until many workloads have rolled; project the rest if it hits.

A peer at its defaults can need many minutes for 1,000 workloads (Wave: 1 update/s after a
burst of 100). Rather than wait that out in every repetition, a fan-out stops at
``Sizes.roll_timeout`` and projects the finish from the rate of its second half: the figure
is then marked as projected, with how many had rolled by the limit.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from bench.scenarios import Metrics
from bench.watcher import Key, WorkloadWatcher


@dataclass(frozen=True, slots=True)
class Rolled:
    """When each workload's marker changed, in seconds from t0 (sorted), out of ``expected``."""

    times: list[float]
    expected: int
    limit: float

    @property
    def complete(self) -> bool:
        """Every workload rolled within the limit."""
        return len(self.times) >= self.expected

    def total(self) -> float:
        """Seconds until the last one rolled, or the projection if the limit hit first."""
        if self.complete:
            return self.times[self.expected - 1]
        half = self.limit / 2
        recent = sum(1 for t in self.times if t >= half)
        if recent == 0:
            return float("nan")
        return self.limit + (self.expected - len(self.times)) * half / recent

    def metrics(self, prefix: str) -> Metrics:
        """``<prefix>_s`` (projected if incomplete), first, half, and how many rolled."""
        nan = float("nan")
        half_index = (self.expected - 1) // 2
        return {
            f"{prefix}_s": round(self.total(), 3),
            f"{prefix}_projected": 0.0 if self.complete else 1.0,
            f"{prefix}_rolled": float(len(self.times)),
            f"{prefix}_first_ms": round(self.times[0] * 1000, 1) if self.times else nan,
            f"{prefix}_half_s": (
                round(self.times[half_index], 3) if len(self.times) > half_index else nan
            ),
        }


def rolled_since(watch: WorkloadWatcher, before: dict[Key, str | None]) -> list[Key]:
    """Workloads whose marker is set and differs from ``before``."""
    return [
        key
        for key, seen in watch.seen.items()
        if seen.marker is not None and seen.marker != before.get(key)
    ]


async def wait_rolled(
    watch: WorkloadWatcher,
    before: dict[Key, str | None],
    expected: int,
    t0: float,
    limit: float,
) -> Rolled:
    """Wait until ``expected`` markers changed since ``before``, or ``limit`` s after t0."""
    remaining = limit - (time.perf_counter() - t0)
    with contextlib.suppress(TimeoutError):
        await watch.until(
            lambda: len(rolled_since(watch, before)) >= expected, max(remaining, 0.001), "rollouts"
        )
    times = [watch.seen[key].marker_at - t0 for key in rolled_since(watch, before)]
    return Rolled(sorted(t for t in times if t <= limit), expected, limit)
