"""The checkout a run measures: its commit and what in it differs from that commit.

A run on a dirty tree measures code no commit holds, so ``make bench`` refuses one unless
``BENCH_ALLOW_DIRTY=1`` is set, and then the results and the page say so.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

#: What a run itself writes: never a reason to refuse one (see bench/config.py ``outputs``).
OUTPUTS = ("bench/results/", "BENCHMARKS.md")
ALLOW_ENV = "BENCH_ALLOW_DIRTY"


@dataclass(frozen=True, slots=True)
class TreeState:
    """The short HEAD commit and the files that differ from it (status code and path)."""

    commit: str
    dirty: tuple[str, ...] = field(default=())

    def label(self) -> str:
        """``abc1234`` or ``abc1234 dirty`` (with the files listed by ``record``)."""
        return self.commit + (" dirty" if self.dirty else "")

    def record(self) -> dict[str, object]:
        """What the results file keeps."""
        return {"commit": self.commit, "dirty": list(self.dirty)}


def _git(root: Path, *args: str) -> str | None:
    # --no-optional-locks: read-only, never refreshes the index of a checkout others edit.
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(root), *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_status(text: str) -> tuple[str, ...]:
    """``git status --porcelain=v1 -z`` output as ``"XY path"`` entries, a run's own outputs
    left out. A rename's second (old) path is dropped."""
    entries, parts = [], iter(text.split("\0"))
    for part in parts:
        if len(part) < 4:
            continue
        code, path = part[:2], part[3:]
        if "R" in code or "C" in code:
            next(parts, None)
        if not path.startswith(OUTPUTS):
            entries.append(f"{code.strip()} {path}")
    return tuple(entries)


def tree_state(root: Path) -> TreeState:
    """The checkout at ``root`` now; commit ``unknown`` outside a git checkout."""
    head = (_git(root, "rev-parse", "--short", "HEAD") or "").strip() or "unknown"
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    return TreeState(head, parse_status(status or ""))


def refusal(state: TreeState, most: int = 5) -> str:
    """The one-line error for a dirty tree: which files, and how to go on."""
    files = ", ".join(state.dirty[:most]) + (
        f" and {len(state.dirty) - most} more" if len(state.dirty) > most else ""
    )
    return (
        f"the tree differs from {state.commit} ({files}): commit or stash the changes, or set "
        f"{ALLOW_ENV}=1 to measure it anyway (the results and the page then say it was dirty)"
    )


#: The checkout this module is in: where the results' commits are counted from.
CHECKOUT = Path(__file__).resolve().parents[1]


def src_changes_since(commit: str, root: Path = CHECKOUT) -> int:
    """How many commits since ``commit`` changed src/ (the product a run measured or proved):
    ``git rev-list --count COMMIT..HEAD -- src/``. ValueError when git can't count them (a
    commit not in the history, no checkout)."""
    out = _git(root, "rev-list", "--count", f"{commit}..HEAD", "--", "src/")
    if out is None or not out.strip().isdigit():
        raise ValueError(f"can't count the commits changing src/ since {commit!r} in {root}")
    return int(out.strip())


def src_lag(commit: str, behind: int, *, current: str, stale: str, what: str) -> str:
    """One sentence on how far a generated ``what`` ("this page") is behind the product:
    ``current`` when no commit since ``commit`` changed src/, else ``behind`` and ``stale``."""
    if not behind:
        return f"No commit since {commit} changed src/: {current}."
    commits = "commit" if behind == 1 else "commits"
    return (
        f"Since {commit}, {behind} {commits} changed src/ (`git rev-list --count "
        f"{commit}..HEAD -- src/`, counted when {what} was generated): {stale}."
    )
