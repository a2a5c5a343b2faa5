"""docs/plan-in-ci.md's steps, run as a CI job runs them: on two commits of the small
example repository in tests/examples/pr-check, the documented shell block renders both
revisions, plans offline and leaves the markdown comment the page shows; docs/cli.md's
table is the real one of the same example."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kube_nudge.app.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "plan-in-ci.md"
CLI = REPO / "docs" / "cli.md"
EXAMPLE = REPO / "tests" / "examples" / "pr-check"
_STEPS = re.compile(r"<!-- pr-check:steps -->\n```sh\n(.*?)```\n<!-- /pr-check:steps -->", re.S)


def block(page: Path, name: str) -> str:
    """The fenced block between ``<!-- name -->`` and ``<!-- /name -->`` of ``page``."""
    found = re.search(
        rf"<!-- {name} -->\n```[a-z]*\n(.*?)```\n<!-- /{name} -->", page.read_text(), re.S
    )
    assert found, f"{page.name} lost its block {name}"
    return found.group(1)


def steps() -> str:
    """The shell block the page says CI runs."""
    found = _STEPS.search(PAGE.read_text())
    assert found, "docs/plan-in-ci.md lost its marked steps"
    return found.group(1)


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=ci", "-c", "user.email=ci@example.com",
         "-c", "commit.gpgsign=false", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stdout.strip()


def commit_example(repo: Path) -> tuple[str, str]:
    """A repository whose main has v1 of the manifests under deploy/ and whose pull request
    changes them to v2: (base, head) commits."""
    git(repo, "init", "-q", "-b", "main")
    shutil.copytree(EXAMPLE / "v1", repo / "deploy")
    git(repo, "add", "deploy")
    git(repo, "commit", "-q", "-m", "shop v1")
    base = git(repo, "rev-parse", "HEAD")
    shutil.rmtree(repo / "deploy")
    shutil.copytree(EXAMPLE / "v2", repo / "deploy")
    git(repo, "commit", "-q", "-am", "turn the cart feature on")
    return base, git(repo, "rev-parse", "HEAD")


def test_the_documented_steps_leave_the_comment(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    base, head = commit_example(repo)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "BASE_SHA": base, "HEAD_SHA": head, "MANIFESTS": "deploy",
    }  # fmt: skip
    result = subprocess.run(["sh", "-c", steps()], cwd=repo, env=env, capture_output=True,
                            text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    comment = (repo / "plan" / "comment.md").read_text()
    assert comment == block(PAGE, "pr-check:comment"), "paste plan/comment.md into the page"
    assert comment.splitlines()[0] == "**kube-nudge plan:** 1 workload rolls, 1 reloads"
    assert (
        "| `default/Deployment/shop-api` | **roll** | configmap/shop-config [FEATURE_CART] |"
        in comment
    )
    assert "| `default/Deployment/shop-web` | **reload** |" in comment


def test_a_broken_manifest_fails_the_job(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    base, _ = commit_example(repo)
    (repo / "deploy" / "app.yaml").write_text("kind: [broken\n")
    git(repo, "commit", "-q", "-am", "break it")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "BASE_SHA": base, "HEAD_SHA": git(repo, "rev-parse", "HEAD"), "MANIFESTS": "deploy",
    }  # fmt: skip
    result = subprocess.run(["sh", "-c", steps()], cwd=repo, env=env, capture_output=True,
                            text=True, check=False)  # fmt: skip
    assert result.returncode != 0
    assert "not valid YAML or JSON" in result.stderr


def test_the_table_cli_md_shows_is_the_real_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its example, in a terminal 100 columns wide (COLUMNS gives the width off a terminal)."""
    monkeypatch.setenv("COLUMNS", "100")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", "-f", str(EXAMPLE / "v2"), "--base", str(EXAMPLE / "v1")])
    assert code == 1
    assert out.getvalue() == block(CLI, "plan:table"), out.getvalue()
