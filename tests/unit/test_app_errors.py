"""Every command fails with one line and a documented exit code, never a traceback: no or a
junk kubeconfig (2), an API server out of reach or refusing (5, naming the server, the verb
and the resource), a `wait` with nothing to wait for (4, at once). The same against a real
API server: tests/integration/test_cli_errors.py."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from kube_nudge.app import cli
from kube_nudge.app.cli import COMMANDS, main
from kube_nudge.app.errors import describe_api_error
from kube_nudge.kube.client import ApiError, ClientOptions, KubeClient
from tests.unit.httpx_support import HttpxTransport

# Each command with the arguments it needs to get as far as the cluster.
CLUSTER_COMMANDS = {
    "status": ["status"],
    "wait": ["wait", "deployment/web", "--timeout=10m"],
    "release": ["release", "deployment/web"],
    "approve": ["approve", "deployment/web"],
    "plan": ["plan", "-f", str(Path(__file__).parents[1] / "examples/pr-check/v1/app.yaml")],
    "migrate": ["migrate"],
}
KUBECONFIGS = {
    "a YAML string": '"just a string"\n',
    "a list": "- clusters\n- contexts\n",
    "empty": "",
    "not YAML": "clusters: [\n",
    "no clusters": "{}\n",
    "clusters not a list": "clusters: 5\ncontexts: []\n",
}


def one_line(err: str) -> str:
    assert "Traceback" not in err
    assert err.startswith("kube-nudge: ") and err.count("\n") == 1, err
    return err


def test_every_command_that_reads_a_cluster_is_covered() -> None:
    """A new command that talks to a cluster gets its rows here too."""
    offline = {"run", "agent", "annotations", "completion"}
    assert {c.name for c in COMMANDS} - set(CLUSTER_COMMANDS) == offline


@pytest.fixture
def no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)


@pytest.mark.parametrize("command", [*CLUSTER_COMMANDS, "run"])
def test_no_kubeconfig_at_all_is_one_line(
    command: str, no_kubeconfig: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(CLUSTER_COMMANDS.get(command, [command])) == 2
    err = one_line(capsys.readouterr().err)
    assert "no kubeconfig: ~/.kube/config does not exist" in err and "--kubeconfig" in err


@pytest.mark.parametrize("command", [*CLUSTER_COMMANDS, "run"])
def test_a_missing_kubeconfig_file_is_named(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.yaml"
    assert main([*CLUSTER_COMMANDS.get(command, [command]), f"--kubeconfig={missing}"]) == 2
    assert f"kubeconfig {missing}: no such file" in one_line(capsys.readouterr().err)


def test_a_missing_kubeconfig_from_the_environment_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone"))
    assert main(["status"]) == 2
    err = one_line(capsys.readouterr().err)
    assert f"kubeconfig {tmp_path / 'gone'} (from $KUBECONFIG): no such file" in err


@pytest.mark.parametrize("junk", KUBECONFIGS)
@pytest.mark.parametrize("command", [*CLUSTER_COMMANDS, "run"])
def test_a_junk_kubeconfig_is_one_line_naming_it(
    command: str, junk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIGS[junk])
    assert main([*CLUSTER_COMMANDS.get(command, [command]), f"--kubeconfig={path}"]) == 2
    err = one_line(capsys.readouterr().err)
    assert f"kubeconfig {path}: " in err
    assert "not a kubeconfig" in err or "not valid YAML" in err


def kubeconfig(tmp_path: Path, server: str, **user: Any) -> Path:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "current-context": "ctx",
    }
    path = tmp_path / "config"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
def test_an_unknown_context_is_named(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = kubeconfig(tmp_path, "https://127.0.0.1:1")
    assert main([*CLUSTER_COMMANDS[command], f"--kubeconfig={path}", "--context=prod"]) == 2
    assert "no context 'prod' (contexts: ctx)" in one_line(capsys.readouterr().err)


def test_a_failing_credentials_plugin_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/no/plugin"}
    path = kubeconfig(tmp_path, "https://127.0.0.1:1", exec=plugin)
    assert main(["status", f"--kubeconfig={path}"]) == 2
    assert "the kubeconfig's credentials: " in one_line(capsys.readouterr().err)


@pytest.fixture
def fast_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients that don't retry: an unreachable server answers at once."""
    real = KubeClient.from_config.__func__  # type: ignore[attr-defined]

    def from_config(cls: type[KubeClient], *args: Any, **kwargs: Any) -> KubeClient:
        return real(cls, *args, options=ClientOptions(max_retries=0), **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(KubeClient, "from_config", classmethod(from_config))


@pytest.mark.parametrize("command", list(CLUSTER_COMMANDS))
def test_an_unreachable_api_server_is_named(
    command: str, tmp_path: Path, fast_client: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{port}")
    assert main([*CLUSTER_COMMANDS[command], f"--kubeconfig={path}"]) == 5
    err = one_line(capsys.readouterr().err)
    assert f"cannot reach the API server https://127.0.0.1:{port} " in err
    assert "ConnectError" in err and "installation key" not in err


KEY = f"--hmac-key-file={__file__}"  # any file of 16 bytes or more is a key
Answer = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Answer]]:
    """Every command's client talks to the answer function appended to the list."""
    answers: list[Answer] = []

    def from_config(cls: type[KubeClient], *args: Any, **kwargs: Any) -> KubeClient:
        transport = httpx.MockTransport(lambda request: answers[0](request))
        http = httpx.AsyncClient(base_url="https://api.example:6443", transport=transport)
        return cls(HttpxTransport(http), ClientOptions(max_retries=0))

    monkeypatch.setattr(KubeClient, "from_config", classmethod(from_config))
    yield answers


def forbidden(request: httpx.Request) -> httpx.Response:
    return httpx.Response(403, json={
        "kind": "Status", "reason": "Forbidden",
        "message": 'User "ci" cannot do that',
    })  # fmt: skip


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("status", "forbidden: may not list deployments.apps in namespace 'default' on "),
        ("wait", "forbidden: may not list deployments.apps in namespace 'default' on "),
        ("release", "forbidden: may not patch deployments.apps 'web' in namespace 'default' on "),
        ("approve", "forbidden: may not patch deployments.apps 'web' in namespace 'default' on "),
    ],
)
def test_forbidden_names_the_verb_and_the_resource(
    command: str, says: str, api: list[Answer], capsys: pytest.CaptureFixture[str]
) -> None:
    api.append(forbidden)
    key = [KEY] if command in ("status", "wait") else []
    code = main([*CLUSTER_COMMANDS[command], *key])
    assert code == (1 if command in ("release", "approve") else 5)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert says + "https://api.example:6443" in line and 'User "ci" cannot do that' in line


def test_unauthorized_stops_release_at_once(
    api: list[Answer], capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []

    def unauthorized(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return httpx.Response(401, json={"kind": "Status", "reason": "Unauthorized"})

    api.append(unauthorized)
    assert main(["release", "deployment/a", "deployment/b"]) == 5
    assert "unauthorized: the API server https://api.example:6443 refused" in one_line(
        capsys.readouterr().err
    )
    assert len(calls) == 1


COLLECTIONS = ("deployments", "statefulsets", "daemonsets", "cronjobs", "pods", "replicasets")


def listing(missing: bool = True) -> Answer:
    """Empty lists everywhere; every single object is missing (404)."""

    def answer(request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        if parts[-1] in COLLECTIONS:
            return httpx.Response(200, json={"kind": "List", "items": [], "metadata": {}})
        if missing:
            return httpx.Response(404, json={"kind": "Status", "reason": "NotFound"})
        return httpx.Response(200, json={"metadata": {"name": parts[-1]}})

    return answer


@pytest.mark.parametrize(
    ("targets", "says"),
    [
        (["deployment/web"], "default/Deployment/web: not found"),
        (["configmap/app"], "default/configmap/app: not found"),
        (["deployment/web", "secret/db"], "web: not found; default/secret/db: not found"),
    ],
)
def test_wait_with_nothing_to_wait_for_fails_at_once(
    targets: list[str], says: str, api: list[Answer], capsys: pytest.CaptureFixture[str]
) -> None:
    api.append(listing(missing=True))
    assert main(["wait", *targets, "--timeout=10m", KEY]) == 4
    err = one_line(capsys.readouterr().err)
    assert err.startswith("kube-nudge: nothing to wait for: ") and says in err


def test_wait_on_a_workload_not_opted_in_fails_at_once(
    api: list[Answer], capsys: pytest.CaptureFixture[str]
) -> None:
    api.append(listing(missing=False))
    assert main(["wait", "deployment/web", "configmap/app", KEY]) == 4
    err = one_line(capsys.readouterr().err)
    assert "default/Deployment/web: not opted in" in err and "--compat" in err
    assert "default/configmap/app: no opted-in workload consumes it" in err


def test_an_unforeseen_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(cls: type[KubeClient], *args: Any, **kwargs: Any) -> KubeClient:
        raise RuntimeError("something\nwent wrong")

    monkeypatch.setattr(KubeClient, "from_config", classmethod(broken))
    assert main(["status"]) == 5
    err = one_line(capsys.readouterr().err)
    assert "status: unexpected RuntimeError: something went wrong" in err
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(RuntimeError):
        main(["status"])


def test_ctrl_c_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(cls: type[KubeClient], *args: Any, **kwargs: Any) -> KubeClient:
        raise KeyboardInterrupt

    monkeypatch.setattr(KubeClient, "from_config", classmethod(interrupted))
    assert main(["wait", "configmap/app"]) == 130
    assert one_line(capsys.readouterr().err) == "kube-nudge: interrupted\n"


@pytest.mark.parametrize(
    ("method", "path", "says"),
    [
        ("GET", "/api/v1/namespaces/a/secrets/key", "get secrets 'key' in namespace 'a'"),
        ("GET", "/apis/apps/v1/namespaces/a/deployments", "list deployments.apps in namespace"),
        ("GET", "/apis/apps/v1/deployments", "list deployments.apps on"),
        ("GET", "/api/v1/namespaces", "list namespaces on"),
        ("GET", "/api/v1/namespaces/a", "get namespaces 'a' on"),
        ("POST", "/api/v1/namespaces/a/pods/p/eviction", "create pods/eviction 'p' in"),
        ("PATCH", "/apis/batch/v1/namespaces/a/cronjobs/n", "patch cronjobs.batch 'n' in"),
        ("DELETE", "/api/v1/namespaces/a/configmaps", "deletecollection configmaps in"),
    ],
)
def test_forbidden_requests_are_described(method: str, path: str, says: str) -> None:
    error = ApiError(403, "Forbidden", "")
    error.method, error.path = method, path
    http = httpx.AsyncClient(base_url="https://k8s:6443")
    text = describe_api_error(error, KubeClient(HttpxTransport(http)))
    assert text.startswith("forbidden: may not ") and says in text and "https://k8s:6443" in text
