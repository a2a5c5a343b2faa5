"""Per-key exponential backoff for failed work (client-go's item exponential limiter)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Backoff"]

K = TypeVar("K", bound=Hashable)


class Backoff(Generic[K]):
    """``base * 2**(failures-1)`` seconds after each consecutive failure, at most ``cap``."""

    def __init__(self, base: float = 1.0, cap: float = 60.0) -> None:
        if not 0 < base <= cap:
            raise ValueError(f"Backoff needs 0 < base <= cap, got {base} / {cap}")
        self.base = base
        self.cap = cap
        self._failures: dict[K, int] = {}

    def failed(self, key: K) -> float:
        """Count one more failure of ``key``; the delay before its next try."""
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        # min() before the power keeps huge failure counts from overflowing a float.
        return float(min(self.base * 2.0 ** min(failures - 1, 64), self.cap))

    def succeeded(self, key: K) -> None:
        """Reset ``key``'s failures."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """Consecutive failures of ``key`` so far."""
        return self._failures.get(key, 0)

    def __len__(self) -> int:
        return len(self._failures)
