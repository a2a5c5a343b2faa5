"""The product wheel is the controller only: the dev tools (devtools/, the separate
``kube-nudge-dev``) and their Go wrapper modules and dependencies never ship with it."""

from __future__ import annotations

import configparser
import email.parser
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


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
    assert any(r.startswith("aiohttp") for r in requires), requires
    # Read by the product itself, loaded beside aiohttp they would cost ~9.5 MiB (README).
    runtime = [r for r in requires if "extra ==" not in r]
    assert [r for r in runtime if r.startswith(("lightkube", "httpx2"))] == []
    assert [r for r in requires if "cryptography" in r.lower()] == []


# The container image (Dockerfile): what it relies on is checked here against the wheel, the
# locks and the chart, with no container engine; tests/integration/test_image.py builds it
# (`make image`) and runs it where podman and root are available.
DOCKERFILE = REPO / "Dockerfile"


def _instruction(keyword: str) -> list[str]:
    """The last JSON-form ENTRYPOINT/CMD of the final stage."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if line.startswith(keyword)]
    return list(json.loads(lines[-1].removeprefix(keyword).strip()))


def test_image_entrypoint_is_the_wheels_console_script(wheel: Path) -> None:
    assert _instruction("ENTRYPOINT") == ["kube-nudge"] and _instruction("CMD") == ["run"]
    with zipfile.ZipFile(wheel) as archive:
        [name] = [m for m in archive.namelist() if m.endswith(".dist-info/entry_points.txt")]
        scripts = configparser.ConfigParser()
        scripts.read_string(archive.read(name).decode())
    assert scripts["console_scripts"]["kube-nudge"] == "kube_nudge.launch:main"


def test_image_locks_pin_every_dependency_of_the_wheel(wheel: Path) -> None:
    fresh = subprocess.run(
        [sys.executable, "tools/image_locks.py", "--check"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    with zipfile.ZipFile(wheel) as archive:
        [name] = [m for m in archive.namelist() if m.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    runtime = [Requirement(r) for r in metadata.get_all("Requires-Dist") or []]
    needed = {canonicalize_name(r.name) for r in runtime if r.marker is None}
    lock = (REPO / "requirements/image-runtime.lock").read_text()
    pinned = {canonicalize_name(line.split("==")[0]) for line in lock.splitlines() if "==" in line}
    assert needed and needed <= pinned
    assert not pinned & {"pytest", "setuptools", "wheel", "kube-nudge-dev", "cryptography"}


def test_image_base_is_the_argument_make_image_replaces() -> None:
    # make image builds every stage on its own Debian base: --build-arg PYTHON_IMAGE=...
    lines = DOCKERFILE.read_text().splitlines()
    assert [line for line in lines if line.startswith("ARG PYTHON_IMAGE=")]
    stages = [line.split()[1] for line in lines if line.startswith("FROM ")]
    assert stages and set(stages) == {"${PYTHON_IMAGE}"}


# A release builds on the Dockerfile's default base by digest: a tag can move.
_PINNED_BASE = re.compile(r"python:3\.11-slim@sha256:[0-9a-f]{64}")
_PINNED_ANYWHERE = re.compile(r"\S*python[\w.:-]*@sha256:[0-9a-f]*")


def test_the_release_base_is_one_reference_pinned_by_digest() -> None:
    arg = "ARG PYTHON_IMAGE="
    lines = DOCKERFILE.read_text().splitlines()
    [default] = [line.removeprefix(arg) for line in lines if line.startswith(arg)]
    assert _PINNED_BASE.search(default) and default.startswith("docker.io/library/"), default
    workflow = yaml.safe_load((REPO / ".github/workflows/release.yml").read_text())
    runs = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    [release] = [run for run in runs if "make release" in run]
    assert re.findall(r"--base (\S+)", release) == [default]
    # every other place that names a python base by digest names the same one
    places = [REPO / "README.md", REPO / "RELEASING.md", REPO / "CHANGELOG.md",
              *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / ".github").rglob("*.yml")),
              *sorted((REPO / "devtools/src").rglob("*.py"))]  # fmt: skip
    named = {
        (path.relative_to(REPO).as_posix(), found)
        for path in places
        for found in _PINNED_ANYWHERE.findall(path.read_text())
    }
    assert {found.strip("`'\"()") for _, found in named} <= {default}, named


def test_image_runs_as_the_user_the_chart_asks_for() -> None:
    [user] = [line.split()[1] for line in DOCKERFILE.read_text().splitlines()
              if line.startswith("USER ")]  # fmt: skip
    values = yaml.safe_load((REPO / "deploy/helm/kube-nudge/values.yaml").read_text())
    security = values["podSecurityContext"]
    assert user == f"{security['runAsUser']}:{security['runAsGroup']}"
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    # only the product's sources and the image locks go into the image, never devtools/
    copied = [line.split()[1:-1] for line in DOCKERFILE.read_text().splitlines()
              if line.startswith("COPY ") and "--from" not in line]  # fmt: skip
    assert sorted(p for group in copied for p in group) == sorted([
        "requirements/image-build.lock", "requirements/image-runtime.lock",
        "pyproject.toml", "README.md", "LICENSE", "src",
    ])  # fmt: skip
