"""A strategy lives wholly in its package (issue 31): in a copy of the tree without one
strategy's package, its registry entry and the contracts naming its modules, the product
still imports every module, the import-linter contracts hold, and the unit tests of the
other strategies pass. Anything outside the package that names it (the shared writes
importing one of its modules, say) breaks the copy.

Each case copies src/ and tests/ and runs three subprocesses (about 15 s each on 2 cores)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
REGISTRY = Path("src/kube_nudge/strategies/registry.py")

#: The unit tests of the strategies that stay, when one goes.
OTHERS_TESTS = {
    "snapshot": [
        "tests/unit/test_model_hot.py",
        "tests/unit/test_model_hot_claims.py",
        "tests/unit/test_strategy_rollout.py",
        "tests/unit/test_strategies_hooks.py",
        "tests/unit/test_strategies_plugin.py",
        # It names snapshot as the strategy that can roll back (without it the message
        # rightly names none).
        "--deselect",
        "tests/unit/test_strategies_plugin.py::test_a_failed_rollout_names_the_strategies_that_can_roll_back",
    ],
    "hot": [
        "tests/unit/test_model_snapshots.py",
        "tests/unit/test_strategy_rollout.py",
        "tests/unit/test_strategies_hooks.py",
        "tests/unit/test_strategies_plugin.py",
    ],
}

#: Imports every module of the product (as the copy has it) in one process; ``__main__``
#: modules would run the commands.
IMPORT_ALL = """
import importlib, pkgutil, kube_nudge
assert kube_nudge.__file__.startswith({root!r}), kube_nudge.__file__
for module in pkgutil.walk_packages(kube_nudge.__path__, "kube_nudge."):
    if not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
"""


def without_strategy(root: Path, name: str) -> None:
    """Remove strategy ``name`` from the tree at ``root``: its package, its registry line
    (the import and the entry) and its modules from the contracts' module lists."""
    shutil.rmtree(root / "src/kube_nudge/strategies" / name)
    registry = (root / REGISTRY).read_text()
    found = re.search(rf"^from kube_nudge\.strategies\.{name} import (\w+)\n", registry, re.M)
    assert found is not None, f"no registry import of strategy {name}"
    factory = found[1]
    entry = f"    {factory}.name: {factory},\n"
    assert entry in registry, f"no registry entry of {factory}"
    (root / REGISTRY).write_text(registry.replace(found[0], "").replace(entry, ""))
    config = root / "pyproject.toml"
    module = rf'"kube_nudge\.strategies\.{name}(\.\w+)*",\s*'
    config.write_text(re.sub(module, "", config.read_text()))


def run(root: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in ``root`` with the copy's product (and the development tools, which
    the contracts name) first on the path."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root / "src"), str(REPO / "devtools/src")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=240, check=False
    )


def copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache")
    for part in ("src", "tests"):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def check_removable(root: Path, name: str) -> None:
    """The three checks, each failing with what its subprocess said."""
    imported = run(root, sys.executable, "-c", IMPORT_ALL.format(root=str(root)))
    assert imported.returncode == 0, imported.stderr[-3000:]
    linted = run(root, str(BIN / "lint-imports"), "--no-cache", "--config", "pyproject.toml")
    assert linted.returncode == 0, linted.stdout[-3000:] + linted.stderr[-3000:]
    tested = run(
        root, sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
        *OTHERS_TESTS[name],
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout[-3000:]


@pytest.mark.parametrize("name", sorted(OTHERS_TESTS))
def test_a_strategy_can_be_removed_with_its_package_and_registry_line(
    tmp_path: Path, name: str
) -> None:
    root = copy_tree(tmp_path)
    without_strategy(root, name)
    check_removable(root, name)


def test_a_strategy_named_outside_its_package_is_caught(tmp_path: Path) -> None:
    """The shared writes importing one of snapshot's modules: the copy no longer imports."""
    root = copy_tree(tmp_path)
    writes = root / "src/kube_nudge/strategies/writes.py"
    text = writes.read_text()
    writes.write_text(
        text.replace(
            "from kube_nudge.strategies.base import",
            "from kube_nudge.strategies.snapshot.model import SNAPSHOTS  # noqa: F401\n"
            "from kube_nudge.strategies.base import",
            1,
        )
    )
    without_strategy(root, "snapshot")
    with pytest.raises(AssertionError, match="snapshot"):
        check_removable(root, "snapshot")
