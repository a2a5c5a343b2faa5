"""Fixtures shared by the unit tests."""

from __future__ import annotations

import logging
import shutil
import subprocess  # nosec B404 # pip builds the wheel under test
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.one_writer_support import guarded
from tests.unit.httpx_support import HttpxTransport

REPO = Path(__file__).resolve().parents[2]

# Build outputs and caches are not sources. setuptools copies all of an existing build/lib
# into the wheel, so a stale one (say, from before a module moved) would leak old files in:
# the wheel is built from a copy of the checkout without them, as from a fresh clone.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The product wheel, built once from a copy of the checkout (as from a fresh clone)."""
    source = tmp_path_factory.mktemp("checkout") / "kube-nudge"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(  # nosec B603 # this interpreter's pip, fixed argv
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(source)],
        check=True, timeout=240,
    )  # fmt: skip
    [built] = out.glob("kube_nudge-*.whl")
    return built


@pytest.fixture(scope="session", autouse=True)
def _one_writer_on_httpx() -> Iterator[None]:
    """The unit tests' transport refuses, as the product's does in every session, a PATCH
    that product code sends other than through ``kube/patches.py``."""
    with guarded(HttpxTransport):
        yield


@pytest.fixture(autouse=True)
def _root_logging_put_back() -> Iterator[None]:
    """``kube-nudge run`` under test installs its log handler on the root logger, writing to
    the stderr pytest captured for that test, which is closed afterwards: the root logger is
    put back after each test, so a later record (from a task an earlier test left behind)
    never reaches a closed stream as a "Logging error" traceback in another test's output."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
