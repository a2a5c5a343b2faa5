"""`kube-nudge wait` targets and flags (the waiting itself is in
tests/integration/test_wait_cli.py)."""

from __future__ import annotations

import pytest

from kube_nudge.app.cli import main
from kube_nudge.app.wait_command import Target, parse_target


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("configmap/app", Target("configmap", "app")),
        ("cm/app", Target("configmap", "app")),
        ("secrets/db", Target("secret", "db")),
        ("deployment/web", Target("Deployment", "web")),
        ("statefulsets/db-0", Target("StatefulSet", "db-0")),
        ("CronJob/nightly", Target("CronJob", "nightly")),
    ],
)
def test_targets(text: str, target: Target) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize(
    ("text", "says"),
    [("app", "want KIND/NAME"), ("pod/x", "unknown kind 'pod'"), ("configmap/App", "want")],
)
def test_bad_targets_exit_2_naming_them(
    text: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["wait", text, "--kubeconfig=/nonexistent"]) == 2
    err = capsys.readouterr().err
    assert says in err and repr(text) in err and err.count("\n") == 1


def test_a_bad_timeout_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["wait", "configmap/app", "--timeout=soon"]) == 2
    assert 'invalid duration "soon"' in capsys.readouterr().err
