"""Benchmark figures in README.md and docs/ come from committed results files, never by hand."""

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

REPO = Path(__file__).resolve().parents[2]
#: A measured figure: a number with a unit of time, memory or ratio.
FIGURE = re.compile(r"\b\d[\d,]*(?:\.\d+)? ?(?:ms|s|MiB|MB|x)\b")


def _blocks(text: str) -> list[re.Match[str]]:
    return list(docfigures.BLOCK.finditer(text))


def test_every_block_matches_its_results_file() -> None:
    assert docfigures.stale(REPO) == []


def test_the_readme_quotes_the_results_it_names() -> None:
    names = {m["name"] for m in _blocks((REPO / "README.md").read_text())}
    assert {"latest-summary", "agent", "agent-node", "snapshot-cost"} <= names


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
    text = (REPO / "README.md").read_text()
    block = next(b for b in _blocks(text) if b["name"] == "agent")
    edited = text[: block.start("body")] + "p50 5.2 ms, p99 11.2 ms\n" + text[block.end("body") :]
    assert docfigures.render(edited, REPO) == text


def test_the_benchmarks_section_has_no_figure_outside_the_blocks() -> None:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Benchmarks\n") :]
    section = section[: section.index("\n## ", 1)]
    outside = docfigures.BLOCK.sub("", section)
    assert FIGURE.findall(outside) == []


@pytest.mark.parametrize("lie", ["5.2 ms", "11.2 ms", "24.4 MB", "1.8x to 1.4x", "446 s"])
def test_figures_from_unrecorded_runs_are_gone(lie: str) -> None:
    for path in docfigures.documents(REPO):
        assert lie not in docfigures.BLOCK.sub("", path.read_text()), path.name


@pytest.mark.parametrize("name", ["latest", "agent", "agent-node", "scale", "profile"])
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


def test_a_newer_companion_run_stands_in_for_its_scenario(tmp_path: Path) -> None:
    full = _results("2026-11-23 18:41 UTC", 23.9)
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-24 02:15 UTC", 24.5)))
    merged = companions.with_companions(full, tmp_path)
    assert merged["results"]["kube-nudge"]["agent"]["runs"] == [{"rss_mib": 24.5}]
    assert "agent" in merged["companions"] and not merged["companions"]["agent"]["dirty"]
    (tmp_path / "agent.json").write_text(json.dumps(_results("2026-11-20 10:00 UTC", 30.0)))
    older = companions.with_companions(full, tmp_path)
    assert older["results"] == full["results"] and older["companions"] == {}
