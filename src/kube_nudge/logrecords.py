"""What a JSON log line holds, shared by the controller and the agent (standard library
only, so the lean agent can use it): ts, level, logger, msg, the caller's ``extra=``
fields, and the exception."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

__all__ = ["TEXT_FORMAT", "log_entry"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}


def log_entry(record: logging.LogRecord, formatter: logging.Formatter) -> dict[str, Any]:
    """The fields of ``record``'s JSON line (extras as given: the caller serialises)."""
    entry: dict[str, Any] = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    for key, value in record.__dict__.items():
        if key not in _STANDARD and key not in entry:
            entry[key] = value
    if record.exc_info:
        entry["exc"] = formatter.formatException(record.exc_info)
    if record.stack_info:
        entry["stack"] = formatter.formatStack(record.stack_info)
    return entry
