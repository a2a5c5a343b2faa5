"""`kube-nudge annotations` and the annotation table of docs/concepts.md, both read from the
declarations of the annotation contract (the model's and each strategy's, `registry.contract`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kube_nudge.app.annotations_command import markdown_table, text_listing
from kube_nudge.app.cli import build_parser, main
from kube_nudge.app.completion_command import bash_script, describe
from kube_nudge.strategies.hot.settings import HOT_DEADLINE
from kube_nudge.strategies.registry import contract

ANNOTATIONS = contract()

REPO = Path(__file__).resolve().parents[2]


def test_the_text_lists_every_annotation_with_its_meaning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["annotations"]) == 0
    out = capsys.readouterr().out
    for annotation in ANNOTATIONS:
        assert f"  {annotation.name}" in out
    assert out.startswith("Set by you:\n")
    assert "Written by kube-nudge:" in out and "Written by the reload agent" in out
    assert "|" not in out  # not a Markdown table


def test_the_text_fits_a_narrow_terminal() -> None:
    for line in text_listing(width=60).splitlines():
        name_line = line.startswith("  ") and not line.startswith("    ")
        assert len(line) <= 60 or name_line, line


def test_markdown_has_one_row_per_annotation(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["annotations", "--output", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out == markdown_table()
    rows = out.splitlines()[2:]
    assert len(rows) == len(ANNOTATIONS)
    [deadline] = [row for row in rows if row.startswith(f"| `{HOT_DEADLINE}` |")]
    assert deadline.count(" | ") == 5
    assert "| workload | user | a duration from 5s to 1h | 2m |" in deadline


def test_an_unknown_output_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["annotations", "-o", "json"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "annotations: argument --output/-o" in err


def test_completion_offers_the_command_and_its_outputs() -> None:
    script = bash_script(describe(build_parser()))
    assert " annotations " in script.split("COMPREPLY", 2)[1]
    assert '--output|-o) COMPREPLY=($(compgen -W "text markdown"' in script


def test_the_pages_table_is_generated_from_the_declarations() -> None:
    """Fails when docs/concepts.md's table differs from the declarations: run the tool it
    names."""
    check = subprocess.run(
        [sys.executable, "tools/readme_annotations.py", "--check"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
