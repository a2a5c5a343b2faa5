"""Generated blocks of the repository's documents: the text between two marker comments,
rewritten by a tool (the fault table of docs/reliability.md, the annotation table of
docs/concepts.md)."""

from __future__ import annotations

__all__ = ["between", "replace_between"]


def between(document: str, begin: str, end: str) -> str:
    """The text of `document` between the markers `begin` and `end`; ValueError if either
    marker is missing."""
    _, found_begin, rest = document.partition(begin)
    block, found_end, _ = rest.partition(end)
    if not found_begin or not found_end:
        raise ValueError(f"the document has no {begin} ... {end} block")
    return block


def replace_between(document: str, begin: str, end: str, block: str) -> str:
    """`document` with the text between the markers `begin` and `end` replaced by `block`
    (on lines of its own); ValueError if either marker is missing."""
    head, found_begin, rest = document.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not found_begin or not found_end:
        raise ValueError(f"the document has no {begin} ... {end} block")
    return f"{head}{begin}\n{block}\n{end}{tail}"
