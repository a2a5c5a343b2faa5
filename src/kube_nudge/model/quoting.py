"""How bad input is quoted in messages: one helper, so every message truncates and escapes
the same way (a hostile annotation never floods an Event or a log line)."""

from __future__ import annotations

import json

__all__ = ["show"]

SHOWN_CHARS = 100


def show(value: object) -> str:
    """The value quoted and escaped for a message, truncated to ~100 characters."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + "..."
    return json.dumps(text)
