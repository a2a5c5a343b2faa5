"""How bad input is quoted in messages: one helper, so every message truncates and escapes
the same way (a hostile annotation never floods an Event or a log line)."""

from __future__ import annotations

import json

__all__ = ["show"]

SHOWN_CHARS = 100


def show(value: object) -> str:
    """The value quoted and escaped for a message, truncated to ~100 characters of the
    escaped text (a control character escapes to six: counting the raw ones let 100 of
    them grow a message past its bound)."""
    text = value if isinstance(value, str) else repr(value)
    body: list[str] = []
    length = 0
    for char in text:  # stops at the bound, whatever the input's size
        piece = json.dumps(char)[1:-1]
        if length + len(piece) > SHOWN_CHARS:
            body.append("...")
            break
        body.append(piece)
        length += len(piece)
    return '"' + "".join(body) + '"'
