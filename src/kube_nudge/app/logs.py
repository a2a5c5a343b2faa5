"""Process-wide logging: plain text for people, JSON lines for log pipelines."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import orjson

from kube_nudge.logrecords import TEXT_FORMAT, log_entry

# Loggers that log every HTTP request at INFO: useful only when debugging.
_CHATTY = ("httpx2", "httpcore2", "httpx", "httpcore", "uvicorn")  # INFO chatter of libraries


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, msg, caller extras, and exc."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a single line of JSON."""
        entry = log_entry(record, self)
        for key, value in list(entry.items()):
            try:
                orjson.dumps(value)
            except TypeError:
                del entry[key]  # not JSON-serializable: leave it out rather than lose the line
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
