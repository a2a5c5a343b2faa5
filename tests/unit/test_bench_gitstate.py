"""The benchmark refuses a dirty tree unless told, and then its page says so."""

from __future__ import annotations

import subprocess  # nosec B404 # a throwaway git repository
from pathlib import Path

import pytest
from bench import run
from bench.gitstate import TreeState, parse_status, refusal, tree_state
from bench.report import provenance


def test_status_lists_changes_but_not_a_runs_own_outputs() -> None:
    text = "\0".join([" M src/kube_nudge/x.py", "?? notes.txt", "?? bench/results/scratch-a.json",
                      " M BENCHMARKS.md", "R  new.py", "old.py", ""])  # fmt: skip
    assert parse_status(text) == ("M src/kube_nudge/x.py", "?? notes.txt", "R new.py")


def test_refusal_names_the_files_and_the_way_on() -> None:
    message = refusal(TreeState("abc1234", tuple(f"M f{n}.py" for n in range(7))))
    assert "abc1234" in message and "M f0.py" in message and "2 more" in message
    assert "BENCH_ALLOW_DIRTY=1" in message and "\n" not in message


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)  # nosec


def test_tree_state_of_a_real_checkout(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    clean = tree_state(tmp_path)
    assert clean.dirty == () and clean.label() == clean.commit
    (tmp_path / "a.py").write_text("x = 2\n")
    dirty = tree_state(tmp_path)
    assert dirty.dirty == ("M a.py",) and dirty.label() == f"{clean.commit} dirty"
    assert dirty.record() == {"commit": clean.commit, "dirty": ["M a.py"]}


def test_make_bench_refuses_a_dirty_tree(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "tree_state", lambda root: TreeState("abc1234", ("M src/x.py",)))
    monkeypatch.delenv("BENCH_ALLOW_DIRTY", raising=False)
    monkeypatch.delenv("BENCH_PEERS", raising=False)
    assert run.main() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "M src/x.py" in err and "BENCH_ALLOW_DIRTY=1" in err


def _document(**tree: object) -> dict[str, object]:
    return {"machine": {"git_commit": "abc1234"}, "tree": tree}


def test_the_page_says_prominently_when_the_tree_was_dirty() -> None:
    assert provenance(_document(commit="abc1234", dirty=[])) == []
    block = provenance(_document(commit="abc1234", dirty=["M src/x.py"]))
    assert block[0].startswith("> **Measured on a dirty tree**")
    assert "abc1234" in block[0] and "`M src/x.py`" in block[0]


def test_older_results_marked_dirty_by_their_commit_are_flagged() -> None:
    legacy = {"machine": {"git_commit": "1006fed", "git_commit_end": "1006fed+dirty"}}
    assert "changed to 1006fed+dirty" in provenance(legacy)[0]
