"""Text tables for people, shared by the commands that print one (``status``, ``plan``)."""

from __future__ import annotations

__all__ = ["fit"]


def fit(text: str, width: int) -> str:
    """``text`` padded to ``width``, or cut to it with an ellipsis."""
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"
