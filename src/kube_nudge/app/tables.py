"""Text tables for people, shared by the commands that print one (``status``, ``plan``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["GAP", "column_widths", "fit"]

#: Spaces between two columns.
GAP = 2


def fit(text: str, width: int) -> str:
    """``text`` padded to ``width``, or cut to it with an ellipsis."""
    return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"


def column_widths(
    table: Sequence[Sequence[str]], width: int | None, give_way: Sequence[int], *, least: int = 20
) -> list[int]:
    """The width of each column of ``table`` (its header row first) so a line fits
    ``width``: each column's longest cell when all fit, or ``width`` is None (no limit).
    Else the columns of ``give_way`` are cut in its order, none below ``least`` (nor its
    header); the others never: on a very narrow terminal a line runs over rather than
    showing nothing."""
    longest = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    widths = list(longest)
    over = sum(widths) + GAP * (len(widths) - 1) - width if width is not None else 0
    for i in give_way:
        if over <= 0:
            break
        floor = min(longest[i], max(least, len(table[0][i])))
        cut = min(over, widths[i] - floor)
        widths[i] -= cut
        over -= cut
    return widths
