"""``kubectl_complete-nudge``: what kubectl (1.26+) shows for ``kubectl nudge <TAB>``."""

from __future__ import annotations

import pytest

from kube_nudge.app.cli import build_parser
from kube_nudge.app.completion_command import describe
from kube_nudge.app.plugin_completion import FILES, NO_FILES, candidates, main

COMMANDS = describe(build_parser())


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["pl"], (["plan"], NO_FILES)),
        (["plan", "--ba"], (["--base"], NO_FILES)),
        (["plan", "-o", ""], (["table", "wide", "json", "markdown"], NO_FILES)),
        (["plan", "-f", ""], ([], FILES)),
        (["plan", "--base", "di"], ([], FILES)),
        (["wait", "dep"], (["deployment/"], NO_FILES)),
        (["nosuch", ""], ([], NO_FILES)),
    ],
)
def test_candidates(words: list[str], expected: tuple[list[str], int]) -> None:
    assert candidates(words, COMMANDS) == expected


def test_every_command_completes_from_nothing() -> None:
    found, directive = candidates([""], COMMANDS)
    assert {"plan", "status", "wait", "run"} <= set(found) and directive == NO_FILES


def test_the_output_ends_with_cobras_directive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-o", "ma"]) == 0
    assert capsys.readouterr().out.splitlines() == ["markdown", ":4"]
