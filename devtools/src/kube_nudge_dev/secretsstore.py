"""The real Secrets Store CSI driver on the real node, as host processes beside its kubelet.

Three processes, built by ``kube-nudge-dev build csi-driver`` (``build.py``):

- the provider (ours: ``gomod/secrets-store-csi/provider``) serves the secrets of a JSON file
  over the driver's provider API, on ``<providers>/kube-nudge-dev-files.sock``; it reads the
  file at every mount, so :meth:`SecretsStoreCsi.serve` rotates a secret;
- the driver (``secrets-store-csi-driver`` at its pinned version) serves CSI on
  ``<kubelet root>/plugins/csi-secrets-store/csi.sock``, with rotation on: the kubelet calls
  it again at each sync of a pod (the CSIDriver object's ``requiresRepublish``), and once
  ``--rotation-poll-interval`` has passed since its last write it asks the provider again,
  rewrites the files and writes the pod's ``SecretProviderClassPodStatus`` itself;
- the registrar (ours: ``gomod/secrets-store-csi/registrar``, what node-driver-registrar does)
  asks the driver its name and serves the kubelet's plugin registration API in
  ``<kubelet root>/plugins_registry``, where the kubelet finds it and registers the driver.

They run as root in the machine's mount namespace, as the kubelet does, so the tmpfs the
driver mounts at a pod's volume path is the one the kubelet hands to the container runtime.
The driver talks to the API server with the cluster's admin kubeconfig (not the driver's own
RBAC). Its CRDs and CSIDriver object are the caller's to install first
(``build.secrets_store_csi_manifests``). Stop it only after the pods mounting its volumes
are gone: the kubelet needs the driver to unmount them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kube_nudge_dev.node import NODE_NAME, RealNode
from kube_nudge_dev.processes import ClusterError, Component, poll_until

#: The driver's name (its CSIDriver object, the ``csi.driver`` of pod volumes).
DRIVER_NAME: Final = "secrets-store.csi.k8s.io"
#: What a SecretProviderClass names as its ``provider`` to be served by the test provider.
PROVIDER_NAME: Final = "kube-nudge-dev-files"
#: The longest path a Unix socket can be bound at (``sun_path`` less its terminating NUL).
_MAX_SOCKET_PATH: Final = 107
_START_TIMEOUT: Final = 60.0


@dataclass(frozen=True)
class StoredSecret:
    """One object of the provider's store: what a mount gets, and the version it records."""

    version: str
    content: str


class SecretsStoreCsi:
    """The driver, the registrar and the provider for ``node``; logs go to ``logs``."""

    def __init__(
        self,
        node: RealNode,
        *,
        kubeconfig: Path,
        logs: Path,
        binaries: Mapping[str, Path],
        free_port: Callable[[], int],
        rotation_poll_interval: str = "1s",
    ) -> None:
        self.node = node
        self.kubeconfig = kubeconfig
        self.logs = logs
        self.binaries = dict(binaries)
        self._free_port = free_port
        self.rotation_poll_interval = rotation_poll_interval
        home = node.directory / "secrets-store"
        self.providers = home / "providers"
        self.secrets_file = home / "secrets.json"
        self.endpoint = node.kubelet_root / "plugins" / "csi-secrets-store" / "csi.sock"
        self.registry = node.kubelet_root / "plugins_registry"
        self.components: list[Component] = []

    @property
    def provider_socket(self) -> Path:
        """Where the driver finds the provider a class names (``<provider>.sock``)."""
        return self.providers / f"{PROVIDER_NAME}.sock"

    @property
    def registration_socket(self) -> Path:
        """The registrar's socket, which the kubelet's plugin watcher finds."""
        return self.registry / f"{DRIVER_NAME}-reg.sock"

    def serve(self, secrets: Mapping[str, StoredSecret]) -> None:
        """Make the provider serve ``secrets`` (by object name) from its next mount on:
        replaces the file whole, so no mount reads half of it."""
        self.secrets_file.parent.mkdir(parents=True, exist_ok=True)
        body = {name: {"version": s.version, "content": s.content} for name, s in secrets.items()}
        partial = self.secrets_file.with_suffix(".partial")
        partial.write_text(json.dumps(body, indent=2, sort_keys=True))
        partial.replace(self.secrets_file)

    def start(self, secrets: Mapping[str, StoredSecret]) -> None:
        """Start the provider (serving ``secrets``), the driver and the registrar; returns
        once each serves its socket (the kubelet registers the driver a moment later)."""
        for socket in (self.provider_socket, self.endpoint, self.registration_socket):
            if len(str(socket)) > _MAX_SOCKET_PATH:
                size = f"{len(str(socket))} > {_MAX_SOCKET_PATH} bytes"
                raise ClusterError(f"too long for a Unix socket ({size}): {socket}")
        self.serve(secrets)
        self.providers.mkdir(parents=True, exist_ok=True)
        self.endpoint.parent.mkdir(parents=True, exist_ok=True)
        self._add("csi-files-provider", [f"--endpoint={self.provider_socket}",
                                         f"--secrets={self.secrets_file}"])  # fmt: skip
        self._wait_for(self.provider_socket, "the Secrets Store CSI provider")
        self._add("secrets-store-csi-driver", self._driver_args())
        self._wait_for(self.endpoint, "the Secrets Store CSI driver")
        self._add("csi-registrar", [f"--csi-address={self.endpoint}",
                                    f"--plugin-registration-path={self.registry}"])  # fmt: skip
        self._wait_for(self.registration_socket, "the Secrets Store CSI driver's registrar")

    def _driver_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--endpoint=unix://{self.endpoint}",
            f"--nodeid={NODE_NAME}",
            f"--provider-volume={self.providers}",
            # Its default also looks in /etc/kubernetes/secrets-store-csi-providers: only ours.
            f"--additional-provider-volume-paths={self.providers}",
            f"--metrics-addr=127.0.0.1:{self._free_port()}",
            "--enable-secret-rotation=true",
            f"--rotation-poll-interval={self.rotation_poll_interval}",
            "--v=2",
        ]

    def check(self) -> None:
        """Raise ClusterError if one of the three has exited."""
        for component in self.components:
            if component.exited() is not None:
                raise component.failure("while the Secrets Store CSI driver ran")

    def stop(self) -> None:
        """Stop the registrar, the driver and the provider, in that order (idempotent)."""
        for component in reversed(self.components):
            component.terminate()
            component.wait_or_kill(10)
        self.components.clear()
        for socket in (self.registration_socket, self.endpoint, self.provider_socket):
            socket.unlink(missing_ok=True)

    def _add(self, name: str, args: list[str]) -> None:
        component = Component(name, [str(self.binaries[name]), *args], self.logs / f"{name}.log")
        self.components.append(component)
        component.start()

    def _wait_for(self, socket: Path, what: str) -> None:
        watched = [*self.node.components, *self.components]
        poll_until(f"{what} to serve at {socket}", lambda: _is_socket(socket), watched,
                   _START_TIMEOUT)  # fmt: skip


def _is_socket(path: Path) -> bool:
    try:
        return path.is_socket()
    except OSError:
        return False


def csi_mounts(node: RealNode) -> list[str]:
    """The CSI volumes mounted under the node's kubelet root, from the machine's mount table
    (none once every pod using one is gone: the kubelet had the driver unmount them)."""
    marker = f"{node.kubelet_root}/pods/"
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mounts:
        for line in mounts:
            target = line.split()[4]
            if target.startswith(marker) and "kubernetes.io~csi" in target:
                found.append(target)
    return found
