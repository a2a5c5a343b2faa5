"""Write the fault suite's figures into docs/reliability.md.

The fault scenarios append one JSON line per run to ``$FAULT_REPORT``; this replaces the
table between the ``fault-table`` markers of the document with their totals, labelled with
the commit it ran at, and commits the raw runs beside the benchmarks' results
(bench/results/faults.jsonl). A dirty tree measures code no commit holds: the report refuses
it and leaves both files as they were. Usage:
``python -m tests.integration.fault_report RUNS.jsonl WALL_SECONDS docs/reliability.md``
(``make test-faults`` does it).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gitstate import TreeState, tree_state

from kube_nudge_dev.documents import replace_between

BEGIN, END = "<!-- fault-table:begin -->", "<!-- fault-table:end -->"
ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "bench" / "results" / "faults.jsonl"


def table(runs: list[dict[str, Any]], wall_seconds: float, tree: TreeState) -> str:
    """The generated block: the commit (as a historical label, docs/contributing.md), when
    and where it ran, and one row per scenario."""
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_scenario[run["scenario"]].append(run)
    lines = [
        f"<!-- historical: {tree.commit} -->",
        f"Run at commit {tree.commit}, a clean tree; its raw runs are bench/results/faults.jsonl.",
        "",
        f"Latest run: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.system()} "
        f"{platform.machine()}, {os.cpu_count()} CPUs shared by the whole control plane and "
        f"the test; `make test-faults` took {wall_seconds / 60:.1f} min.",
        "",
        "| Scenario | Runs | Workloads | Faults injected | Changes made | Changes lost "
        "| Extra rollouts | Rollouts | Converge s (median, max) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for scenario, rows in by_scenario.items():
        seconds = [row["converge_seconds"] for row in rows]
        lines.append(
            f"| {scenario} | {len(rows)} | {rows[0]['workloads']} "
            f"| {sum(r['faults'] for r in rows)} | {sum(r['changes'] for r in rows)} "
            f"| {sum(r['lost'] for r in rows)} | {sum(r['extra_rollouts'] for r in rows)} "
            f"| {sum(r['rollouts'] for r in rows)} "
            f"| {statistics.median(seconds):.2f}, {max(seconds):.2f} |"
        )
    lines += ["", "Seeds (replay one with `FAULT_SEED=N`):"]
    for scenario, rows in by_scenario.items():
        lines.append(f"- {scenario}: {', '.join(str(row['seed']) for row in rows)}")
    lines.append("<!-- /historical -->")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``RUNS.jsonl WALL_SECONDS DOCUMENT``: rewrite DOCUMENT's table in place."""
    runs_path, wall, doc_path = Path(argv[0]), float(argv[1]), Path(argv[2])
    text = runs_path.read_text()
    runs = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not runs:
        print(f"no fault runs in {runs_path}", file=sys.stderr)
        return 1
    tree = tree_state(ROOT)
    if tree.dirty:
        files = ", ".join(tree.dirty[:5])
        why = f"the tree differs from {tree.commit} ({files})"
        fix = "commit or stash the changes and run `make test-faults` again"
        print(f"left {doc_path} as it was: {why}; {fix}", file=sys.stderr)
        return 1
    block = table(runs, wall, tree)
    doc_path.write_text(replace_between(doc_path.read_text(), BEGIN, END, block))
    RAW.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
