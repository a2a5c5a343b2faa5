"""Run each sabotage of tests/integration/sabotage.py against its fault scenarios and record
how they failed: bench/results/sabotage.jsonl, and the table between the ``sabotage-table``
markers of docs/reliability.md generated from it (tests/integration/reliability_tables.py).
A sabotage its scenarios don't catch on its row's own check makes it exit 1. It refuses a
dirty tree before running anything, and after the runs refuses to write when the tree is no
longer that commit, unchanged; each record carries the commit and both checks. Usage:
``python -m tests.integration.sabotage_report docs/reliability.md [NAME ...]`` (``make
test-sabotage``; names default to every sabotage, and only all of them rewrite the table: a
subset writes build/sabotage.jsonl).
"""

from __future__ import annotations

import json
import os
import subprocess  # nosec B404 # runs pytest on the fault scenarios
import sys
import time
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element  # nosec B405 # the type only; parsed by defusedxml

from bench.gitstate import TreeState, tree_state
from defusedxml import ElementTree  # type: ignore[import-untyped]  # no stubs published

from tests.integration.reliability_tables import (
    SABOTAGE,
    Record,
    render,
    suite_fields,
    tree_fields,
)
from tests.integration.sabotage import ENV, SABOTAGES, Sabotage

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / SABOTAGE
BUILD = ROOT / "build"


def run(name: str, sabotage: Sabotage) -> dict[str, Any]:
    """Run ``sabotage``'s scenarios with it switched on; each test's outcome and first line."""
    junit = BUILD / f"sabotage-{name}.xml"
    junit.unlink(missing_ok=True)
    started = time.monotonic()
    subprocess.run(  # nosec B603 # this interpreter's pytest, argv from SABOTAGES
        [sys.executable, "-m", "pytest", "-q", "-m", "faults", "tests/integration",
         "-k", sabotage.scenarios, f"--junitxml={junit}"],
        cwd=ROOT, env={**os.environ, ENV: name}, check=False,
    )  # fmt: skip
    cases = ElementTree.parse(junit).iter("testcase")
    tests = [_outcome(case) for case in cases]
    return {"sabotage": name, "broken": sabotage.broken, "scenarios": sabotage.scenarios,
            "catches": sabotage.catches, "seconds": round(time.monotonic() - started, 1),
            "tests": tests}  # fmt: skip


def _outcome(case: Element) -> dict[str, str]:
    test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
    for tag in ("failure", "error", "skipped"):
        found = case.find(tag)
        if found is not None:
            first = (found.get("message") or "").splitlines()[0:1] or [""]
            return {"test": test, "outcome": tag, "message": first[0][:160]}
    return {"test": test, "outcome": "passed", "message": ""}


def caught(record: dict[str, Any]) -> bool:
    """Every scenario of the sabotage failed in its own body, on the check of its row's
    guarantee (``catches``): none passed or was skipped, a setup or teardown error (a
    harness that could not start) proves nothing, and neither does a failure of another
    check, which would have failed before the guarantee was ever looked at."""
    tests = record["tests"]
    return bool(tests) and all(
        t["outcome"] == "failure" and record["catches"] in t["message"] for t in tests
    )


def stamp(
    records: list[Record], before: TreeState, after: TreeState, seconds: float
) -> list[Record]:
    """Each sabotage's record with what it says of its tree, its size and the suite's run."""
    scale = "full" if os.environ.get("FAULT_SCALE", "") == "full" else "test"
    shared = {**tree_fields(before, after), "scale": scale, **suite_fields(seconds)}
    return [{**record, **shared} for record in records]


def write(records: list[Record], doc_path: Path, every: bool) -> None:
    """Every sabotage's records: to bench/results/sabotage.jsonl and the page's table (both
    rendered first, so records that don't prove their commit change nothing); a subset's
    only to build/sabotage.jsonl, never standing in for the whole table."""
    lines = "".join(json.dumps(record) + "\n" for record in records)
    if not every:
        (BUILD / "sabotage.jsonl").write_text(lines)
        print(f"a subset of the sabotages: wrote {BUILD / 'sabotage.jsonl'} only", file=sys.stderr)
        return
    page = render(doc_path.read_text(), only="sabotage-table", records=records)
    RAW.write_text(lines)
    doc_path.write_text(page)


def main(argv: list[str]) -> int:
    """``DOCUMENT [NAME ...]``: run, record, rewrite DOCUMENT's table."""
    doc_path, names = Path(argv[0]), argv[1:] or list(SABOTAGES)
    unknown = [name for name in names if name not in SABOTAGES]
    if unknown:
        print(
            f"unknown sabotage {unknown[0]!r}: use one of {', '.join(SABOTAGES)}", file=sys.stderr
        )
        return 2
    before = tree_state(ROOT)
    if before.dirty:
        print(f"refused: the tree differs from {before.commit} ({', '.join(before.dirty[:5])}); "
              "commit or stash the changes first", file=sys.stderr)  # fmt: skip
        return 1
    BUILD.mkdir(exist_ok=True)
    started = time.monotonic()
    records = [run(name, SABOTAGES[name]) for name in names]
    after = tree_state(ROOT)
    if after != before:
        print(f"left {doc_path} and {SABOTAGE} as they were: the tree changed during the "
              f"runs ({after.commit}: {', '.join(after.dirty[:5])})", file=sys.stderr)  # fmt: skip
        return 1
    stamped = stamp(records, before, after, time.monotonic() - started)
    write(stamped, doc_path, every=names == list(SABOTAGES))
    missed = [r["sabotage"] for r in stamped if not caught(r)]
    if missed:
        print(f"not caught by their own check: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
