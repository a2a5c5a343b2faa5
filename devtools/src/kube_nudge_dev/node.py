"""A real node for the local cluster: kubelet + containerd + runc + CNI, running real
containers next to the kwok nodes.

Set-up, in order: take the machine-wide lock (one real node per machine: it owns the
machine's cgroups and firewall while it runs), snapshot what it will change
(``hoststate``), create the pod bridge, install the guard rules (nothing addressed to the
Service or pod ranges leaves the machine) and the ``kubernetes`` Service's DNAT, start
containerd with its own root, import the images built locally (no registry), start
kube-proxy (every other Service) and the kubelet, wait until the node is Ready. ``stop``
deletes the node's pods through the API (so the kubelet tears their sandboxes down through
CNI), stops the components, kills what is left and restores the snapshot.

Networking: the dev API server listens on 127.0.0.1 only. Pods reach it the standard way,
through the ``kubernetes`` Service (10.0.0.1:443, in-cluster config), which one DNAT rule
sends to 127.0.0.1 (``route_localnet`` on the bridge; the kubelet's ``KUBE-FIREWALL`` lets
DNAT'd connections to 127/8 through). kube-proxy, built from the same Kubernetes source,
handles every other Service, so the API server reaches webhook Services through their
ClusterIP. The node's address is the bridge's gateway, so ``kubectl logs``/``exec`` work
without a name to resolve.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess  # nosec B404 # ip, iptables and ctr configure the node
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kube_nudge_dev import hoststate
from kube_nudge_dev.processes import ClusterError, Component, poll_until

NODE_NAME = "kube-nudge-node"
#: Real-node pods must tolerate it (and select the node); kwok-node pods never land here.
TAINT_KEY = "kube-nudge.dev/real-node"
NODE_LABEL = "kube-nudge.dev/node"
BRIDGE = "kube-nudge0"
POD_CIDR = "10.245.0.0/24"
GATEWAY = "10.245.0.1"
SERVICE_CIDR = "10.0.0.0/24"
API_SERVICE_IP = "10.0.0.1"
KWOK_POD_CIDR = "10.244.0.0/16"
_GUARD = "KUBE-NUDGE-DEV-GUARD"
# The jumps kube-proxy (pkg/proxy/iptables, iptablesJumpChains) and the kubelet (KUBE-FIREWALL)
# put into the filter chains the guard must lead.
_SYNCED_JUMPS = {
    "OUTPUT": ("KUBE-SERVICES", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"),
    "FORWARD": ("KUBE-EXTERNAL-SERVICES", "KUBE-SERVICES", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL"),
}
_API_DNAT = "KUBE-NUDGE-DEV-API"
_LOCK = Path("/run/kube-nudge-dev/real-node.lock")
_SNAPSHOT = Path("/run/kube-nudge-dev/host-state.json")
_CNI_BIN_DIRS = (Path("/usr/lib/cni"), Path("/opt/cni/bin"))
_HOW_TO_SKIP = 'run the rest of the suite with: pytest -m "not real_node"'


class NodeUnavailable(ClusterError):
    """This machine cannot run a real node; the message says what is missing in one line."""


def cni_bin_dir() -> Path | None:
    """Where the CNI plugins (bridge, host-local, loopback) are installed, if anywhere."""
    for directory in _CNI_BIN_DIRS:
        if all((directory / name).is_file() for name in ("bridge", "host-local", "loopback")):
            return directory
    return None


def missing_requirements() -> list[str]:
    """What this machine lacks to run a real node (empty: nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (the kubelet and containerd need it)")
    for tool in ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if cni_bin_dir() is None:
        missing.append("CNI plugins (bridge, host-local, loopback)")
    cgroups = Path("/sys/fs/cgroup")
    if not all((cgroups / name).is_dir() for name in ("cpu", "memory", "pids", "devices")):
        missing.append("cgroup v1 hierarchies (cpu, memory, pids, devices) under /sys/fs/cgroup")
    if "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("the overlay filesystem")
    return missing


def check_requirements() -> None:
    """Raise NodeUnavailable naming what is missing and how to run the rest."""
    missing = missing_requirements()
    if missing:
        raise NodeUnavailable(
            f"a real node needs {', '.join(missing)}: install with `make host-packages` "
            f"(as root), or {_HOW_TO_SKIP}"
        )


def _run(argv: list[str], *, timeout: float = 60) -> str:
    result = subprocess.run(  # nosec B603 # fixed argv of system tools, no shell
        argv, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        raise ClusterError(
            f"`{' '.join(argv)}` failed (exit {result.returncode}): {result.stderr.strip()}"
        )
    return result.stdout


def preloaded_images_policy(kube_minor: int) -> dict[str, Any]:
    """The kubelet settings that keep the images this node loads (``localhost/...``) usable
    by pods that never pull them. From 1.35 the kubelet checks a pod's right to an image it
    pulled (KubeletEnsureSecretPulledImages, on by default): once it pulled an image from a
    registry, a loaded image of the same ID under another name no longer counts as
    preloaded, and a pod with ``imagePullPolicy: Never`` gets ErrImageNeverPull (met after
    the release test installed the chart from the registry). Allow-listing the loaded names
    is what a node operator does for preloaded images; before 1.35 the kubelet refuses the
    settings (its gate is off)."""
    if kube_minor < 35:
        return {}
    return {
        "imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
        "preloadedImagesVerificationAllowlist": ["localhost/*"],
    }


@dataclass(frozen=True)
class NodeBinaries:
    """The node's own binaries (built from the pinned Kubernetes source)."""

    kubelet: Path
    kube_proxy: Path


class RealNode:
    """One kubelet node with containerd, in ``directory`` (which must exist)."""

    def __init__(
        self,
        directory: Path,
        *,
        kubeconfig: Path,
        api_port: int,
        binaries: NodeBinaries,
        images: tuple[Path, ...],
        pause_image: str,
        free_port: Callable[[], int],
        kube_minor: int,
    ) -> None:
        self.directory = directory
        self.kube_minor = kube_minor
        self.kubeconfig = kubeconfig
        self.api_port = api_port
        self.binaries = binaries
        self.images = images
        self.pause_image = pause_image
        self._free_port = free_port
        self.containerd_socket = directory / "containerd.sock"
        self.components: list[Component] = []
        self._lock: IO[str] | None = None
        self._before: hoststate.HostState | None = None
        self.leftovers: list[str] = []
        """What the last stop could not restore (empty when it restored everything)."""

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's ``--root-dir``: its pods' volumes, ``plugins/`` and
        ``plugins_registry/`` (where node plugins such as a CSI driver register)."""
        return self.directory / "kubelet"

    @property
    def certs_dir(self) -> Path:
        """containerd's registry host configuration (``certs.d``: ``HOST/hosts.toml``)."""
        return self.directory / "certs.d"

    def trust_registry(self, host: str, ca: Path) -> Path:
        """Let containerd pull from ``https://host`` verifying it with ``ca``: the
        ``hosts.toml`` a cluster operator writes for a private registry (certs.d format), with
        the CA beside it. Read at each pull, so this works on a running node; returns it."""
        directory = self.certs_dir / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ca.crt").write_bytes(ca.read_bytes())
        hosts = directory / "hosts.toml"
        hosts.write_text(
            f"# {host}: the local registry, TLS with a certificate of the dev cluster's CA.\n"
            f'server = "https://{host}"\n\n'
            f'[host."https://{host}"]\n'
            '  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{directory / "ca.crt"}"\n'
        )
        return hosts

    def distrust_registry(self, host: str) -> None:
        """Remove ``host``'s ``hosts.toml`` and CA (its pulls fail TLS verification again)."""
        shutil.rmtree(self.certs_dir / host, ignore_errors=True)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, cluster_components: list[Component]) -> None:
        """Bring the node up; returns once the kubelet has registered it Ready."""
        check_requirements()
        self._take_lock()
        self._recover_after_crash()
        self._before = hoststate.capture()
        self._before.owner = str(self.directory)
        self._before.save(_SNAPSHOT)
        watched = [*cluster_components, *self.components]
        self._network()
        self._start_containerd(watched)
        for archive in self.images:
            self.load_image(archive)
        self._start_kube_proxy()
        self._start_kubelet()

    def wait_ready(self, node_ready: Callable[[], bool], cluster: list[Component]) -> None:
        """Poll until ``node_ready`` (the caller reads the Node from the API server)."""
        poll_until("the real node to be Ready", node_ready,
                   [*cluster, *self.components], 120)  # fmt: skip
        # kube-proxy and the kubelet put their jumps first when they first sync (and later
        # only add them when missing): once they are there, the guard goes back in front,
        # where no ACCEPT of theirs (KUBE-FORWARD's) can come before it.
        poll_until("kube-proxy's and the kubelet's first iptables sync", self._chains_synced,
                   [*cluster, *self.components], 60)  # fmt: skip
        self._guard_first()

    @staticmethod
    def _chains_synced() -> bool:
        # Every jump kube-proxy and the kubelet prepend to the two chains, not just some:
        # kube-proxy adds them one iptables call at a time, so a check that sees its first
        # jumps can run before its last (KUBE-PROXY-FIREWALL), which would then land in
        # front of the guard (seen in CI).
        return all(
            all(f"-j {target}" in rules for target in _SYNCED_JUMPS[chain])
            for chain, rules in ((c, _run(["iptables", "-S", c])) for c in _SYNCED_JUMPS)
        )

    @staticmethod
    def _guard_first() -> None:
        for chain in ("OUTPUT", "FORWARD"):
            while subprocess.run(  # nosec B603 B607 # iptables from PATH, fixed argv
                ["iptables", "-D", chain, "-j", _GUARD], capture_output=True, check=False,
                timeout=30,
            ).returncode == 0:  # fmt: skip
                continue
            _run(["iptables", "-I", chain, "1", "-j", _GUARD])

    def load_image(self, archive: Path) -> None:
        """Import an OCI archive into the node's containerd (no registry involved)."""
        self._ctr("images", "import", "--all-platforms", str(archive), timeout=300)

    def stop(self, delete_pods: Callable[[], None] | None = None) -> None:
        """Tear the node down and restore the machine (idempotent)."""
        if self._before is None:
            return
        if delete_pods is not None and self._component("kubelet") is not None:
            try:
                delete_pods()
                poll_until("the real node's pods to be torn down", self._no_sandboxes,
                           self.components, 60)  # fmt: skip
            except (ClusterError, OSError):
                pass  # what is left is killed below
        for name in ("kubelet", "kube-proxy"):
            component = self._component(name)
            if component is not None:
                component.terminate()
                component.wait_or_kill(10)
        self._kill_containers()
        containerd = self._component("containerd")
        if containerd is not None:
            containerd.terminate()
            containerd.wait_or_kill(10)
        self._kill_shims()
        hoststate.restore(self._before, owned=(self.directory,), bridge=BRIDGE)
        self.leftovers = hoststate.differences(
            self._before, hoststate.capture(), owned=(self.directory,)
        )
        _SNAPSHOT.unlink(missing_ok=True)
        self._before = None
        self.components.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # -- set-up steps ----------------------------------------------------------------------

    def _take_lock(self) -> None:
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        lock = _LOCK.open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise NodeUnavailable(
                "another local cluster's real node runs on this machine (one at a time: it "
                f"owns the machine's cgroups and firewall); stop it, or {_HOW_TO_SKIP}"
            ) from None
        self._lock = lock

    def _recover_after_crash(self) -> None:
        """A snapshot left by a node whose process died: put that machine state back first."""
        if _SNAPSHOT.exists():
            self._kill_shims(any_owner=True)
            previous = hoststate.HostState.load(_SNAPSHOT)
            hoststate.restore(previous, owned=(Path(previous.owner),), bridge=BRIDGE)
            _SNAPSHOT.unlink(missing_ok=True)

    def _network(self) -> None:
        hoststate.set_sysctl("net/ipv4/ip_forward", "1")
        _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        _run(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE])
        _run(["ip", "link", "set", BRIDGE, "up"])
        hoststate.set_sysctl(f"net/ipv4/conf/{BRIDGE}/route_localnet", "1")
        # The safety net: nothing for the Service range (a Service address kube-proxy did
        # not translate), the kwok pods' fake addresses, or from a pod to anywhere but the
        # bridge leaves the machine. The real pods' range needs no rule: its route is the
        # bridge's. (Filter rules see a translated packet's new address, but not always its
        # new output interface, so no rule here matches on -o for host traffic.)
        _run(["iptables", "-N", _GUARD])
        guard = [
            ["-d", SERVICE_CIDR],
            ["-d", KWOK_POD_CIDR],
            ["-i", BRIDGE, "!", "-o", BRIDGE],
        ]
        for match in guard:
            _run(["iptables", "-A", _GUARD, *match, "-j", "REJECT"])
        self._guard_first()
        # A second net that no rule order can bypass: the kwok pods' fake addresses have no
        # route at all (kube-proxy translates Service addresses to them before routing).
        _run(["ip", "route", "add", "unreachable", KWOK_POD_CIDR])
        _run(["iptables", "-t", "nat", "-N", _API_DNAT])
        _run(["iptables", "-t", "nat", "-A", _API_DNAT, "-d", f"{API_SERVICE_IP}/32", "-p", "tcp",
              "--dport", "443", "-j", "DNAT", "--to-destination",
              f"127.0.0.1:{self.api_port}"])  # fmt: skip
        _run(["iptables", "-t", "nat", "-I", "PREROUTING", "1", "-j", _API_DNAT])
        cni = self.directory / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": "kube-nudge-dev",
            "plugins": [{
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(cni / "ipam"),
                },
            }],
        }  # fmt: skip
        (cni / "net.d" / "10-kube-nudge-dev.conflist").write_text(json.dumps(conflist, indent=2))

    def _start_containerd(self, watched: list[Component]) -> None:
        root = self.directory / "containerd"
        self.certs_dir.mkdir(parents=True, exist_ok=True)
        cni_bin = cni_bin_dir()
        config = f"""version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{self.containerd_socket}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.pause_image}"
  disable_apparmor = true
  # Lowering oom_score_adj below containerd's own is refused on these machines (runc:
  # "failed to update /proc/self/oom_score_adj: Permission denied"): clamp it instead.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{self.directory / "cni" / "net.d"}"
  # Registries' hosts.toml, one directory per registry host (`trust_registry`), read at each
  # pull: a registry can be trusted while the node runs.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{self.certs_dir}"
"""
        path = self.directory / "containerd.toml"
        path.write_text(config)
        self._add("containerd", [shutil.which("containerd") or "containerd",
                                 "--config", str(path), "--log-level", "warn"])  # fmt: skip
        poll_until("containerd to serve", self._containerd_serves, [*watched, *self.components], 30)

    def _start_kube_proxy(self) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig), "qps": 50, "burst": 100},
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            "hostnameOverride": NODE_NAME,
            "bindAddress": "127.0.0.1",
            "healthzBindAddress": f"127.0.0.1:{self._free_port()}",
            "metricsBindAddress": f"127.0.0.1:{self._free_port()}",
            # Leave the machine's conntrack settings alone (0: don't change).
            "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                          "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False, "syncPeriod": "30s", "minSyncPeriod": "0s"},
            "nodePortAddresses": [f"{GATEWAY}/32"],
        }  # fmt: skip
        path = self.directory / "kube-proxy.json"
        path.write_text(json.dumps(config, indent=2))
        self._add("kube-proxy", [str(self.binaries.kube_proxy), f"--config={path}", "--v=0"])

    def _start_kubelet(self) -> None:
        root = self.kubelet_root
        root.mkdir(parents=True, exist_ok=True)
        resolv = self.directory / "resolv.conf"
        # Pods get no DNS server that could forward off the machine: names fail fast.
        resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
        config: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": GATEWAY,
            "port": self._free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self._free_port(),
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "failSwapOn": False,
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "resolvConf": str(resolv),
            "evictionHard": {"memory.available": "0%", "nodefs.available": "0%",
                             "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "podLogsDir": str(self.directory / "pod-logs"),
            "volumePluginDir": str(self.directory / "volume-plugins"),
            "registerWithTaints": [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}],
            "serializeImagePulls": False,
            **preloaded_images_policy(self.kube_minor),
        }  # fmt: skip
        path = self.directory / "kubelet.json"
        path.write_text(json.dumps(config, indent=2))
        self._add("kubelet", [
            str(self.binaries.kubelet),
            f"--config={path}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={root}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={GATEWAY}",
            f"--node-labels={NODE_LABEL}=real",
            "--v=0",
        ])  # fmt: skip

    # -- helpers ---------------------------------------------------------------------------

    def _add(self, name: str, argv: list[str]) -> Component:
        component = Component(name, argv, self.directory.parent / "logs" / f"{name}.log")
        self.components.append(component)
        component.start()
        return component

    def _component(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    def _ctr(self, *args: str, timeout: float = 60) -> str:
        return _run(["ctr", "--address", str(self.containerd_socket), "--namespace", "k8s.io",
                     *args], timeout=timeout)  # fmt: skip

    def _containerd_serves(self) -> bool:
        if not self.containerd_socket.exists():
            return False
        try:
            self._ctr("version", timeout=5)
        except (ClusterError, subprocess.TimeoutExpired):
            return False
        return True

    def _no_sandboxes(self) -> bool:
        return not self._ctr("tasks", "list", "--quiet", timeout=10).split()

    def _kill_containers(self) -> None:
        if self._component("containerd") is None or not self._containerd_serves():
            return
        for task in self._ctr("tasks", "list", "--quiet", timeout=10).split():
            try:
                self._ctr("tasks", "kill", "--signal", "SIGKILL", task, timeout=10)
            except ClusterError:
                continue
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._ctr("tasks", "list", "--quiet").split():
            time.sleep(0.1)  # tasks die within milliseconds of SIGKILL; bounded by the deadline

    @staticmethod
    def _kill_pod_processes() -> None:
        """SIGKILL every process in the kubelet's cgroups (what a dead shim left behind)."""
        for tasks in Path("/sys/fs/cgroup/pids/kubepods").rglob("cgroup.procs"):
            try:
                pids = tasks.read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    continue

    def _kill_shims(self, *, any_owner: bool = False) -> None:
        """SIGKILL the runc shims (and so their containers) of this node's containerd, or of
        any kube-nudge-dev node (after a crash, when the socket path is unknown)."""
        marker = str(self.containerd_socket) if not any_owner else "kube-nudge-dev"
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                argv
                and argv[0].endswith(b"containerd-shim-runc-v2")
                and any(marker.encode() in arg for arg in argv)
            ):
                try:
                    os.kill(int(proc.name), 9)
                except OSError:
                    continue
        self._kill_pod_processes()
