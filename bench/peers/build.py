"""Build the peer controllers (Stakater Reloader, Wave) and say how to run them out-of-cluster.

Each peer is pinned by a wrapper module in ``gomod/<peer>/``: its go.mod requires the peer at
one release, carries the peer's own replace lines that point at module versions (``go install``
refuses any module that has replace directives) and names the peer's main package in a ``tool``
directive; its go.sum is committed, so builds run with ``-mod=readonly``. Everything comes from
the Go module proxy through the ``go`` command. ``python -m bench.peers.build pin <peer>`` writes
a wrapper (the latest release unless ``--version`` says otherwise); ``build <peer>`` builds it
into ``<cache>/peers-<name>-<version>/bin/<name>``, only when missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kube_nudge_dev.build import BuildError, cache_root
from kube_nudge_dev.cluster import free_port

GOMOD = Path(__file__).resolve().parent / "gomod"
_WRAPPER_PREFIX = "kube-nudge.dev/bench/peers"


class PeerUnavailable(BuildError):
    """The Go module proxy will not serve the peer's module."""


@dataclass(frozen=True, slots=True)
class PeerSpec:
    """What the benchmark needs to know about one peer."""

    name: str
    module: str
    package: str  # the main package
    opt_in: Mapping[str, str]  # workload annotations that make the peer manage it
    marker: str  # pod-template annotation the peer writes when it rolls a workload
    adopts: bool  # True: it writes ``marker`` as soon as it sees an opted-in workload
    default_port: int  # where it serves HTTP when no flag moves it (0: nowhere)
    probe_path: str = "/metrics"
    notes: tuple[str, ...] = field(default=())

    @property
    def wrapper(self) -> Path:
        """The wrapper module directory."""
        return GOMOD / self.name

    @property
    def version(self) -> str | None:
        """The pinned release, read from the wrapper's go.mod (None: not pinned yet)."""
        try:
            text = (self.wrapper / "go.mod").read_text()
        except OSError:
            return None
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", text, re.M)
        return match.group(1) if match else None


PEERS: dict[str, PeerSpec] = {
    "reloader": PeerSpec(
        name="reloader",
        module="github.com/stakater/Reloader",
        package="github.com/stakater/Reloader",
        opt_in={"reloader.stakater.com/auto": "true"},
        marker="reloader.stakater.com/last-reloaded-from",  # with --reload-strategy=annotations
        adopts=False,
        default_port=9090,
        probe_path="/metrics",
    ),
    "wave": PeerSpec(
        name="wave",
        module="github.com/wave-k8s/wave",
        package="github.com/wave-k8s/wave/cmd/manager",
        opt_in={"wave.pusher.com/update-on-config-change": "true"},
        marker="wave.pusher.com/config-hash",
        adopts=True,
        default_port=8080,  # controller-runtime's default metrics address
        probe_path="/metrics",
    ),
}


def _spec(name: str) -> PeerSpec:
    try:
        return PEERS[name]
    except KeyError:
        raise ValueError(f"unknown peer {name!r}; known: {sorted(PEERS)}") from None


def peer_bin_dir(name: str, version: str) -> Path:
    """Where one peer release is built."""
    return cache_root() / f"peers-{name}-{version}" / "bin"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError("cannot build the peers: no Go toolchain on PATH")
    return go


def _go_env(mod: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOTOOLCHAIN="local",
        GOWORK="off",
        CGO_ENABLED="0",
        GOFLAGS=f"-mod={mod} -buildvcs=false -trimpath",
    )
    return env


def _proxy_refusal(output: str) -> str | None:
    """The proxy's refusal line in ``go`` output, if that is why it failed."""
    for line in output.splitlines():
        if "403 Forbidden" in line or "410 Gone" in line or "not available" in line:
            return line.strip()
    return None


def _run_go(args: list[str], cwd: Path, mod: str, what: str) -> str:
    result = subprocess.run(
        [_go(), *args], cwd=cwd, env=_go_env(mod), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        output = result.stderr + result.stdout  # `go mod download -json` reports on stdout
        refusal = _proxy_refusal(output)
        if refusal:
            raise PeerUnavailable(f"{what}: the Go module proxy refused it ({refusal})")
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise BuildError(f"{what} failed (exit {result.returncode}): {tail}")
    return result.stdout


# -- pinning -------------------------------------------------------------------------------


def latest_release(module: str) -> str:
    """The newest non-prerelease version of ``module`` on the proxy."""
    with tempfile.TemporaryDirectory(prefix="kube-nudge-peer-") as tmp:
        out = _run_go(["list", "-m", "-versions", module], Path(tmp), "mod", f"listing {module}")
    releases = [v for v in out.split()[1:] if "-" not in v]
    if not releases:
        raise BuildError(f"{module} has no release on the proxy")
    return releases[-1]


def _module_replaces(gomod: str) -> list[str]:
    """The replace lines of a go.mod whose targets are module versions (not local paths)."""
    lines: list[str] = []
    in_block = False
    for raw in gomod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if in_block:
            if line == ")":
                in_block = False
                continue
            body = line
        elif line.startswith("replace ("):
            in_block = True
            continue
        elif line.startswith("replace "):
            body = line.removeprefix("replace ").strip()
        else:
            continue
        if "=>" not in body:
            continue
        target = body.split("=>", 1)[1].split()
        if len(target) == 2 and not target[0].startswith((".", "/")):
            lines.append(" ".join(body.split()))
    return lines


def pin(name: str, version: str | None = None, *, say: Callable[[str], None] = print) -> str:
    """Write ``gomod/<name>/`` (go.mod and go.sum) for ``version`` (default: latest release)."""
    spec = _spec(name)
    version = version or latest_release(spec.module)
    say(f"pinning {name} to {spec.module}@{version}")
    with tempfile.TemporaryDirectory(prefix="kube-nudge-peer-") as tmp:
        what = f"downloading {spec.module}@{version}"
        info = json.loads(
            _run_go(
                ["mod", "download", "-json", f"{spec.module}@{version}"], Path(tmp), "mod", what
            )
        )
        replaces = _module_replaces(Path(info["GoMod"]).read_text())
        work = Path(tmp) / name
        work.mkdir()
        text = [
            f"// Wrapper module pinning {name}; written by `python -m bench.peers.build pin`.",
            f"module {_WRAPPER_PREFIX}/{name}",
            "",
            "go 1.26.0",
            "",
            f"require {spec.module} {version}",
            "",
            f"tool {spec.package}",
        ]
        if replaces:
            text += [
                "",
                f"// Module-version replace lines of {spec.module}@{version}.",
                "replace (",
            ]
            text += [f"\t{line}" for line in replaces]
            text.append(")")
        (work / "go.mod").write_text("\n".join(text) + "\n")
        _run_go(["mod", "tidy"], work, "mod", f"go mod tidy for {name}")
        spec.wrapper.mkdir(parents=True, exist_ok=True)
        for file in ("go.mod", "go.sum"):
            shutil.copy2(work / file, spec.wrapper / file)
    say(f"wrote {spec.wrapper}/go.mod and go.sum ({len(replaces)} replace lines)")
    return version


# -- building ------------------------------------------------------------------------------


def ensure_peer(name: str, *, progress: Callable[[str], None] | None = None) -> Path:
    """Return the peer's binary, building the pinned release into the cache if missing."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    spec = _spec(name)
    version = spec.version
    if version is None:
        raise BuildError(
            f"{name} is not pinned: no {spec.wrapper / 'go.mod'} "
            f"(run `python -m bench.peers.build pin {name}`)"
        )
    out_dir = peer_bin_dir(name, version)
    target = out_dir / name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    say(f"building {name} {version} into {target} (several minutes the first time)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kube-nudge-peer-") as tmp:
        built = Path(tmp) / name
        args = ["build", "-ldflags=-s -w", "-o", str(built), spec.package]
        _run_go(args, spec.wrapper, "readonly", f"building {name} {version}")
        partial = out_dir / f".{name}.partial"
        shutil.copy2(built, partial)
        partial.replace(target)  # atomic: a killed build never leaves half a binary
    say(f"built {name} {version} in {time.monotonic() - started:.0f} s")
    return target


# -- running -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerLaunch:
    """How to start one peer: command line, environment, and a URL that answers once up."""

    argv: list[str]
    env: dict[str, str]
    probe_url: str | None
    fixed_port: bool  # True: the peer's HTTP port cannot be moved, so one instance at a time


def help_flags(binary: Path) -> set[str]:
    """The flag names (without dashes) that ``binary --help`` lists."""
    result = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, timeout=30, check=False
    )
    text = result.stdout + result.stderr
    return set(re.findall(r"^\s+(?:-\w, )?--?([A-Za-z0-9][\w.-]*)", text, re.M))


def _first(flags: set[str], candidates: tuple[str, ...]) -> str | None:
    return next((name for name in candidates if name in flags), None)


def peer_launch(name: str, kubeconfig: Path, namespace: str | None) -> PeerLaunch:
    """Argv, env and probe URL to run peer ``name`` against ``kubeconfig``.

    ``namespace`` limits it to one namespace where the peer can; flags are picked from what
    the pinned binary's ``--help`` lists, and HTTP ports are random free ones where movable.
    """
    spec = _spec(name)
    binary = ensure_peer(name)
    flags = help_flags(binary)
    env = dict(os.environ)
    env["KUBECONFIG"] = str(kubeconfig)
    argv = [str(binary)]
    port = spec.default_port
    fixed = True
    if name == "reloader":
        if "reload-strategy" in flags:
            argv.append("--reload-strategy=annotations")
        if namespace is not None:
            env["KUBERNETES_NAMESPACE"] = namespace  # Reloader's own way to watch one namespace
        elif "namespaces-to-ignore" in flags:
            argv.append("--namespaces-to-ignore=kube-system,kube-public,kube-node-lease")
        env.pop("RELOADER_NAMESPACE", None)  # unset: no meta-info ConfigMap is published
        listen = _first(flags, ("metrics-bind-address", "http-listen-address", "listen-address"))
    else:
        if "leader-election" in flags:
            argv.append("--leader-election=false")
        elif "leader-elect" in flags:
            argv.append("--leader-elect=false")
        if "enable-webhooks" in flags:
            argv.append("--enable-webhooks=false")
        if namespace is not None and (flag := _first(flags, ("namespace", "watch-namespace"))):
            argv.append(f"--{flag}={namespace}")
        health = _first(flags, ("health-probe-bind-address", "health-addr"))
        if health:
            argv.append(f"--{health}=127.0.0.1:{free_port()}")
        listen = _first(flags, ("metrics-bind-address", "metrics-addr", "metrics-address"))
    if listen:
        port, fixed = free_port(), False
        argv.append(f"--{listen}=127.0.0.1:{port}")
    probe = f"http://127.0.0.1:{port}{spec.probe_path}" if port else None
    return PeerLaunch(argv, env, probe, fixed)


def peer_command(
    name: str, kubeconfig: Path, namespace: str | None
) -> tuple[list[str], dict[str, str]]:
    """Argv and environment to run peer ``name`` out-of-cluster against ``kubeconfig``."""
    launch = peer_launch(name, kubeconfig, namespace)
    return launch.argv, launch.env


def main(argv: list[str] | None = None) -> int:
    """``pin <peer> [--version V]`` or ``build <peer>...``."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.build", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    pin_cmd = sub.add_parser("pin", help="write the wrapper module for one peer")
    pin_cmd.add_argument("peer", choices=sorted(PEERS))
    pin_cmd.add_argument("--version", help="a release tag (default: the latest)")
    build_cmd = sub.add_parser("build", help="build pinned peers into the cache")
    build_cmd.add_argument("peers", nargs="*", help=f"default: all of {sorted(PEERS)}")
    args = parser.parse_args(argv)
    try:
        if args.command == "pin":
            pin(args.peer, args.version)
        else:
            for name in args.peers or sorted(PEERS):
                print(f"{name}: {ensure_peer(name, progress=print)}")
    except (BuildError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
