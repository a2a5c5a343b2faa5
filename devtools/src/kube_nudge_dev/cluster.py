"""A real local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake nodes that make pods Running/Ready without a kubelet), and on
request one real node (kubelet + containerd + runc, ``node.py``) that runs real containers.

Everything listens on random free loopback ports; certificates are generated at start.
``LocalCluster`` backs both ``kube-nudge-dev cluster`` and the pytest fixture.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

from kube_nudge_dev.build import COMPONENTS, NODE_COMPONENTS, chosen, ensure_binaries
from kube_nudge_dev.certs import Ca, Pki, write_pki
from kube_nudge_dev.node import NODE_NAME, NodeBinaries, RealNode, check_requirements
from kube_nudge_dev.processes import ClusterError, Component, poll_until, stop_all
from kube_nudge_dev.registry import LocalRegistry
from kube_nudge_dev.releases import KubeRelease

FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"

# Writes only, at Metadata level: lets tests count exactly which client wrote what.
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io"}]},
        {"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete", "deletecollection"]},
        {"level": "None"},
    ],
}


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalCluster:
    """Start and stop a local control plane; usable as a context manager.

    ``directory`` receives ``kubeconfig`` and ``logs/``; transient state (etcd data, keys)
    lives in ``directory/state`` and is removed on stop. Without ``directory`` a temporary
    one is used and removed on stop, unless a component failed (its logs are kept).
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        nodes: int = 2,
        apiserver_args: tuple[str, ...] = (),
        real_node: bool = False,
        images: tuple[Path, ...] = (),
        kube: KubeRelease | None = None,
    ) -> None:
        self.kube = chosen(kube)
        """The Kubernetes release it runs (default: ``$KUBE_NUDGE_KUBE_VERSION``'s, else the
        default release; ``releases.py``)."""
        self._owns_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kube-nudge-dev-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.kubeconfig = self.directory / "kubeconfig"
        self.logs = self.directory / "logs"
        self.audit_log = self.logs / "audit.log"
        self._state = self.directory / "state"
        self._nodes = nodes
        self._apiserver_args = apiserver_args
        self._real_node = real_node
        self._images = images
        self.node: RealNode | None = None
        """The real node, when one was asked for (``real_node=True``)."""
        self.registry: LocalRegistry | None = None
        """The OCI registry, once asked for (``add_registry``)."""
        self.api_port = 0
        self.etcd_url = ""
        self.components: list[Component] = []
        self.server = ""
        self.startup_seconds = 0.0
        self._failed = False
        self._pki: Pki | None = None

    @property
    def kube_version(self) -> str:
        """The gitVersion its API server reports: ``v1.MINOR.PATCH``."""
        return self.kube.version

    @property
    def pki(self) -> Pki:
        """The cluster's throwaway PKI (its serving certificate is valid for 127.0.0.1, so
        tests can serve a webhook with it, trusted through the cluster CA)."""
        if self._pki is None:
            raise ClusterError("the cluster has not been started")
        return self._pki

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Build or find binaries, start every component, return once the cluster is usable."""
        if self._real_node:
            check_requirements()  # one line naming what is missing, before any build
        names = COMPONENTS + (NODE_COMPONENTS if self._real_node else ())
        binaries = ensure_binaries(names, kube=self.kube)
        started = time.monotonic()
        try:
            self._start(binaries)
        except BaseException as exc:
            self._failed = isinstance(exc, ClusterError)
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started

    def _start(self, binaries: dict[str, Path]) -> None:
        self._state.mkdir(parents=True, exist_ok=True)
        pki = self._pki = write_pki(self._state / "pki")
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        self.api_port = api_port
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.server = f"https://127.0.0.1:{api_port}"
        self._write_kubeconfig(pki)
        policy = self._state / "audit-policy.json"
        policy.write_text(json.dumps(_AUDIT_POLICY))

        etcd = self._component("etcd", [
            str(binaries["etcd"]),
            "--name=default",
            f"--data-dir={self._state / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ])  # fmt: skip
        etcd.start()
        poll_until(
            "etcd to be healthy",
            lambda: b'"health":"true"' in _http_get(f"http://127.0.0.1:{etcd_port}/health"),
            self.components,
            timeout=30,
        )

        apiserver = self._component("kube-apiserver", [
            str(binaries["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={self._state / 'apiserver'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_public}",
            f"--service-account-signing-key-file={pki.sa_private}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--endpoint-reconciler-type=none",
            # The real node's address is its bridge's (no name to resolve for logs/exec).
            "--kubelet-preferred-address-types=InternalIP",
            "--allow-privileged=true",
            "--profiling=false",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--v=0",
            *self._apiserver_args,
        ])  # fmt: skip
        apiserver.start()
        poll_until(
            "kube-apiserver to be ready", lambda: self._api_ok("/readyz"), self.components, 60
        )

        kcm_port, sched_port, kwok_port = free_port(), free_port(), free_port()
        common = [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
        ]
        self._component("kube-controller-manager", [
            str(binaries["kube-controller-manager"]), *common,
            f"--secure-port={kcm_port}",
            f"--cert-dir={self._state / 'kcm'}",
            f"--service-account-private-key-file={pki.sa_private}",
            f"--root-ca-file={pki.ca_cert}",
            "--concurrent-deployment-syncs=20",
            "--concurrent-replicaset-syncs=20",
            "--concurrent-gc-syncs=50",
            # kwok marks fake nodes Ready once and sends no heartbeats; never time them out.
            "--node-monitor-grace-period=8760h",
        ]).start()  # fmt: skip
        self._component("kube-scheduler", [
            str(binaries["kube-scheduler"]), *common,
            f"--secure-port={sched_port}",
        ]).start()  # fmt: skip
        self._component("kwok", [
            str(binaries["kwok"]),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={resources.files('kube_nudge_dev') / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.96.0.1",
            f"--server-address=127.0.0.1:{kwok_port}",
        ]).start()  # fmt: skip

        for index in range(self._nodes):
            self._create_node(f"kwok-node-{index}")
        poll_until("fake nodes to be Ready", self._nodes_ready, self.components, 60)
        poll_until(
            "kube-controller-manager (default ServiceAccount)",
            lambda: self._api_ok("/api/v1/namespaces/default/serviceaccounts/default"),
            self.components,
            60,
        )
        poll_until(
            "kube-scheduler to be healthy",
            lambda: _http_get(f"https://127.0.0.1:{sched_port}/healthz", insecure=True) == b"ok",
            self.components,
            60,
        )
        if self._real_node:
            self._start_real_node(binaries, self._images)

    def add_real_node(self, images: tuple[Path, ...] = ()) -> RealNode:
        """Add the real node to the running cluster (building what it needs first), with
        ``images`` (OCI archives) loaded into its runtime; returns it once Ready. It stops
        with the cluster."""
        if self.node is not None:
            return self.node
        check_requirements()
        return self._start_real_node(ensure_binaries(NODE_COMPONENTS, kube=self.kube), images)

    def add_registry(self) -> LocalRegistry:
        """Start the distribution registry (built on first use) on a free loopback port,
        serving TLS with a certificate of the cluster's CA; the real node, now or later,
        trusts it (a ``hosts.toml``). It stops with the cluster; its blobs go with the state."""
        if self.registry is not None:
            return self.registry
        ca = Ca(self.pki.ca_cert, self.pki.ca_key)
        registry = LocalRegistry(self._state / "registry", ca=ca, port=free_port(),
                                 log=self.logs / "registry.log")  # fmt: skip
        self.components.append(registry.start(self.components))
        self.registry = registry
        if self.node is not None:
            self.node.trust_registry(registry.host, ca.cert)
        return registry

    def _start_real_node(self, binaries: dict[str, Path], images: tuple[Path, ...]) -> RealNode:
        from kube_nudge_dev.image import pause_image  # podman is needed only for a real node

        pause = pause_image()
        directory = self._state / "node"
        directory.mkdir(parents=True, exist_ok=True)
        self.node = RealNode(
            directory,
            kubeconfig=self.kubeconfig,
            api_port=self.api_port,
            binaries=NodeBinaries(binaries["kubelet"], binaries["kube-proxy"]),
            images=(pause.archive, *images),
            pause_image=pause.ref,
            free_port=free_port,
            kube_minor=self.kube.minor,
        )
        self.node.start(self.components)
        if self.registry is not None:
            self.node.trust_registry(self.registry.host, self.registry.ca.cert)
        self.node.wait_ready(self._real_node_ready, self.components)
        return self.node

    def _real_node_ready(self) -> bool:
        node = self._api("GET", f"/api/v1/nodes/{NODE_NAME}")
        conditions = node.get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _delete_real_node_pods(self) -> None:
        """Delete every pod on the real node at once (the kubelet tears them down)."""
        pods = self._api("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE_NAME}")
        for pod in pods.get("items", []):
            meta = pod["metadata"]
            try:
                self._api("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/"
                          f"{meta['name']}?gracePeriodSeconds=0")  # fmt: skip
            except (urllib.error.URLError, OSError):
                continue

    def check(self) -> None:
        """Raise ClusterError if any component has exited."""
        for component in self.components:
            if component.exited() is not None:
                self._failed = True
                raise component.failure("while the cluster was running")

    def restart_apiserver(self, down_seconds: float = 0.0) -> float:
        """SIGKILL kube-apiserver, keep it down for ``down_seconds``, and start it again on
        the same port and etcd (a crash and recovery); returns the seconds until it was
        ready again."""
        apiserver = next(c for c in self.components if c.name == "kube-apiserver")
        started = time.monotonic()
        apiserver.kill()
        time.sleep(down_seconds)  # the outage itself is the fault being injected
        apiserver.start()
        poll_until(
            "kube-apiserver to be ready again", lambda: self._api_ok("/readyz"),
            self.components, 60,
        )  # fmt: skip
        return time.monotonic() - started

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (as its periodic compaction
        does), so watches from older versions that reach etcd get 410 Gone; returns it."""
        header = _etcd_post(self.etcd_url, "/v3/kv/range", {"key": "AA=="})["header"]
        revision = int(header["revision"])
        _etcd_post(self.etcd_url, "/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def stop(self) -> None:
        """Stop every component and remove transient state (idempotent). With a real node:
        the controllers stop first (nothing re-creates pods), the node's pods are deleted and
        torn down, the node stops and the machine's settings are restored."""
        if self.node is not None:
            for component in self.components:
                if component.name in ("kube-controller-manager", "kube-scheduler"):
                    component.terminate()
                    component.wait_or_kill(10)
            self.node.stop(self._delete_real_node_pods)
        stop_all(self.components)
        self.components.clear()
        shutil.rmtree(self._state, ignore_errors=True)
        if self._owns_directory and not self._failed:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- helpers ---------------------------------------------------------------------------

    def _component(self, name: str, argv: list[str]) -> Component:
        component = Component(name, argv, self.logs / f"{name}.log")
        self.components.append(component)
        return component

    def _write_kubeconfig(self, pki: Pki) -> None:
        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kube-nudge-dev", "cluster": {
                "server": self.server, "certificate-authority-data": b64(pki.ca_cert)}}],
            "users": [{"name": "admin", "user": {
                "client-certificate-data": b64(pki.admin_cert),
                "client-key-data": b64(pki.admin_key)}}],
            "contexts": [{"name": "kube-nudge-dev", "context": {
                "cluster": "kube-nudge-dev", "user": "admin", "namespace": "default"}}],
            "current-context": "kube-nudge-dev",
        }  # fmt: skip
        # JSON is valid YAML, so every kubeconfig reader accepts this file.
        self.kubeconfig.write_text(json.dumps(config, indent=2))
        self.kubeconfig.chmod(0o600)

    def _ssl_context(self) -> ssl.SSLContext:
        assert self._pki is not None  # nosec B101 # type narrowing only: start() sets it
        context = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        context.load_cert_chain(str(self._pki.admin_cert), str(self._pki.admin_key))
        return context

    def _api(self, method: str, path: str, body: Any = None) -> Any:
        return json.loads(self._api_raw(method, path, body) or b"null")

    def _api_raw(self, method: str, path: str, body: Any = None) -> bytes:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - https to our own loopback server
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=self._ssl_context(), timeout=5) as response:  # noqa: S310  # nosec B310 # https to our own loopback server
            return bytes(response.read())

    def _api_ok(self, path: str) -> bool:
        try:
            self._api_raw("GET", path)
        except (urllib.error.URLError, OSError):
            return False
        return True

    def _create_node(self, name: str) -> None:
        self._api("POST", "/api/v1/nodes", {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": name},
            },
            "spec": {},
        })  # fmt: skip

    def _nodes_ready(self) -> bool:
        nodes = self._api("GET", "/api/v1/nodes")["items"]
        ready = [
            node
            for node in nodes
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in node.get("status", {}).get("conditions", [])
            )
        ]
        return len(ready) >= self._nodes


def _etcd_post(etcd_url: str, path: str, body: dict[str, Any]) -> Any:
    """One call to etcd's JSON gateway (plain http on loopback, no auth in the dev cluster)."""
    request = urllib.request.Request(  # noqa: S310 - our own loopback etcd
        etcd_url + path, data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310  # nosec B310 # loopback etcd
        return json.loads(response.read())


def _http_get(url: str, *, insecure: bool = False) -> bytes:
    context = None
    if insecure:
        # kcm/scheduler serve a self-signed cert they generate; we only read /healthz.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:  # noqa: S310  # nosec B310 # callers pass http(s)://127.0.0.1 only
            return bytes(response.read())
    except (urllib.error.URLError, OSError):
        return b""
