"""The product wheel is the controller only: the dev tools (devtools/, the separate
``kube-nudge-dev``) and their Go wrapper modules and dependencies never ship with it."""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Build outputs and caches are not sources. setuptools copies all of an existing build/lib
# into the wheel, so a stale one (say, from before a module moved) would leak old files in:
# the wheel is built from a copy of the checkout without them, as from a fresh clone.
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("checkout") / "kube-nudge"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCES)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(source)],
        check=True, timeout=240,
    )  # fmt: skip
    [built] = out.glob("kube_nudge-*.whl")
    return built


def _members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_wheel_has_no_go_files(wheel: Path) -> None:
    go = [m for m in _members(wheel) if m.endswith((".go", "go.mod", "go.sum"))]
    assert go == []


def test_wheel_has_no_dev_tools(wheel: Path) -> None:
    members = _members(wheel)
    assert "kube_nudge/app/cli.py" in members  # the product is there ...
    dev = [m for m in members if m.startswith("kube_nudge/devcluster/") or "kube_nudge_dev" in m]
    assert dev == []  # ... and nothing of the dev tools


def test_wheel_does_not_depend_on_cryptography(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [name] = [m for m in archive.namelist() if m.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    requires = metadata.get_all("Requires-Dist") or []
    assert any(r.startswith("lightkube") for r in requires), requires
    assert [r for r in requires if "cryptography" in r.lower()] == []
