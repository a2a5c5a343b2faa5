"""docs/design.md stays true of the tree: every module it names by path exists. A bare file
name (``cache.py``) must name exactly one module of the product, the one the text means."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = REPO / "src" / "kube_nudge"
PAGE = REPO / "docs" / "design.md"
NAMED = re.compile(r"`([A-Za-z0-9_/.-]+\.py)`")


def missing(text: str) -> list[str]:
    """The ``*.py`` paths ``text`` names in backticks that name no file, or no one file."""
    gone = []
    for name in sorted(set(NAMED.findall(text))):
        if "X_" in name:
            continue  # a pattern (`app/X_command.py`), not a module
        candidates = [REPO / name, PRODUCT / name]
        if "/" not in name:
            candidates = list(PRODUCT.rglob(name))
            if len(candidates) != 1:
                gone.append(f"{name} ({len(candidates)} modules of that name)")
            continue
        if not any(path.is_file() for path in candidates):
            gone.append(name)
    return gone


def test_every_module_design_md_names_exists() -> None:
    assert missing(PAGE.read_text()) == []


def test_a_module_that_is_gone_is_caught() -> None:
    assert missing("`controller/gone.py` and `kube/patches.py`") == ["controller/gone.py"]
