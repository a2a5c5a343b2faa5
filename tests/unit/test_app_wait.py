"""`kube-nudge wait` targets and flags (the waiting itself is in
tests/integration/test_wait_cli.py)."""

from __future__ import annotations

import argparse
import asyncio
import io

import pytest

from kube_nudge.app import wait_command
from kube_nudge.app.cli import main
from kube_nudge.app.errors import CommandError
from kube_nudge.app.wait_command import WAIT, NamedObject, parse_target
from kube_nudge.reporting.status import WorkloadStatus
from tests.unit.fakes import FakeApi


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("configmap/app", NamedObject("configmap", "app")),
        ("cm/app", NamedObject("configmap", "app")),
        ("secrets/db", NamedObject("secret", "db")),
        ("secretproviderclass/vault", NamedObject("secretproviderclass", "vault")),
        ("deployment/web", NamedObject("Deployment", "web")),
        ("statefulsets/db-0", NamedObject("StatefulSet", "db-0")),
        ("CronJob/nightly", NamedObject("CronJob", "nightly")),
    ],
)
def test_targets(text: str, target: NamedObject) -> None:
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


# Waiting without the key, with fakes for the cluster: the rows are what `collect` would say.
def web(state: str, *, stale: int = 0, waiting_helps: bool = True) -> WorkloadStatus:
    return WorkloadStatus(
        namespace="shop", kind="Deployment", name="web", opted_in=True, strategy="rollout",
        state=state, detail="…", desired_hash=None, applied_hash="v1-a", pods={"v1-a": 1},
        stale_pods=stale, sources=("configmap/app [LEVEL]",), rolled_out=True,
        waiting_helps=waiting_helps,
    )  # fmt: skip


def run_wait(
    monkeypatch: pytest.MonkeyPatch, answers: list[list[WorkloadStatus]], timeout: float = 60.0
) -> tuple[int, int]:
    """The exit code of waiting for deployment/web without the key, and how many looks."""
    looks = 0

    async def no_key(*_: object) -> None:
        return None

    async def collect(*_: object, **__: object) -> list[WorkloadStatus]:
        nonlocal looks
        looks += 1
        return answers[min(looks, len(answers)) - 1]

    monkeypatch.setattr(wait_command, "read_installation_key", no_key)
    monkeypatch.setattr(wait_command, "collect", collect)
    monkeypatch.setattr(wait_command, "POLL_SECONDS", 0.0)
    args = argparse.Namespace(namespace="shop", state_namespace="kube-nudge",
                              hmac_secret="kube-nudge-hmac-key", compat=False,
                              csi_secrets=False)  # fmt: skip
    target = [NamedObject("Deployment", "web")]
    client = FakeApi(namespace="shop").as_client()
    code = asyncio.run(WAIT._wait(client, args, target, timeout, io.StringIO()))
    return code, looks


def test_without_the_key_wait_waits_for_pods_newer_than_the_change(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = [[web("unverified", stale=1)], [web("rolling")], [web("current")]]
    assert run_wait(monkeypatch, answers) == (0, 3)
    err = capsys.readouterr().err
    assert "without the key, a workload is out once every pod was created" in err


def test_without_the_key_wait_times_out_naming_the_unverified(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run_wait(monkeypatch, [[web("unverified", stale=1)]], timeout=0.0)
    assert code == 3
    assert "timed out: shop/Deployment/web: waiting (unverified: …)" in capsys.readouterr().err


def test_what_no_wait_can_verify_exits_6_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_wait(monkeypatch, [[web("unverified", waiting_helps=False)]]) == (6, 1)
    err = capsys.readouterr().err
    assert "unverified: shop/Deployment/web: UNVERIFIED (unverified: …)" in err


def test_a_source_named_to_wait_for_is_looked_up_as_its_kind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each kind is read where its row says (a CSI class was once looked up as a Secret, and
    counted as a workload kind)."""
    api = FakeApi(namespace="shop")
    targets = [parse_target(t) for t in ("secretproviderclass/vault", "cm/app", "secret/db")]
    assert all(t.is_source for t in targets)
    args = argparse.Namespace(compat=False)
    with pytest.raises(CommandError, match="nothing to wait for") as raised:
        asyncio.run(WAIT._something_to_wait_for(api.as_client(), "shop", targets, [], args))
    assert raised.value.code == 4
    assert [path for _, path, _ in api.requests] == [
        "/apis/secrets-store.csi.x-k8s.io/v1/namespaces/shop/secretproviderclasses/vault",
        "/api/v1/namespaces/shop/configmaps/app",
        "/api/v1/namespaces/shop/secrets/db",
    ]
