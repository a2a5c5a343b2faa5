"""Test modules are leaves: shared fixtures, builders and fakes live in support modules
(tests/unit/fakes.py, tests/integration/*_support.py), never in a ``test_*`` module that
another test or the bench imports (collecting one module's tests into another)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports by absolute name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_test_module_is_imported_by_tests_or_the_bench() -> None:
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in imported_modules(path)
        if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")
    }
    assert offenders == set()
