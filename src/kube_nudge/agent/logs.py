"""The agent's log lines: plain text, or one JSON object per line like the controller's."""

from __future__ import annotations

import json
import logging
import sys

from kube_nudge.logrecords import TEXT_FORMAT, log_entry


class JsonFormatter(logging.Formatter):
    """ts, level, logger, msg, the caller's ``extra=`` fields and exc, as one JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a single line of JSON."""
        return json.dumps(log_entry(record, self), default=str)


def setup_logging(log_format: str) -> None:
    """Log INFO and above to stderr in ``log_format`` (text or json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
