"""Count a tool's API writes from the apiserver audit log (the cluster logs writes only)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

import orjson


@dataclass(slots=True)
class Writes:
    """Writes by one client in a stretch of the audit log."""

    total: int = 0
    by_resource: dict[str, int] = field(default_factory=dict)
    failed: int = 0  # answered with a status >= 300
    first: float | None = None  # wall-clock seconds of the first and last request
    last: float | None = None


class AuditLog:
    """Reads the log from a byte offset, so phases are counted separately."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """The current end of the log: pass it to ``writes`` later."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def writes(self, agent_prefix: str, since: int, until: int | None = None) -> Writes:
        """Completed writes whose user agent starts with ``agent_prefix``, in [since, until)."""
        counted = Writes()
        for entry in self._entries(since, until):
            if entry.get("stage") != "ResponseComplete":
                continue
            if not str(entry.get("userAgent", "")).startswith(agent_prefix):
                continue
            _count(counted, entry)
        return counted

    def _entries(self, since: int, until: int | None) -> list[dict[str, object]]:
        with self.path.open("rb") as log:
            log.seek(since)
            data = log.read() if until is None else log.read(until - since)
        # Only complete lines: the apiserver may be writing the last one right now.
        complete = data[: data.rfind(b"\n") + 1]
        return [orjson.loads(line) for line in complete.splitlines() if line.strip()]


def _count(counted: Writes, entry: dict[str, object]) -> None:
    obj = entry.get("objectRef")
    resource = str(obj.get("resource", "?")) if isinstance(obj, dict) else "?"
    counted.total += 1
    counted.by_resource[resource] = counted.by_resource.get(resource, 0) + 1
    status = entry.get("responseStatus")
    code = status.get("code", 200) if isinstance(status, dict) else 200
    if isinstance(code, int) and code >= 300:
        counted.failed += 1
    received = _timestamp(entry.get("requestReceivedTimestamp"))
    if received is not None:
        counted.first = received if counted.first is None else min(counted.first, received)
        counted.last = received if counted.last is None else max(counted.last, received)


def _timestamp(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
