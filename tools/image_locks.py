"""Write the container image's two locks from requirements/dev.lock: the same pins and hashes
the tests ran with, only what the image needs.

- requirements/image-runtime.lock: the product's dependencies and theirs (no extras), for the
  runtime venv; the product wheel itself is installed with --no-deps on top.
- requirements/image-build.lock: what building the product wheel needs (setuptools, wheel),
  only in the build stage.

The dependency closure is read from pyproject.toml and the installed distributions' metadata,
with markers evaluated for this interpreter (the image runs CPython 3.11 on Linux, as `make`
does here). Run from the repository root after changing a dependency or the dev lock:

    .venv/bin/python tools/image_locks.py          # rewrite both
    .venv/bin/python tools/image_locks.py --check  # exit 1 if either is stale
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DEV_LOCK = Path("requirements/dev.lock")
RUNTIME_LOCK = Path("requirements/image-runtime.lock")
BUILD_LOCK = Path("requirements/image-build.lock")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==")


def _applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate({"extra": ""})


def runtime_closure(pyproject: Path) -> set[str]:
    """Canonical names of the product's dependencies, transitively, extras left out."""
    project = tomllib.loads(pyproject.read_text())["project"]
    todo = [Requirement(text) for text in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in seen or not _applies(requirement):
            continue
        seen.add(name)
        todo += [Requirement(text) for text in metadata.requires(requirement.name) or []]
    return seen


def lock_blocks(lock: Path) -> dict[str, list[str]]:
    """Each pin of a `uv pip compile --generate-hashes` lock: its line and hash lines."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lock.read_text().splitlines():
        match = _PIN.match(line)
        if match:
            current = blocks.setdefault(canonicalize_name(match.group(1)), [line])
        elif current is not None and line.lstrip().startswith("--hash="):
            current.append(line)
        else:
            current = None
    return blocks


def render(names: set[str], blocks: dict[str, list[str]], what: str) -> str:
    missing = sorted(names - set(blocks))
    if missing:
        raise SystemExit(f"{DEV_LOCK} has no pin for {', '.join(missing)}: recompile it first")
    lines = [
        f"# {what}; generated from {DEV_LOCK} by tools/image_locks.py (do not edit).",
        *(line for name in sorted(names) for line in blocks[name]),
    ]
    return "\n".join(lines) + "\n"


def locks(root: Path) -> dict[Path, str]:
    """The text each image lock must have."""
    blocks = lock_blocks(root / DEV_LOCK)
    return {
        RUNTIME_LOCK: render(
            runtime_closure(root / "pyproject.toml"),
            blocks,
            "The image's runtime venv: kube-nudge's dependencies",
        ),
        BUILD_LOCK: render({"setuptools", "wheel"}, blocks, "Building the kube-nudge wheel"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a lock is stale")
    args = parser.parse_args()
    stale = []
    for path, text in locks(Path.cwd()).items():
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(path))
        else:
            path.write_text(text)
            print(path)
    if stale:
        print(f"stale: {', '.join(stale)}; run .venv/bin/python tools/image_locks.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
