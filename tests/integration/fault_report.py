"""Record the fault suite's runs and write their table into docs/reliability.md.

``make test-faults`` calls ``begin`` before its first run: it refuses a dirty tree (a run
measures code no commit holds) and notes the commit and the time. The fault scenarios append
one JSON line per run to ``$FAULT_REPORT``. After the last run, ``end`` takes the tree again:
if it is no longer that commit, unchanged, it refuses and leaves everything as it was; else
it stamps every run with the commit, both checks and the suite's facts
(tests/integration/reliability_tables.py), writes them to bench/results/faults.jsonl, and
generates the table between the ``fault-table`` markers from those records. Usage: see
``USAGE``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.gitstate import TreeState, tree_state

from tests.integration.reliability_tables import (
    FAULTS,
    Record,
    load,
    render,
    suite_fields,
    tree_fields,
)

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / FAULTS
USAGE = """usage:
  python -m tests.integration.fault_report begin STATE.json
  python -m tests.integration.fault_report end STATE.json RUNS.jsonl docs/reliability.md"""


def _refusal(tree: TreeState, since: str = "") -> str:
    files = ", ".join(tree.dirty[:5]) or "no file changed"
    moved = f" (HEAD moved from {since})" if since and since != tree.commit else ""
    return f"the tree differs from {since or tree.commit}{moved}: {files}"


def begin(state_path: Path) -> int:
    """Refuse a dirty tree before any run; else note its commit and the time."""
    tree = tree_state(ROOT)
    if tree.dirty:
        print(f"test-faults refused before running: {_refusal(tree)}; commit or stash the "
              "changes and run `make test-faults` again", file=sys.stderr)  # fmt: skip
        return 1
    state_path.write_text(json.dumps({"commit": tree.commit, "started": time.time()}))
    return 0


def stamp(runs: list[Record], before: TreeState, after: TreeState, seconds: float) -> list[Record]:
    """Each run with what it says of its tree and of the suite's run."""
    shared = {**tree_fields(before, after), **suite_fields(seconds)}
    return [{**run, **shared} for run in runs]


def end(state_path: Path, runs_path: Path, doc_path: Path) -> int:
    """Stamp the runs, write them and their table; refuse a tree that changed meanwhile."""
    state = json.loads(state_path.read_text())
    runs = load(runs_path)
    if not runs:
        print(f"no fault runs in {runs_path}", file=sys.stderr)
        return 1
    before, after = TreeState(state["commit"]), tree_state(ROOT)
    if after != before:
        why = _refusal(after, before.commit)
        print(f"left {doc_path} and {FAULTS} as they were: after the runs {why}", file=sys.stderr)
        return 1
    stamped = stamp(runs, before, after, time.time() - state["started"])
    # Rendered before anything is written: records that don't prove their commit are refused.
    page = render(doc_path.read_text(), only="fault-table", records=stamped)
    RAW.write_text("".join(json.dumps(run) + "\n" for run in stamped))
    doc_path.write_text(page)
    return 0


def main(argv: list[str]) -> int:
    """``begin STATE`` or ``end STATE RUNS DOCUMENT``."""
    if argv[:1] == ["begin"] and len(argv) == 2:
        return begin(Path(argv[1]))
    if argv[:1] == ["end"] and len(argv) == 4:
        return end(Path(argv[1]), Path(argv[2]), Path(argv[3]))
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
