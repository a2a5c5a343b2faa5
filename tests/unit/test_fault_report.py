"""The fault suite's report: the tree checked before and after the runs, every run stamped
with its commit and both checks, and never anything written from a tree that moved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.gitstate import TreeState

from tests.integration import fault_report

RUN = {
    "scenario": "apiserver-restart", "workloads": 40, "faults": 2, "changes": 90, "lost": 0,
    "extra_rollouts": 0, "rollouts": 61, "converge_seconds": 1.5, "seed": 7, "scale": "full",
}  # fmt: skip
PAGE = (
    "before\n<!-- fault-table:begin bench/results/faults.jsonl -->\nold\n"
    "<!-- fault-table:end -->\nafter\n"
)


def _trees(monkeypatch: pytest.MonkeyPatch, *states: TreeState) -> None:
    """``tree_state`` answers ``states`` in turn."""
    answers: Iterator[TreeState] = iter(states)
    monkeypatch.setattr(fault_report, "tree_state", lambda _root: next(answers))


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The state, the runs, the page and the raw records, in ``tmp_path``."""
    paths = {name: tmp_path / name for name in ("state.json", "runs.jsonl", "page.md", "raw")}
    paths["runs.jsonl"].write_text(json.dumps(RUN) + "\n" + json.dumps(RUN) + "\n")
    paths["page.md"].write_text(PAGE)
    monkeypatch.setattr(fault_report, "RAW", paths["raw"])
    return paths


def _end(files: dict[str, Path]) -> int:
    return fault_report.main(
        ["end", *(str(files[name]) for name in ("state.json", "runs.jsonl", "page.md"))]
    )


def test_each_run_carries_its_commit_and_the_checks_before_and_after(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _trees(monkeypatch, TreeState("abc1234"), TreeState("abc1234"))
    assert fault_report.main(["begin", str(files["state.json"])]) == 0
    assert _end(files) == 0
    records = [json.loads(line) for line in files["raw"].read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        assert record["commit"] == "abc1234"
        assert record["clean_before"] is True and record["clean_after"] is True
        assert record["suite_seconds"] >= 0 and record["kubernetes"].startswith("v")
    page = files["page.md"].read_text()
    assert page.startswith("before\n<!-- fault-table:begin bench/results/faults.jsonl -->\n")
    assert "Run at commit abc1234, on a tree that was that commit before and after" in page
    assert "| apiserver-restart | 2 | 40 | 4 | 180 | 0 | 0 | 122 | 1.50, 1.50 |" in page


def test_a_dirty_tree_is_refused_before_any_run(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _trees(monkeypatch, TreeState("abc1234", ("M src/x.py",)))
    assert fault_report.main(["begin", str(files["state.json"])]) == 1
    assert not files["state.json"].exists()


@pytest.mark.parametrize(
    "after", [TreeState("abc1234", ("M src/x.py",)), TreeState("def5678")], ids=["dirty", "moved"]
)
def test_a_tree_that_changed_during_the_runs_writes_neither_page_nor_records(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, after: TreeState
) -> None:
    _trees(monkeypatch, TreeState("abc1234"), after)
    assert fault_report.main(["begin", str(files["state.json"])]) == 0
    assert _end(files) == 1
    assert files["page.md"].read_text() == PAGE and not files["raw"].exists()


def test_a_wrong_call_says_how_to_call_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert fault_report.main(["runs.jsonl", "60", "page.md"]) == 2
    assert "fault_report begin STATE.json" in capsys.readouterr().err
