"""docs/design.md's "Where things go" table stays true: every registry its "And register it
in" column names (`NAME` beside the module it lives in) exists, importable, and holds
entries (a mapping or a tuple of them)."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from pathlib import Path

DESIGN = Path(__file__).parents[2] / "docs" / "design.md"
_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")
_MODULE = re.compile(r"`([a-z_]+(?:/[a-z_]+)*)\.py`")


def registries(text: str) -> dict[str, list[str]]:
    """Each ALL_CAPS name in the last column of the "Where things go" table, with the
    modules (``kube_nudge.…``) the same cell names."""
    table = text.split("## Where things go", 1)[1].split("\n## ", 1)[0]
    found: dict[str, list[str]] = {}
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 3 or set(cells[0]) <= {"-"}:
            continue
        modules = ["kube_nudge." + path.replace("/", ".") for path in _MODULE.findall(cells[-1])]
        for name in _NAME.findall(cells[-1]):
            found[name] = modules
    return found


def test_every_registry_the_design_names_exists() -> None:
    named = registries(DESIGN.read_text(encoding="utf-8"))
    assert {"STRATEGIES", "BUILTIN_KINDS", "COMMANDS"} <= set(named)  # the parse found them
    missing = []
    for name, modules in sorted(named.items()):
        values = [
            getattr(module, name)
            for module in map(importlib.import_module, modules)
            if hasattr(module, name)
        ]
        if not any(isinstance(v, Mapping | tuple) and len(v) > 0 for v in values):
            missing.append(f"{name} in {', '.join(modules) or '(no module named beside it)'}")
    assert missing == []


def test_a_registry_that_does_not_exist_is_found() -> None:
    row = "| a thing | `x.py` | `NO_SUCH` in `strategies/registry.py` |"
    text = f"## Where things go\n\n| a | b | c |\n|---|---|---|\n{row}\n\n## Next\n"
    assert registries(text) == {"NO_SUCH": ["kube_nudge.strategies.registry"]}
