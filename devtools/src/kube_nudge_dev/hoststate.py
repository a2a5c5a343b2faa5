"""What a real node changes on the machine, captured before it starts and put back after.

A kubelet, kube-proxy and containerd change machine-wide settings: kernel flags (the
kubelet's ``vm.overcommit_memory``, ``kernel.panic``, ``kernel.panic_on_oops``; forwarding),
iptables chains (``KUBE-FIREWALL``, ``KUBE-KUBELET-CANARY``, kube-proxy's rules), mounts (pod
volumes, the kubelet's root directory, network namespaces), network links (the CNI bridge,
veths) and the ``kubepods`` cgroups. ``capture`` records each of them; ``restore`` undoes
whatever appeared since; ``differences`` names what still differs, so a test can check that
stopping the cluster leaves the machine as it found it.

The iptables tables are restored whole from the snapshot (``iptables-restore``): the real
node owns the machine's firewall while it runs, which is why only one runs at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess  # nosec B404 # iptables, ip and umount are the only ways to restore these
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: Kernel settings the node's components change (as /proc/sys paths).
SYSCTLS = (
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/forwarding",
    "net/ipv4/conf/all/route_localnet",
    "net/ipv6/conf/all/forwarding",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/netfilter/nf_conntrack_max",
    "net/netfilter/nf_conntrack_tcp_timeout_established",
    "net/netfilter/nf_conntrack_tcp_timeout_close_wait",
)
_IPTABLES = ("iptables", "ip6tables")
#: A table that holds only these (built-in chains, policy ACCEPT) was never really used.
_UNUSED_CHAINS = frozenset(
    f":{chain} ACCEPT" for chain in ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
)
_CGROUP_ROOT = Path("/sys/fs/cgroup")
_NETNS_DIRS = (Path("/run/netns"), Path("/var/run/netns"))
#: The kubelet writes container log symlinks here whatever its root directory is.
CONTAINER_LOG_LINKS = Path("/var/log/containers")
_TIMEOUT = 30


@dataclass
class HostState:
    """One snapshot of the settings a node changes."""

    sysctls: dict[str, str] = field(default_factory=dict)
    iptables: dict[str, str] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    log_links: list[str] | None = None
    """Entries of /var/log/containers, or None if it did not exist."""
    owner: str = ""
    """The node directory whose mounts are to be undone (for a restore after a crash)."""

    def save(self, path: Path) -> None:
        """Write the snapshot as JSON (so a later run can restore after a crash)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> HostState:
        """Read a snapshot written by ``save``."""
        return cls(**json.loads(path.read_text()))


def _run(argv: list[str], stdin: str | None = None) -> str:
    result = subprocess.run(  # nosec B603 # fixed argv of system tools, no shell
        argv, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )
    return result.stdout if result.returncode == 0 else ""


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name


def _iptables_dump(tool: str) -> str:
    if shutil.which(f"{tool}-save") is None:
        return ""
    return _run([f"{tool}-save"])


def normalise_iptables(dump: str) -> str:
    """A dump without counters and comments, with unused tables (only built-in chains with
    policy ACCEPT and no rules; iptables-nft keeps a table once touched) left out, for
    comparing. An empty chain of its own makes a table count."""
    tables: list[list[str]] = []
    for raw in dump.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            tables.append([line])
        elif tables:
            if line.startswith(":"):
                name, policy = line.split()[:2]
                line = f"{name} {policy}"
            tables[-1].append(line)
    kept = []
    for table in tables:
        body = [line for line in table[1:] if line != "COMMIT"]
        chains = [line for line in body if line.startswith(":")]
        rules = [line for line in body if not line.startswith(":")]
        if rules or any(line not in _UNUSED_CHAINS for line in chains):
            kept.append("\n".join(table))
    return "\n".join(sorted(kept))


def _links() -> list[str]:
    return sorted(path.name for path in Path("/sys/class/net").iterdir())


def _routes() -> list[str]:
    return sorted(line.strip() for line in _run(["ip", "-4", "route", "show"]).splitlines())


def _mounts() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        points.append(fields[4])
    return sorted(set(points))


def _netns() -> list[str]:
    found: set[str] = set()
    for directory in _NETNS_DIRS:
        if directory.is_dir():
            found.update(str(path) for path in directory.iterdir())
    return sorted(found)


def _cgroups() -> list[str]:
    """The kubelet's cgroups (``kubepods`` and below) in every v1 hierarchy."""
    found = []
    if _CGROUP_ROOT.is_dir():
        for hierarchy in _CGROUP_ROOT.iterdir():
            top = hierarchy / "kubepods"
            if top.is_dir():
                found += [str(top)] + [str(p) for p in top.rglob("*") if p.is_dir()]
    return sorted(found)


def capture() -> HostState:
    """What the machine looks like now."""
    sysctls = {}
    for name in SYSCTLS:
        try:
            sysctls[name] = _sysctl_path(name).read_text().strip()
        except OSError:
            continue
    log_links = (
        sorted(p.name for p in CONTAINER_LOG_LINKS.iterdir())
        if CONTAINER_LOG_LINKS.is_dir()
        else None
    )
    return HostState(
        sysctls=sysctls,
        iptables={tool: _iptables_dump(tool) for tool in _IPTABLES},
        links=_links(),
        routes=_routes(),
        mounts=_mounts(),
        netns=_netns(),
        cgroups=_cgroups(),
        log_links=log_links,
    )


def set_sysctl(name: str, value: str) -> None:
    """Set one kernel flag (``name`` as a /proc/sys path)."""
    _sysctl_path(name).write_text(value)


def restore(before: HostState, *, owned: tuple[Path, ...], bridge: str) -> None:
    """Undo what appeared since ``before``: mounts under ``owned`` (and network namespaces),
    ``bridge`` and the veths on it, cgroups, log links, iptables and kernel flags (in that
    order: mounts hold namespaces, links hold rules). Mounts and links of other programs
    (a podman build meanwhile) are left alone."""
    prefixes = tuple(str(path) for path in (*owned, *_NETNS_DIRS))
    new_mounts = set(_mounts()) - set(before.mounts)
    for point in sorted(new_mounts, key=len, reverse=True):
        if point.startswith(prefixes):
            _run(["umount", "--lazy", point])
    for path in set(_netns()) - set(before.netns):
        Path(path).unlink(missing_ok=True)
    for link in set(_links()) - set(before.links):
        master = Path("/sys/class/net") / link / "master"
        if link == bridge or (master.exists() and master.resolve().name == bridge):
            _run(["ip", "link", "delete", link])
    for route in set(_routes()) - set(before.routes):
        if route.startswith("unreachable "):  # the node's own (the bridge's go with it)
            _run(["ip", "route", "delete", *route.split()])
    for group in sorted(set(_cgroups()) - set(before.cgroups), key=len, reverse=True):
        try:
            os.rmdir(group)
        except OSError:
            continue  # a process still in it: differences() will name it
    _restore_log_links(before.log_links)
    for tool, dump in before.iptables.items():
        if shutil.which(f"{tool}-restore"):
            _restore_tables(tool, dump)
    for name, value in before.sysctls.items():
        try:
            if _sysctl_path(name).read_text().strip() != value:
                set_sysctl(name, value)
        except OSError:
            continue


def _restore_tables(tool: str, dump: str) -> None:
    if dump:
        _run([f"{tool}-restore"], stdin=dump)
    # Tables that did not exist before are not in the dump: empty them.
    before = {line[1:] for line in dump.splitlines() if line.startswith("*")}
    now = {line[1:] for line in _iptables_dump(tool).splitlines() if line.startswith("*")}
    for table in now - before:
        _run([tool, "-t", table, "-F"])
        _run([tool, "-t", table, "-X"])


def _restore_log_links(before: list[str] | None) -> None:
    if not CONTAINER_LOG_LINKS.is_dir():
        return
    keep = set(before or ())
    for entry in CONTAINER_LOG_LINKS.iterdir():
        if entry.name not in keep:
            entry.unlink(missing_ok=True)
    if before is None:
        with contextlib.suppress(OSError):  # not empty: something else wrote there
            CONTAINER_LOG_LINKS.rmdir()


def differences(before: HostState, after: HostState, *, owned: tuple[Path, ...] = ()) -> list[str]:
    """One line per setting that differs between two snapshots (empty: restored); with
    ``owned``, only mounts under those directories (or network namespaces) count."""
    found = []
    for name in sorted(set(before.sysctls) | set(after.sysctls)):
        old, new = before.sysctls.get(name), after.sysctls.get(name)
        if old != new:
            found.append(f"sysctl {name}: {old} -> {new}")
    for tool in _IPTABLES:
        if normalise_iptables(before.iptables.get(tool, "")) != normalise_iptables(
            after.iptables.get(tool, "")
        ):
            found.append(f"{tool} rules differ")
    prefixes = tuple(str(path) for path in (*owned, *_NETNS_DIRS))
    for what in ("links", "routes", "mounts", "netns", "cgroups"):
        old_set, new_set = set(getattr(before, what)), set(getattr(after, what))
        if what == "mounts" and owned:
            old_set = {point for point in old_set if point.startswith(prefixes)}
            new_set = {point for point in new_set if point.startswith(prefixes)}
        found += [f"{what}: new {item}" for item in sorted(new_set - old_set)]
        found += [f"{what}: gone {item}" for item in sorted(old_set - new_set)]
    if before.log_links != after.log_links:
        found.append(f"{CONTAINER_LOG_LINKS}: {before.log_links} -> {after.log_links}")
    return found
