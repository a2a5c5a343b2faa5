"""One shared instance for equal immutable values that thousands of cached objects carry.

Most ConfigMaps and Secrets carry no kube-nudge annotation, so their settings are all equal,
and most workloads of one installation share theirs: one instance instead of one per object
(a ``SourceSettings`` is 72 bytes; 15,200 cached sources in the memory scenario's shape kept
1 MiB of equal copies).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

__all__ = ["POOL_LIMIT", "shared"]

T = TypeVar("T", bound=Hashable)

#: Distinct values kept per pool; beyond it the pool starts afresh (values stay correct).
POOL_LIMIT = 1024


def shared(value: T, pool: dict[T, T]) -> T:
    """The instance in ``pool`` equal to ``value`` (which joins the pool if none is)."""
    try:
        found = pool.get(value)
    except TypeError:  # an unhashable field after all: not shared
        return value
    if found is not None:
        return found
    if len(pool) >= POOL_LIMIT:
        pool.clear()
    pool[value] = value
    return value
