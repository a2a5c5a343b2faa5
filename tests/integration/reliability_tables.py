"""The tables of docs/reliability.md, generated from the records the suites commit.

``make test-faults`` (tests/integration/fault_report.py) and ``make test-sabotage``
(sabotage_report.py) write their records, one JSON line per run or per sabotage, to
bench/results/faults.jsonl and sabotage.jsonl. Every record carries the commit it ran at and
whether the tree was that commit, unchanged, before the runs (``clean_before``) and after
them (``clean_after``). The tables stand between markers naming their records::

    <!-- fault-table:begin bench/results/faults.jsonl -->
    ...generated...
    <!-- fault-table:end -->

and are only ever rendered from them: records that do not all say one commit, clean before
and after, are refused (``Unproven``), so no table names a tree its records don't prove.
``python -m tests.integration.reliability_tables --check`` (and
tests/unit/test_reliability_tables.py) fails when a table differs from its records; without
``--check`` it rewrites them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gitstate import TreeState

from kube_nudge_dev.build import chosen

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "reliability.md"
FAULTS = "bench/results/faults.jsonl"
SABOTAGE = "bench/results/sabotage.jsonl"
BLOCK = re.compile(
    r"(?P<open><!-- (?P<name>fault-table|sabotage-table):begin (?P<source>\S+\.jsonl) -->\n)"
    r"(?P<body>.*?)(?P<close><!-- (?P=name):end -->)",
    re.DOTALL,
)
#: What every record carries about the tree it ran on.
TREE_FIELDS = ("commit", "clean_before", "clean_after")

Record = dict[str, Any]


class Unproven(ValueError):
    """Records that don't prove one commit, clean before and after the runs."""


def tree_fields(before: TreeState, after: TreeState) -> Record:
    """What a record says of its tree: the commit before the runs, whether the tree was
    exactly that commit then, and whether it still was after them (same HEAD, no change)."""
    return {
        "commit": before.commit,
        "clean_before": not before.dirty,
        "clean_after": after.commit == before.commit and not after.dirty,
    }


def suite_fields(seconds: float) -> Record:
    """What a record says of the suite's run: when it finished, on what, and how long the
    whole of it took."""
    return {
        "finished": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "kubernetes": chosen().version,
        "suite_seconds": round(seconds, 1),
    }


def load(path: Path) -> list[Record]:
    """The records of a JSON-lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def proven_commit(records: list[Record], source: str) -> str:
    """The one commit ``records`` ran at, each clean before and after; else ``Unproven``."""
    if not records:
        raise Unproven(f"{source} holds no record")
    lacking = sorted({f for r in records for f in TREE_FIELDS if f not in r})
    if lacking:
        raise Unproven(f"{source}: records without {', '.join(lacking)}: run the suite again")
    commits = sorted({str(r["commit"]) for r in records})
    if len(commits) != 1:
        raise Unproven(f"{source} mixes the runs of commits {', '.join(commits)}")
    unclean = [r for r in records if r["clean_before"] is not True or r["clean_after"] is not True]
    if unclean:
        raise Unproven(
            f"{source}: {len(unclean)} of {len(records)} records ran on a tree that was not "
            f"commit {commits[0]} before or after the runs: their figures belong to no commit"
        )
    return commits[0]


def _when(record: Record) -> str:
    return (
        f"{record['finished']}, {record['platform']}, {record['cpus']} CPUs shared by the "
        f"whole control plane and the test, Kubernetes {record['kubernetes']}"
    )


def fault_table(runs: list[Record], source: str = FAULTS) -> str:
    """The fault suite's table: one row per scenario, the totals of its runs."""
    commit, last = proven_commit(runs, source), runs[-1]
    by_scenario: dict[str, list[Record]] = defaultdict(list)
    for run in runs:
        by_scenario[run["scenario"]].append(run)
    sizes = sorted({str(run["scale"]) for run in runs})
    lines = [
        f"Run at commit {commit}, on a tree that was that commit before and after the runs "
        f"({' and '.join(sizes)} size); its raw runs, each carrying that commit and both "
        f"checks, are {source}.",
        "",
        f"Latest run: {_when(last)}; `make test-faults` took {last['suite_seconds'] / 60:.1f} min.",
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
    return "\n".join(lines) + "\n"


def outcome(record: Record, test: Record) -> str:
    """A scenario's outcome, and for a failure whether it was the row's own check."""
    if test["outcome"] != "failure":
        return str(test["outcome"])
    own = record["catches"] in test["message"]
    return "failure, its own check" if own else "failure, another check"


def sabotage_table(records: list[Record], source: str = SABOTAGE) -> str:
    """The sabotage table: each switch, each of its scenarios, and how it failed."""
    commit, last = proven_commit(records, source), records[-1]
    lines = [
        f"Run at commit {commit}, on a tree that was that commit before and after the runs, "
        f"at {'full' if last['scale'] == 'full' else '`make test`'}'s size; the raw results, "
        f"each carrying that commit and both checks, are {source}. A switch counts as caught "
        "only when every scenario failed on its row's own check (the one that names its "
        "guarantee). Reproduce one row with "
        "`FAULT_SABOTAGE=NAME pytest -m faults tests/integration -k SCENARIOS`.",
        "",
        f"Latest run: {_when(last)}; `make test-sabotage` took "
        f"{last['suite_seconds'] / 60:.1f} min.",
        "",
        "| `FAULT_SABOTAGE=` | Broken on purpose | Its own check | Scenario (test) | Outcome "
        "| How it failed |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        for test in record["tests"]:
            message = test["message"].replace("|", "\\|")
            lines.append(
                f"| `{record['sabotage']}` | {record['broken']} | {record['catches']} "
                f"| `{test['test']}` | {outcome(record, test)} | {message} |"
            )
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, Callable[[list[Record], str], str]] = {
    "fault-table": fault_table,
    "sabotage-table": sabotage_table,
}


def render(
    text: str, root: Path = ROOT, only: str | None = None, records: list[Record] | None = None
) -> str:
    """``text`` with each table (or only the one named ``only``, from ``records`` if given)
    generated again from its records; ``Unproven`` if they don't prove a clean commit."""

    def block(match: re.Match[str]) -> str:
        name, source = match["name"], match["source"]
        if only is not None and name != only:
            return match.group()
        found = records if records is not None else load(root / source)
        return match["open"] + RENDERERS[name](found, source) + match["close"]

    return BLOCK.sub(block, text)


def stale(root: Path = ROOT) -> bool:
    """Whether docs/reliability.md's tables differ from their records."""
    text = (root / DOCUMENT.relative_to(ROOT)).read_text()
    return render(text, root) != text


def main(argv: list[str]) -> int:
    """``--check``: exit 1 when a table differs from its records; else rewrite them. Exit 1
    with one line when records don't prove a clean commit."""
    try:
        if argv == ["--check"]:
            if stale():
                fix = "PYTHONPATH=. .venv/bin/python -m tests.integration.reliability_tables"
                print(f"docs/reliability.md: a table differs from its records; run `{fix}`",
                      file=sys.stderr)  # fmt: skip
                return 1
            return 0
        DOCUMENT.write_text(render(DOCUMENT.read_text()))
    except Unproven as refused:
        print(f"reliability_tables: {refused}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
