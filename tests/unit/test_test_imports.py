"""Test modules are leaves: shared fixtures, builders and fakes live in support modules
(tests/unit/fakes.py, tests/integration/*_support.py), never in a ``test_*`` module that
another test imports (collecting one module's tests into another); the bench imports no
module of the tests at all."""

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


def test_the_bench_imports_no_test_module_at_all() -> None:
    """What the bench shares with the tests (manifests, the real node's pods, the hot-reload
    app) lives in devtools (``kube_nudge_dev``): a support module of the tests changes with
    them, and the bench must not break when it does."""
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "bench").rglob("*.py"))
        for name in imported_modules(path)
        if name == "tests" or name.startswith("tests.")
    }
    assert offenders == set()
