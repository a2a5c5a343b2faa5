"""The fault suite's report: labelled with its commit, and never from a dirty tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.gitstate import TreeState

from tests.integration import fault_report

RUN = {
    "scenario": "apiserver-restart", "workloads": 40, "faults": 2, "changes": 90, "lost": 0,
    "extra_rollouts": 0, "rollouts": 61, "converge_seconds": 1.5, "seed": 7,
}  # fmt: skip


def test_the_block_is_labelled_with_the_commit_it_ran_at() -> None:
    block = fault_report.table([RUN, RUN], 600.0, TreeState("abc1234"))
    assert block.startswith("<!-- historical: abc1234 -->\nRun at commit abc1234, a clean tree")
    assert block.endswith("<!-- /historical -->")
    assert "| apiserver-restart | 2 | 40 | 4 | 180 | 0 | 0 | 122 | 1.50, 1.50 |" in block


def test_a_dirty_tree_writes_neither_the_page_nor_the_raw_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "reliability.md"
    page.write_text(f"{fault_report.BEGIN}\nold\n{fault_report.END}\n")
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"scenario": "x"}\n')
    raw = tmp_path / "faults.jsonl"
    monkeypatch.setattr(fault_report, "RAW", raw)
    monkeypatch.setattr(fault_report, "tree_state", lambda _root: TreeState("abc1234", ("M x",)))
    assert fault_report.main([str(runs), "60", str(page)]) == 1
    assert "old" in page.read_text() and not raw.exists()
