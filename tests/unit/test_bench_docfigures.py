"""Benchmark figures in README.md and docs/ come from committed results files of a clean tree,
never by hand (figures outside the blocks: tests/unit/test_doc_figures.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess  # nosec B404 # git ls-files, read-only
from pathlib import Path
from typing import Any

import pytest
from bench import companions, docfigures, report
from bench.config import outputs
from bench.gitstate import src_changes_since

REPO = Path(__file__).resolve().parents[2]


def _blocks(text: str) -> list[re.Match[str]]:
    return list(docfigures.BLOCK.finditer(text))


def test_every_block_matches_its_results_file() -> None:
    assert docfigures.stale(REPO) == []


def test_the_pages_quote_the_results_they_name() -> None:
    names = {m["name"] for path in docfigures.documents(REPO) for m in _blocks(path.read_text())}
    assert {"latest-summary", "agent", "agent-node", "snapshot-cost", "http-cost",
            "analysis"} <= names  # fmt: skip


def test_every_block_names_a_committed_results_file() -> None:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run([git, "-C", str(REPO), "ls-files", "bench/results"],  # nosec
                            capture_output=True, text=True, check=True)  # fmt: skip
    tracked = set(listed.stdout.split())
    for path in docfigures.documents(REPO):
        for block in _blocks(path.read_text()):
            assert block["source"] in tracked, f"{path.name}: {block['source']} is not committed"


def test_a_hand_edited_figure_is_caught() -> None:
    text = (REPO / "docs" / "reload.md").read_text()
    block = next(b for b in _blocks(text) if b["name"] == "agent")
    edited = text[: block.start("body")] + "p50 5.2 ms, p99 11.2 ms\n" + text[block.end("body") :]
    assert docfigures.render(edited, REPO) == text


@pytest.mark.parametrize("lie", ["5.2 ms", "11.2 ms", "24.4 MB", "1.8x to 1.4x", "446 s"])
def test_figures_from_unrecorded_runs_are_gone(lie: str) -> None:
    for path in docfigures.documents(REPO):
        assert lie not in docfigures.BLOCK.sub("", path.read_text()), path.name


@pytest.mark.parametrize("name", ["latest", "agent", "agent-node", "scale", "writers", "analysis"])
def test_each_committed_page_is_what_its_results_file_gives(name: str) -> None:
    out = outputs(name)
    assert out.page.read_text() == report.markdown(companions.load(out.data), out), (
        f"{out.page.name} differs from {out.data.name}: regenerate it, never edit it by hand"
    )


def _results(generated: str, rss: float) -> dict[str, Any]:
    summary = {"rss_mib": {"median": rss, "min": rss, "max": rss}}
    return {
        "generated": generated,
        "machine": {"git_commit": "abc1234"},
        "sizes": {"repeat": 1},
        "command": "BENCH_OUTPUT=agent make bench",
        "results": {"kube-nudge": {"agent": {"runs": [{"rss_mib": rss}], "summary": summary}}},
    }


def _block(name: str, source: str) -> str:
    return f"<!-- bench:{name} {source} -->\nold\n<!-- /bench:{name} -->\n"


def test_a_results_file_of_a_dirty_tree_is_refused(tmp_path: Path) -> None:
    """Its figures belong to no commit: no page may quote them, and nothing is rewritten."""
    document = json.loads((REPO / "bench/results/latest.json").read_text())
    (tmp_path / "bench/results").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(_block("latest-summary", "bench/results/clean.json"))
    (tmp_path / "bench/results/clean.json").write_text(json.dumps(document))
    commit = document["tree"]["commit"]
    assert f"kube-nudge at commit {commit}" in docfigures.render(page.read_text(), tmp_path)
    document["tree"]["dirty"] = ["src/kube_nudge/model/decide.py"]
    (tmp_path / "bench/results/dirty.json").write_text(json.dumps(document))
    page.write_text(page.read_text() + _block("latest-summary", "bench/results/dirty.json"))
    before = page.read_text()
    refused = re.escape("bench/results/dirty.json measured on a dirty tree")
    with pytest.raises(docfigures.DirtySource, match=refused):
        docfigures.update(tmp_path)
    assert page.read_text() == before  # the clean block was not rewritten either
    assert docfigures.main(["--check"]) == 0  # the repository's own pages: every source clean


def test_the_committed_agent_run_is_of_a_clean_tree() -> None:
    """bench/results/agent.json (once measured at 46cde87+dirty, re-run at 5600b4a) stands in
    for the agent scenario on the latest page: it must be a commit's."""
    document = json.loads((REPO / "bench" / "results" / "agent.json").read_text())
    assert document["tree"]["dirty"] == [] and not companions.dirty(document)


def test_a_dirty_companion_standing_in_on_the_latest_page_is_refused(tmp_path: Path) -> None:
    full = _results("2026-11-23 18:41 UTC", 23.9)
    companion = _results("2026-11-24 02:15 UTC", 24.5)
    companion["tree"] = {"commit": "abc1234", "dirty": ["agent/agent.py"]}
    (tmp_path / "agent.json").write_text(json.dumps(companion))
    (tmp_path / "latest.json").write_text(json.dumps(full))
    refused = re.escape("its companion bench/results/agent.json")
    with pytest.raises(docfigures.DirtySource, match=refused):
        docfigures.render(_block("agent", "latest.json"), tmp_path)


def test_a_newer_companion_run_stands_in_for_its_scenario(tmp_path: Path) -> None:
    full = _results("2026-11-23 18:41 UTC", 23.9)
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-24 02:15 UTC", 24.5)))
    merged = companions.with_companions(full, tmp_path)
    assert merged["results"]["kube-nudge"]["agent"]["runs"] == [{"rss_mib": 24.5}]
    assert "agent" in merged["companions"] and not merged["companions"]["agent"]["dirty"]
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-20 10:00 UTC", 30.0)))
    older = companions.with_companions(full, tmp_path)
    assert older["results"] == full["results"] and older["companions"] == {}


def test_a_companion_of_some_tools_keeps_the_others_rows_and_says_so(tmp_path: Path) -> None:
    full = _results("2026-11-23 18:41 UTC", 23.9)
    full["results"]["reloader"] = {"agent": {"runs": [{"rss_mib": 40.0}]}}
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-24 02:15 UTC", 24.5)))
    merged = companions.with_companions(full, tmp_path)
    assert merged["results"]["kube-nudge"]["agent"]["runs"] == [{"rss_mib": 24.5}]
    assert merged["results"]["reloader"]["agent"]["runs"] == [{"rss_mib": 40.0}]
    said = companions.intro("agent", merged["companions"]["agent"])
    assert said.endswith("The rows of reloader are the full run's.")


def test_an_older_companion_stands_in_for_a_scenario_the_full_run_skipped(tmp_path: Path) -> None:
    full = _results("2026-11-27 18:00 UTC", 23.9)
    full["results"]["kube-nudge"] = {"latency": {"runs": []}}
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-24 02:15 UTC", 24.5)))
    merged = companions.with_companions(full, tmp_path)
    assert merged["results"]["kube-nudge"]["agent"]["runs"] == [{"rss_mib": 24.5}]
    said = companions.intro("agent", merged["companions"]["agent"])
    assert "the full run above did not run this scenario" in said


#: Blocks that still give a date without the commit, each with why; a stale entry fails.
DATED_ONLY = {
    ("reload.md", "agent"): "docs/reload.md was being rewritten on another branch",
    ("reload.md", "agent-node"): "docs/reload.md was being rewritten on another branch",
}


def test_a_block_says_the_commit_its_figures_come_from() -> None:
    """A date is not a run's name: every block of the pages names the commit measured."""
    dated = set()
    for path in docfigures.documents(REPO):
        for block in _blocks(path.read_text()):
            if not re.search(r"commit [0-9a-f]{7}", block["body"]):
                dated.add((path.name, block["name"]))
    assert dated == set(DATED_ONLY)


def test_the_old_profile_is_quoted_nowhere() -> None:
    """The CPU profile measured at d5c3568 (0.65 ms per write) was dropped rather than shown
    beside the full run's figures: no page quotes it, and no results file of it is left."""
    assert not (REPO / "bench" / "results" / "profile.json").exists()
    for path in docfigures.documents(REPO):
        text = path.read_text()
        assert "bench:cpu-profile" not in text and "0.65 ms per write" not in text, path.name


def test_a_summary_row_from_a_companion_run_names_it() -> None:
    merged = json.loads((REPO / "bench/results/latest.json").read_text())
    merged["companions"] = {
        "flapping": {"generated": "2099-01-01 00:00 UTC", "commit": "abc1234",
                     "kubernetes": "v1.99.0", "kept": ["reloader", "wave"]}
    }  # fmt: skip
    rows = docfigures.latest_summary(merged).splitlines()
    [row] = [line for line in rows if line.startswith("| Rollouts from a flapping")]
    assert "`flapping` run 2099-01-01 00:00 UTC, commit abc1234 on Kubernetes v1.99.0" in row
    assert "(reloader, wave: the full run)" in row
    [latency] = [line for line in rows if line.startswith("| Reaction latency p50 / p99, `--")]
    assert "commit" not in latency


LAG = re.compile(
    r"^(No commit since (?P<none>[0-9a-f]{7,}) changed src/: these figures measure the product "
    r"as it is\.|Since (?P<commit>[0-9a-f]{7,}), (?P<behind>\d+) commits? changed src/ "
    r"\(`git rev-list --count (?P=commit)\.\.HEAD -- src/`, counted when this block was "
    r"generated\): these figures are that far behind the product; `make bench(-http)?` "
    r"measures them again\.)$"
)


def test_every_block_ends_with_how_many_src_commits_it_is_behind() -> None:
    """As the compatibility page says of its proof: the count is git's, at HEAD, from the
    commit the block's figures were measured at."""
    seen = 0
    for path in docfigures.documents(REPO):
        for block in _blocks(path.read_text()):
            last = block["body"].rstrip("\n").splitlines()[-1]
            found = LAG.match(last)
            assert found, f"{path.name} {block['name']}: ends with {last!r}"
            commit = found["commit"] or found["none"]
            assert int(found["behind"] or 0) == src_changes_since(commit), (path.name, commit)
            document = json.loads((REPO / block["source"]).read_text())
            if block["source"].endswith("latest.json"):
                document = companions.with_companions(document, REPO / "bench/results")
            assert commit == docfigures.figures_commit(block["name"], document)
            seen += 1
    assert seen >= 6


@pytest.mark.parametrize(("behind", "said"), [
    (0, "No commit since abc1234 changed src/: these figures measure the product as it is."),
    (1, "Since abc1234, 1 commit changed src/ (`git rev-list --count abc1234..HEAD -- src/`"),
    (12, "Since abc1234, 12 commits changed src/"),
])  # fmt: skip
def test_a_block_is_rendered_with_the_count_it_is_given(
    tmp_path: Path, behind: int, said: str
) -> None:
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-24 02:15 UTC", 24.5)))
    asked: list[str] = []

    def count(commit: str) -> int:
        asked.append(commit)
        return behind

    rendered = docfigures.render(_block("agent-node", "agent.json"), tmp_path, count)
    assert asked == ["abc1234"]
    last = rendered.splitlines()[-2]
    assert last.startswith(said) and LAG.match(last), last


def test_a_table_ends_before_the_count() -> None:
    """A sentence right under a table's last row would be read as one more row."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    block = next(b for b in _blocks(text) if b["name"] == "latest-summary")
    lines = block["body"].rstrip("\n").splitlines()
    assert lines[-2] == "" and lines[-3].startswith("|")


def test_src_changes_since_counts_as_git_does() -> None:
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    assert src_changes_since("HEAD") == 0
    last = subprocess.run([git, "-C", str(REPO), "log", "--format=%h", "-1", "--", "src/"],  # nosec
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    counted = subprocess.run(  # nosec
        [git, "-C", str(REPO), "rev-list", "--count", f"{last}~1..HEAD", "--", "src/"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert src_changes_since(f"{last}~1") == int(counted) >= 1
    with pytest.raises(ValueError, match="can't count the commits changing src/ since 'fffffff'"):
        src_changes_since("fffffff")
