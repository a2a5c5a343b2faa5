"""The fault and sabotage tables of docs/reliability.md come from their committed records
(bench/results/faults.jsonl, sabotage.jsonl), and records prove one commit of the history,
clean before and after the runs, or are refused: this test holds the tables, as
tests/unit/test_bench_docfigures.py holds the benchmark figures."""

from __future__ import annotations

import json
import shutil
import subprocess  # nosec B404 # git cat-file, read-only
from pathlib import Path
from typing import Any

import pytest
from bench.gitstate import TreeState

from tests.integration import reliability_tables as tables

REPO = Path(__file__).resolve().parents[2]

SUITE = {"finished": "2026-12-01 10:00 UTC", "platform": "Linux x86_64", "cpus": 2,
         "kubernetes": "v1.37.2", "suite_seconds": 1392.0}  # fmt: skip
CLEAN = {"commit": "abc1234", "clean_before": True, "clean_after": True, **SUITE}
RUN = {"scenario": "watch expired", "seed": 7, "workloads": 51, "faults": 6, "changes": 100,
       "lost": 0, "extra_rollouts": 0, "rollouts": 300, "converge_seconds": 5.0,
       "scale": "full", **CLEAN}  # fmt: skip
LOST = "AssertionError: not converged (changes lost): ['w0']"
SABOTAGED = {"sabotage": "no-relist-on-410", "broken": "no re-list on 410",
             "scenarios": "expired", "catches": "not converged (changes lost)", "seconds": 60.0,
             "tests": [{"test": "t::a", "outcome": "failure", "message": LOST},
                       {"test": "t::b", "outcome": "failure", "message": "assert 0.0 >= 6"}],
             "scale": "test", **CLEAN}  # fmt: skip


def test_a_tree_is_clean_after_only_if_it_is_still_the_same_commit_unchanged() -> None:
    before = TreeState("abc1234")
    assert tables.tree_fields(before, TreeState("abc1234")) == {
        "commit": "abc1234", "clean_before": True, "clean_after": True}  # fmt: skip
    assert not tables.tree_fields(before, TreeState("def5678"))["clean_after"]
    assert not tables.tree_fields(before, TreeState("abc1234", ("M x",)))["clean_after"]
    assert not tables.tree_fields(TreeState("abc1234", ("M x",)), before)["clean_before"]


@pytest.mark.parametrize(
    ("records", "refused"),
    [
        ([], "holds no record"),
        ([{k: v for k, v in RUN.items() if k != "clean_before"}], "without clean_before"),
        ([RUN, {**RUN, "commit": "def5678"}], "mixes the runs of commits abc1234, def5678"),
        ([RUN, {**RUN, "clean_after": False}], "1 of 2 records ran on a tree that was not"),
        ([{**RUN, "clean_before": "yes"}], "1 of 1 records ran on a tree that was not"),
    ],
)  # fmt: skip
def test_records_that_do_not_prove_one_clean_commit_are_refused(
    records: list[dict[str, Any]], refused: str
) -> None:
    with pytest.raises(tables.Unproven, match=refused):
        tables.fault_table(records)


def test_the_fault_table_gives_each_scenario_its_totals_and_the_commit() -> None:
    block = tables.fault_table([RUN, {**RUN, "converge_seconds": 7.0, "seed": 8}])
    assert block.startswith("Run at commit abc1234, on a tree that was that commit before and "
                            "after the runs (full size)")  # fmt: skip
    assert "Kubernetes v1.37.2; `make test-faults` took 23.2 min." in block
    assert "| watch expired | 2 | 51 | 12 | 200 | 0 | 0 | 600 | 6.00, 7.00 |" in block
    assert "- watch expired: 7, 8" in block


def test_the_sabotage_table_says_whether_each_failure_was_its_own_check() -> None:
    block = tables.sabotage_table([SABOTAGED])
    assert "at `make test`'s size" in block
    assert "| `t::a` | failure, its own check | AssertionError: not converged" in block
    assert "| `t::b` | failure, another check | assert 0.0 >= 6 |" in block


def test_only_the_named_table_is_rendered(tmp_path: Path) -> None:
    (tmp_path / "bench/results").mkdir(parents=True)
    (tmp_path / tables.FAULTS).write_text(json.dumps(RUN) + "\n")
    page = (
        f"<!-- fault-table:begin {tables.FAULTS} -->\nold\n<!-- fault-table:end -->\n"
        f"<!-- sabotage-table:begin {tables.SABOTAGE} -->\nold\n<!-- sabotage-table:end -->\n"
    )
    rendered = tables.render(page, tmp_path, only="fault-table")
    assert "| watch expired | 1 |" in rendered
    assert rendered.endswith("-->\nold\n<!-- sabotage-table:end -->\n")
    with pytest.raises(FileNotFoundError):  # the sabotage table's records aren't there
        tables.render(page, tmp_path)


def test_the_tables_of_docs_reliability_are_what_their_records_give() -> None:
    text = (REPO / "docs" / "reliability.md").read_text()
    assert {m["name"] for m in tables.BLOCK.finditer(text)} == {"fault-table", "sabotage-table"}
    assert "historical" not in "".join(m["body"] for m in tables.BLOCK.finditer(text))
    assert not tables.stale(REPO), (
        "docs/reliability.md's tables differ from their records: run "
        "`PYTHONPATH=. .venv/bin/python -m tests.integration.reliability_tables`"
    )


@pytest.mark.parametrize("source", [tables.FAULTS, tables.SABOTAGE])
def test_every_committed_record_names_a_commit_of_the_history_clean_before_and_after(
    source: str,
) -> None:
    commit = tables.proven_commit(tables.load(REPO / source), source)
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run([git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],  # nosec
                           capture_output=True, check=False)  # fmt: skip
    assert known.returncode == 0, f"{source}: {commit} is not a commit of the history"


def test_a_hand_edited_figure_of_the_tables_is_caught() -> None:
    text = (REPO / "docs" / "reliability.md").read_text()
    block = next(m for m in tables.BLOCK.finditer(text) if m["name"] == "fault-table")
    row = next(line for line in block["body"].splitlines() if line.startswith("| watch expired"))
    edited = text.replace(row, row.rsplit("|", 2)[0] + "| 1.00, 1.00 |")
    assert edited != text
    assert tables.render(edited, REPO) == text
