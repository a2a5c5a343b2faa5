"""The formats of what kube-nudge records on a workload's metadata, read back by the
projection and written by the strategies: the recent rollout times (``kube-nudge.io/rolled-at``,
``released-at``, ``approved-at``) and a config hash with a time (``kube-nudge.io/failed``,
and a strategy's records of its own). Reading never raises: what can't be read is left out.
"""

from __future__ import annotations

import contextlib
import math

__all__ = [
    "format_failed",
    "format_hash_at",
    "format_rolled_at",
    "parse_failed",
    "parse_hash_at",
    "parse_rolled_at",
]

_MAX_ROLLED_AT = 100  # a malformed or hostile annotation costs at most this many numbers


def parse_rolled_at(value: object) -> tuple[float, ...]:
    """The timestamps of `kube-nudge.io/rolled-at`, sorted; anything unreadable is skipped
    (it only ever makes the flap cap more lenient)."""
    if not isinstance(value, str):
        return ()
    stamps = []
    for part in value.split(",", _MAX_ROLLED_AT)[:_MAX_ROLLED_AT]:
        with contextlib.suppress(ValueError):
            stamp = float(part)
            if math.isfinite(stamp) and stamp > 0:
                stamps.append(stamp)
    return tuple(sorted(stamps))


def format_rolled_at(stamps: tuple[float, ...] | list[float]) -> str:
    """The value of `kube-nudge.io/rolled-at` for `stamps` (millisecond precision)."""
    return ",".join(f"{t:.3f}" for t in stamps)


def parse_hash_at(value: object) -> tuple[str, float] | None:
    """`<config hash>@<unix seconds>` (`kube-nudge.io/failed`, and a strategy's records of
    its own) as (config hash, Unix seconds); None if absent or unreadable (which only
    ever forgets a record: a line is not stopped by garbage)."""
    if not isinstance(value, str):
        return None
    config_hash, _, stamp = value.rpartition("@")
    try:
        moment = float(stamp)
    except ValueError:
        return None
    return (config_hash, moment) if config_hash and math.isfinite(moment) else None


def format_hash_at(config_hash: str, moment: float) -> str:
    """`<config hash>@<unix seconds>`, as `parse_hash_at` reads it."""
    return f"{config_hash}@{moment:.3f}"


#: `kube-nudge.io/failed`: the rollout to that hash failed then.
parse_failed = parse_hash_at
format_failed = format_hash_at
