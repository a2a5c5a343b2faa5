"""Process-wide logging: plain text for people, JSON lines for log pipelines."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
# Loggers that log every HTTP request at INFO: useful only when debugging.
_CHATTY = ("httpx2", "httpcore2", "httpx", "httpcore", "uvicorn")  # INFO chatter of libraries


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, caller extras, and exc."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a single line of JSON."""
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key in _STANDARD or key in entry:
                continue
            try:
                orjson.dumps(value)
            except TypeError:
                continue  # not JSON-serializable: leave it out rather than lose the line
            entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry).decode()


class _OurHandler(logging.StreamHandler[TextIO]):
    """Marks the handler we install, so a second setup replaces it instead of adding one."""


def setup_logging(level: str, fmt: str) -> None:
    """Send all logs to stderr at ``level`` (e.g. "info") as ``fmt`` "text" or "json"."""
    numeric = logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in ("text", "json"):
        raise ValueError(f"unknown log format {fmt!r}: expected 'text' or 'json'")
    handler = _OurHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(logging.WARNING if numeric > logging.DEBUG else numeric)
