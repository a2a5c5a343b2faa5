"""Run each sabotage of tests/integration/sabotage.py against its fault scenarios and record
how they failed: bench/results/sabotage.jsonl and the table between the ``sabotage-table``
markers of docs/reliability.md, labelled with the commit. A sabotage its scenarios don't
catch (one of them passes) makes it exit 1. Like the fault report it refuses a dirty tree,
before running anything. Usage: ``python -m tests.integration.sabotage_report
docs/reliability.md [NAME ...]`` (``make test-sabotage``; names default to every sabotage).
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

from kube_nudge_dev.documents import replace_between
from tests.integration.sabotage import ENV, SABOTAGES, Sabotage

BEGIN, END = "<!-- sabotage-table:begin -->", "<!-- sabotage-table:end -->"
ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "bench" / "results" / "sabotage.jsonl"
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


def table(records: list[dict[str, Any]], tree: TreeState) -> str:
    """The generated block, labelled with the commit (docs/contributing.md)."""
    lines = [
        f"<!-- historical: {tree.commit} -->",
        f"Run at commit {tree.commit}, a clean tree, at `make test`'s size; the raw results "
        "are bench/results/sabotage.jsonl. Reproduce one row with "
        "`FAULT_SABOTAGE=NAME pytest -m faults tests/integration -k SCENARIOS`.",
        "",
        "| `FAULT_SABOTAGE=` | Broken on purpose | Scenario (test) | Outcome | How it failed |",
        "|---|---|---|---|---|",
    ]
    for record in records:
        for test in record["tests"]:
            message = test["message"].replace("|", "\\|")
            lines.append(
                f"| `{record['sabotage']}` | {record['broken']} | `{test['test']}` "
                f"| {test['outcome']} | {message} |"
            )
    lines.append("<!-- /historical -->")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``DOCUMENT [NAME ...]``: run, record, rewrite DOCUMENT's table."""
    doc_path, names = Path(argv[0]), argv[1:] or list(SABOTAGES)
    unknown = [name for name in names if name not in SABOTAGES]
    if unknown:
        print(
            f"unknown sabotage {unknown[0]!r}: use one of {', '.join(SABOTAGES)}", file=sys.stderr
        )
        return 2
    tree = tree_state(ROOT)
    if tree.dirty:
        print(f"refused: the tree differs from {tree.commit} ({', '.join(tree.dirty[:5])}); "
              "commit or stash the changes first", file=sys.stderr)  # fmt: skip
        return 1
    BUILD.mkdir(exist_ok=True)
    records = [run(name, SABOTAGES[name]) for name in names]
    RAW.write_text("".join(json.dumps({**r, "commit": tree.commit}) + "\n" for r in records))
    doc_path.write_text(replace_between(doc_path.read_text(), BEGIN, END, table(records, tree)))
    missed = [r["sabotage"] for r in records if not caught(r)]
    if missed:
        print(f"not caught by their scenarios: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
