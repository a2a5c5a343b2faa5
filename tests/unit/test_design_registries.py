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


#: The layers whose line in design.md's drawing is a list of modules ("a · b (why) · c/").
LISTED_LAYERS = ("reporting", "notifications", "runtime", "kube", "model")
SRC = DESIGN.parents[1] / "src" / "kube_nudge"


def listed_modules(text: str) -> dict[str, list[str]]:
    """Each listed layer of the drawing (the first code block) with the module names its
    line and continuation lines give: parentheticals dropped, the last word of each item."""
    drawing = text.split("```", 2)[1]
    layers: dict[str, str] = {}
    current = ""
    for line in drawing.splitlines():
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if word.isidentifier() and len(line) - len(line.lstrip()) <= 1:  # a layer's own line
            current = word
            line = line.lstrip()[len(word) :]
        if current in LISTED_LAYERS:
            layers[current] = layers.get(current, "") + " " + line.replace("│", " ")
    found = {}
    for layer, joined in layers.items():
        items = re.sub(r"\([^)]*\)", " ", joined).split("·")
        found[layer] = [item.split()[-1].rstrip(".:,") for item in items if item.split()]
    return found


def test_every_module_the_drawing_lists_exists() -> None:
    listed = listed_modules(DESIGN.read_text(encoding="utf-8"))
    assert set(listed) == set(LISTED_LAYERS), listed  # the parse found every layer
    assert {"shapes", "decide", "pacing"} <= set(listed["model"])
    missing = [
        f"{layer}/{name}"
        for layer, names in listed.items()
        for name in names
        if not (SRC / layer / name).is_dir()
        and not (SRC / layer / name.removesuffix(".py")).with_suffix(".py").is_file()
        and not (SRC / layer / name.rstrip("/")).is_dir()
    ]
    assert missing == []


def test_every_file_the_design_names_exists() -> None:
    """A backquoted ``dir/file.py`` of design.md is a file of the product, the dev tools or
    the tests."""
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", DESIGN.read_text(encoding="utf-8")))
    roots = (SRC, SRC.parents[1], SRC.parents[1] / "devtools" / "src" / "kube_nudge_dev")
    assert len(named) > 10
    missing = sorted(n for n in named if not any((root / n).is_file() for root in roots))
    assert missing == []


def test_a_module_that_does_not_exist_is_found() -> None:
    text = "```\n model       pure: shapes · snapshots (copies) · decide\n```\n"
    assert listed_modules(text)["model"] == ["shapes", "snapshots", "decide"]
