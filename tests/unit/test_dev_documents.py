"""Generated blocks of documents (the fault table, the annotation table of docs/concepts.md)."""

from __future__ import annotations

import pytest

from kube_nudge_dev.documents import replace_between

BEGIN, END = "<!-- t:begin -->", "<!-- t:end -->"


def test_only_the_text_between_the_markers_is_replaced() -> None:
    document = f"intro\n{BEGIN}\nold\nrows\n{END}\nrest\n"
    assert replace_between(document, BEGIN, END, "new") == f"intro\n{BEGIN}\nnew\n{END}\nrest\n"


@pytest.mark.parametrize("document", ["no markers", f"{BEGIN} only", f"{END} {BEGIN}"])
def test_a_document_without_both_markers_is_refused(document: str) -> None:
    with pytest.raises(ValueError, match="has no"):
        replace_between(document, BEGIN, END, "new")
