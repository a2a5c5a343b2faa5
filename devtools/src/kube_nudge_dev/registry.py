"""A real OCI registry on loopback: the CNCF distribution registry (``build.REGISTRY``, built
from the Go module proxy), serving TLS with a certificate of the dev cluster's CA.

The local cluster starts it on request (``LocalCluster.add_registry``, ``kube-nudge-dev
cluster --registry``); the real node's containerd then trusts it through a ``hosts.toml``
(``RealNode.trust_registry``), as a cluster operator would configure a private registry, and
pulls from it by digest. ``kube-nudge-dev release`` without ``--registry`` runs one of its own
with a throwaway CA (``standalone``).

The registry keeps its blobs under its directory (removed with the cluster's state), logs every
request (its access log: who pulled what) and sends no telemetry (``OTEL_TRACES_EXPORTER=none``).
:class:`RegistryClient` is the registry's HTTP API as far as the tests need it (read and write
manifests and blobs, to tamper with a pushed image as an attacker with push rights would).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kube_nudge_dev.build import REGISTRY, go_tool_binary
from kube_nudge_dev.certs import Ca, issue_serving_cert, write_ca
from kube_nudge_dev.processes import ClusterError, Component, poll_until

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)


def _config(storage: Path, port: int, cert: Path, key: Path) -> dict[str, Any]:
    return {
        "version": 0.1,
        "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": {
            "addr": f"127.0.0.1:{port}",
            # One instance: a random secret per start is enough (it signs upload state).
            "secret": secrets.token_hex(16),
            "tls": {"certificate": str(cert), "key": str(key)},
            "headers": {"X-Content-Type-Options": ["nosniff"]},
        },
    }


class LocalRegistry:
    """One registry process serving ``https://127.0.0.1:PORT`` from ``directory``."""

    def __init__(self, directory: Path, *, ca: Ca, port: int, log: Path) -> None:
        self.directory = directory
        self.ca = ca
        """The CA its serving certificate is signed by (clients trust this file)."""
        self.port = port
        self.log = log
        self.component: Component | None = None

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: how image references name it."""
        return f"127.0.0.1:{self.port}"

    @property
    def cert_dir(self) -> Path:
        """A directory holding only the CA as ``ca.crt``: podman's ``--cert-dir``."""
        return self.directory / "certs"

    def start(self, watched: list[Component]) -> Component:
        """Write its certificate and configuration, start it, return once ``/v2/`` answers
        over TLS verified by the CA (failing fast if it or a ``watched`` component dies)."""
        binary = go_tool_binary(REGISTRY)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cert_dir.mkdir(exist_ok=True)
        self.cert_dir.joinpath("ca.crt").write_bytes(self.ca.cert.read_bytes())
        cert, key = self.directory / "registry.crt", self.directory / "registry.key"
        issue_serving_cert(self.ca, cert, key, "kube-nudge-dev-registry")
        config = self.directory / "config.json"  # JSON is YAML: the registry reads it as is
        config.write_text(json.dumps(_config(self.directory / "storage", self.port, cert, key)))
        # `env` execs the registry in its place (same pid): no telemetry exporter, whose
        # default would dial loopback.
        argv = [shutil.which("env") or "/usr/bin/env", "OTEL_TRACES_EXPORTER=none", str(binary),
                "serve", str(config)]  # fmt: skip
        self.component = Component("registry", argv, self.log)
        self.component.start()
        poll_until("the registry to serve /v2/", self._serves, [*watched, self.component], 30)
        return self.component

    def stop(self) -> None:
        """Stop the process (idempotent); its storage stays until its directory goes."""
        if self.component is not None:
            self.component.terminate()
            self.component.wait_or_kill(10)

    def client(self) -> RegistryClient:
        """A client of its HTTP API, trusting the CA."""
        return RegistryClient(self.host, self.ca.cert)

    def pulls(self, reference: str) -> list[str]:
        """Access-log lines of requests for manifest ``reference`` (a tag or digest): a GET,
        or the HEAD that resolves it (a client that holds the content already stops there)."""
        if not self.log.is_file():
            return []
        wanted = re.compile(rf'"(GET|HEAD) /v2/[^ ]+/manifests/{re.escape(reference)} HTTP/')
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if wanted.search(line)]  # fmt: skip

    def _serves(self) -> bool:
        try:
            return self.client().ping()
        except (urllib.error.URLError, OSError):
            return False


@contextmanager
def standalone(
    directory: Path | None = None, *, free_port: Callable[[], int]
) -> Iterator[LocalRegistry]:
    """A registry with a throwaway CA of its own, stopped and removed on exit."""
    with tempfile.TemporaryDirectory(prefix="kube-nudge-registry-") as tmp:
        root = directory or Path(tmp)
        registry = LocalRegistry(root / "registry", ca=write_ca(root / "pki"), port=free_port(),
                                 log=root / "logs" / "registry.log")  # fmt: skip
        registry.start([])
        try:
            yield registry
        finally:
            registry.stop()


class RegistryClient:
    """The distribution API of one registry over TLS (no auth: the local registry has none)."""

    def __init__(self, host: str, ca: Path) -> None:
        self.host = host
        self._context = ssl.create_default_context(cafile=str(ca))

    def ping(self) -> bool:
        """Whether ``GET /v2/`` answers 200."""
        status, _, _ = self._call("GET", "/v2/")
        return status == 200

    def manifest(self, repository: str, reference: str) -> tuple[bytes, str, str]:
        """The manifest's bytes, media type and digest."""
        status, body, headers = self._call(
            "GET", f"/v2/{repository}/manifests/{reference}",
            headers={"Accept": ", ".join(MANIFEST_TYPES)},
        )  # fmt: skip
        if status != 200:
            raise ClusterError(f"GET manifest {repository}:{reference}: HTTP {status}")
        digest = headers.get("Docker-Content-Digest") or _digest(body)
        return body, headers.get("Content-Type", ""), digest

    def blob(self, repository: str, digest: str) -> bytes:
        """A blob's bytes, checked against its digest."""
        status, body, _ = self._call("GET", f"/v2/{repository}/blobs/{digest}")
        if status != 200 or _digest(body) != digest:
            raise ClusterError(f"GET blob {repository}@{digest}: HTTP {status}")
        return body

    def put_blob(self, repository: str, data: bytes) -> str:
        """Upload ``data`` (monolithic: POST then PUT); its digest."""
        digest = _digest(data)
        status, _, headers = self._call("POST", f"/v2/{repository}/blobs/uploads/")
        location = headers.get("Location", "")
        if status != 202 or not location:
            raise ClusterError(f"POST upload {repository}: HTTP {status}")
        path = location.removeprefix(f"https://{self.host}")
        separator = "&" if "?" in path else "?"
        status, _, _ = self._call(
            "PUT", f"{path}{separator}digest={digest}", data,
            headers={"Content-Type": "application/octet-stream"},
        )  # fmt: skip
        if status != 201:
            raise ClusterError(f"PUT blob {repository}@{digest}: HTTP {status}")
        return digest

    def put_manifest(self, repository: str, reference: str, body: bytes, media_type: str) -> str:
        """Push a manifest under ``reference`` (a tag); its digest."""
        status, _, headers = self._call(
            "PUT", f"/v2/{repository}/manifests/{reference}", body,
            headers={"Content-Type": media_type},
        )  # fmt: skip
        if status != 201:
            raise ClusterError(f"PUT manifest {repository}:{reference}: HTTP {status}")
        return headers.get("Docker-Content-Digest") or _digest(body)

    def _call(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        request = urllib.request.Request(
            f"https://{self.host}{path}", data=data, method=method, headers=headers or {}
        )
        try:
            with urllib.request.urlopen(request, context=self._context, timeout=60) as response:  # noqa: S310  # nosec B310 # https to the loopback registry
                return response.status, bytes(response.read()), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, error.read(), dict(error.headers)


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"
