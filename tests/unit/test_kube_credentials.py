"""kube-nudge's own kubeconfig reader and credentials: a token file read again after a 401
(rotation), an exec plugin run again after a 401 and when its token expires, a client
certificate presented to a server that requires one, and a bad kubeconfig or failing
plugin said in one line that holds no secret."""

from __future__ import annotations

import base64
import contextlib
import json
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kube_nudge.kube.client import KubeClient, KubeconfigError
from kube_nudge.kube.credentials import CredentialsError, credentials_for
from kube_nudge.kube.kubeconfig import Cluster, ExecPlugin, Kubeconfig, User, load_kubeconfig
from tests.tls_support import certificate_pair, tls_server

SERVER = "https://127.0.0.1:6443"
SECRET = "s3cr3t-token-value"


def write_kubeconfig(directory: Path, user: dict[str, Any], **cluster: Any) -> Path:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **cluster}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user}],
        "current-context": "ctx",
    }
    path = directory / "config"
    path.write_text(json.dumps(config))
    return path


def plugin(directory: Path, *, expires: str | None = None, fail: bool = False) -> ExecPlugin:
    """An exec plugin that counts its runs in ``runs`` and prints token ``token-N``."""
    script = directory / "plugin.py"
    status = {"expirationTimestamp": expires} if expires else {}
    script.write_text(
        "import json, pathlib, sys\n"
        f"runs = pathlib.Path({str(directory / 'runs')!r})\n"
        "n = int(runs.read_text()) + 1 if runs.exists() else 1\n"
        "runs.write_text(str(n))\n"
        + ("print('no credentials for you', file=sys.stderr); sys.exit(3)\n" if fail else "")
        + "status = {'token': f'token-{n}', **"
        + repr(status)
        + "}\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
        "'kind': 'ExecCredential', 'status': status}))\n"
    )
    return ExecPlugin("client.authentication.k8s.io/v1", sys.executable, (str(script),))


def runs(directory: Path) -> int:
    return int((directory / "runs").read_text())


async def test_a_token_file_is_read_once_then_again_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    credentials = credentials_for(Kubeconfig(Cluster(), User(token_file=str(token))))
    header, generation = await credentials.header()
    assert header == "Bearer first"
    token.write_text("second\n")  # the kubelet rotated it
    assert await credentials.header() == ("Bearer first", generation)  # not read per request
    await credentials.refresh(generation)
    header, newer = await credentials.header()
    assert header == "Bearer second" and newer > generation
    await credentials.refresh(generation)  # a late 401 of a request sent with the old one
    token.write_text("third\n")
    assert await credentials.header() == ("Bearer second", newer)


async def test_a_token_file_that_is_gone_is_a_credentials_error(tmp_path: Path) -> None:
    credentials = credentials_for(Kubeconfig(Cluster(), User(token_file=str(tmp_path / "x"))))
    with pytest.raises(CredentialsError, match=r"token file .*/x: no such file"):
        await credentials.header()


async def test_an_exec_plugin_runs_once_then_again_after_a_401(tmp_path: Path) -> None:
    config = Kubeconfig(Cluster(), User(exec=plugin(tmp_path)))
    credentials = credentials_for(config)
    header, generation = await credentials.header()
    assert header == "Bearer token-1"
    assert (await credentials.header())[0] == "Bearer token-1"
    assert runs(tmp_path) == 1
    await credentials.refresh(generation)
    assert (await credentials.header())[0] == "Bearer token-2"
    assert runs(tmp_path) == 2


async def test_an_exec_plugin_runs_again_when_its_token_expires(tmp_path: Path) -> None:
    now = [1_900_000_000.0]  # 2030-03-17: before the expiry below
    config = Kubeconfig(Cluster(), User(exec=plugin(tmp_path, expires="2030-04-01T00:00:00Z")))
    credentials = credentials_for(config, clock=lambda: now[0])
    assert (await credentials.header())[0] == "Bearer token-1"
    now[0] += 3600
    assert (await credentials.header())[0] == "Bearer token-1"
    now[0] = 1_901_232_000.0  # 2030-04-01T00:00:00Z: expired
    assert (await credentials.header())[0] == "Bearer token-2"
    assert runs(tmp_path) == 2


async def test_a_static_token_is_not_refreshed_on_401() -> None:
    credentials = credentials_for(Kubeconfig(Cluster(), User(token=SECRET)))
    assert not credentials.refreshable
    header, generation = await credentials.header()
    await credentials.refresh(generation)
    assert await credentials.header() == (header, generation) == (f"Bearer {SECRET}", 1)


async def test_a_failing_plugin_is_one_line_without_its_output(tmp_path: Path) -> None:
    credentials = credentials_for(Kubeconfig(Cluster(), User(exec=plugin(tmp_path, fail=True))))
    with pytest.raises(CredentialsError) as failed:
        await credentials.header()
    assert "exited with 3: no credentials for you" in str(failed.value)
    assert "\n" not in str(failed.value) and "token-1" not in str(failed.value)


async def test_plugin_output_that_is_no_credential_is_never_quoted(tmp_path: Path) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(f"print('not json but {SECRET}')\n")
    config = Kubeconfig(Cluster(), User(exec=ExecPlugin(
        "client.authentication.k8s.io/v1beta1", sys.executable, (str(script),))))  # fmt: skip
    with pytest.raises(CredentialsError) as failed:
        await credentials_for(config).header()
    assert "not an ExecCredential" in str(failed.value) and SECRET not in str(failed.value)


@pytest.mark.parametrize(
    ("user", "cluster", "says"),
    [
        ({"exec": {"apiVersion": "v9", "command": "x"}}, {}, "apiVersion 'v9' is not supported"),
        ({"auth-provider": {"name": "gcp"}}, {}, "auth-provider is not supported"),
        ({"token": SECRET}, {"certificate-authority-data": "@@@"}, "certificate"),
        ({"token": SECRET}, {"certificate-authority": "missing.crt"}, "missing.crt"),
        ({"token": SECRET, "client-certificate": "c.crt", "client-key": "c.key"}, {}, "c.crt"),
        ({"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}, {}, "has no command"),
    ],
)
def test_a_bad_kubeconfig_is_one_line_naming_it(
    tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any], says: str
) -> None:
    path = write_kubeconfig(tmp_path, user, **cluster)
    with pytest.raises(KubeconfigError) as bad:
        KubeClient.from_config(path)
    message = str(bad.value)
    assert message.startswith(f"kubeconfig {path}: ") and says in message, message
    assert "\n" not in message and SECRET not in message


def test_a_context_without_a_user_or_with_an_unknown_one_is_named(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path, {"token": SECRET})
    document = json.loads(path.read_text())
    document["contexts"][0]["context"]["user"] = "nobody"
    path.write_text(json.dumps(document))
    with pytest.raises(KubeconfigError, match="unknown user 'nobody'"):
        load_kubeconfig(path, None)


def test_a_yaml_kubeconfig_reads_like_its_json(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: ctx\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://k:6443'}\n"
        "contexts:\n- name: ctx\n  context: {cluster: c, user: u, namespace: shop}\n"
        "users:\n- name: u\n  user: {tokenFile: token}\n"
    )
    config = load_kubeconfig(path, None)
    assert config.cluster.server == "https://k:6443" and config.namespace == "shop"
    assert config.path(config.user.token_file or "") == str(tmp_path / "token")


def test_the_in_cluster_config_comes_from_the_service_account(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(SECRET)
    (tmp_path / "namespace").write_text("ops")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_kubeconfig(None, None, service_account=tmp_path, environ=env)
    assert config.cluster.server == "https://[fd00::1]:443" and config.namespace == "ops"
    assert config.user.token_file == str(tmp_path / "token")
    assert config.cluster.certificate_authority == str(tmp_path / "ca.crt")
    assert SECRET not in repr(config)
    named = load_kubeconfig(None, "default", service_account=tmp_path, environ=env)
    assert named == config
    with pytest.raises(KubeconfigError, match=r"no context 'prod' \(contexts: default\)"):
        load_kubeconfig(None, "prod", service_account=tmp_path, environ=env)


@contextlib.asynccontextmanager
async def mutual_tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path, Path]]:
    """An HTTPS server on localhost that requires a client certificate signed by the
    client's own self-signed CA; yields its URL, its certificate and the client's pair."""
    server_cert, server_key = certificate_pair(tmp_path, "server")
    client_cert, _client_key = certificate_pair(tmp_path, "client")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_cert))
    tls.verify_mode = ssl.CERT_REQUIRED
    tls.load_cert_chain(server_cert, server_key)

    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": []})

    async with tls_server(answer, tls) as port:
        yield f"https://localhost:{port}", server_cert, tmp_path / "client"


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@pytest.mark.parametrize("inline", [True, False])
async def test_a_client_certificate_is_presented(
    tmp_path: Path, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    async with mutual_tls_server(tmp_path) as (url, server_cert, client):
        cert, key = client.with_suffix(".crt"), client.with_suffix(".key")
        user = (
            {"client-certificate-data": b64(cert), "client-key-data": b64(key)}
            if inline
            else {"client-certificate": cert.name, "client-key": key.name}  # relative
        )
        config = {
            "clusters": [{"name": "c", "cluster": {
                "server": url, "certificate-authority-data": b64(server_cert)}}],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": user}],
            "current-context": "ctx",
        }  # fmt: skip
        path = tmp_path / "config"
        path.write_text(json.dumps(config))
        kube = KubeClient.from_config(path)
        try:
            assert await kube.get("/api/v1/pods") == {"kind": "PodList", "items": []}
        finally:
            await kube.aclose()
    assert list(scratch.iterdir()) == []  # inline keys are not left on disk
