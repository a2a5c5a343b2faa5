"""What `kube-nudge run` says when it can't go on after its flags were accepted: one plain
line that names the value and how to fix it, never a Python exception's class (exit code
1, the fatal error of `run`)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.app import run_command
from kube_nudge.app.cli import build_parser
from kube_nudge.app.errors import CommandError
from kube_nudge.app.run import RunConfig, _state_key
from kube_nudge.app.run_command import RUN
from kube_nudge.kube.client import ApiError

KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "c",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
}  # fmt: skip
MISSING = (
    "state namespace 'kube-nudge' does not exist: create it (kubectl create namespace "
    "kube-nudge) or pass --state-namespace"
)


class NoNamespace:
    """An API server without the state namespace: every read and create there is a 404."""

    async def get(self, path: str, **params: Any) -> Any:
        raise ApiError(404, "NotFound", f'namespaces "kube-nudge" not found ({path})')

    async def create(self, path: str, body: Any) -> Any:
        raise ApiError(404, "NotFound", 'namespaces "kube-nudge" not found')


class NoKeyInSecret(NoNamespace):
    """The Secret is there, but without the key."""

    async def get(self, path: str, **params: Any) -> Any:
        return {"metadata": {"name": "kube-nudge-hmac-key"}, "data": {}}


def config(tmp_path: Path) -> RunConfig:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(KUBECONFIG))
    args = build_parser().parse_args(
        ["run", f"--kubeconfig={kubeconfig}", "--state-namespace=kube-nudge"]
    )
    return RUN.config(args)


def test_a_missing_state_namespace_says_how_to_fix_it(tmp_path: Path) -> None:
    client: Any = NoNamespace()
    with pytest.raises(CommandError) as refused:
        asyncio.run(_state_key(client, config(tmp_path)))
    assert str(refused.value) == MISSING


def test_a_state_secret_without_its_key_says_how_to_fix_it(tmp_path: Path) -> None:
    client: Any = NoKeyInSecret()
    with pytest.raises(CommandError) as refused:
        asyncio.run(_state_key(client, config(tmp_path)))
    assert str(refused.value).startswith(
        "secret kube-nudge/kube-nudge-hmac-key has no 'hmac-key' key:"
    )
    assert "delete it and kube-nudge makes a new key" in str(refused.value)


def test_the_fatal_line_is_the_message_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The line `run` logs when the state namespace is missing, as `serve` meets it."""

    def run_forever(config: RunConfig) -> int:
        client: Any = NoNamespace()
        asyncio.run(_state_key(client, config))
        return 0

    monkeypatch.setattr(run_command, "run_forever", run_forever)
    monkeypatch.setattr(run_command, "setup_logging", lambda level, fmt: None)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(KUBECONFIG))
    args = build_parser().parse_args(
        ["run", f"--kubeconfig={kubeconfig}", "--state-namespace=kube-nudge"]
    )
    with caplog.at_level(logging.ERROR, "kube_nudge"):
        assert RUN.execute(args) == 1
    assert [r.getMessage() for r in caplog.records] == [f"fatal: {MISSING}"]


def test_an_unforeseen_error_is_still_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def run_forever(config: RunConfig) -> int:
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(run_command, "run_forever", run_forever)
    monkeypatch.setattr(run_command, "setup_logging", lambda level, fmt: None)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(KUBECONFIG))
    args = build_parser().parse_args(["run", f"--kubeconfig={kubeconfig}"])
    with caplog.at_level(logging.ERROR, "kube_nudge"):
        assert RUN.execute(args) == 1
    assert [r.getMessage() for r in caplog.records] == [
        "fatal: unexpected RuntimeError: first line\\nsecond line"
    ]
