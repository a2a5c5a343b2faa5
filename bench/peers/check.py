"""Prove that each peer really rolls a Deployment when the ConfigMap it consumes changes.

Per peer: a fresh local control plane, a namespace with a ConfigMap and an opted-in Deployment
that reads it through ``envFrom``, the peer as a subprocess (its log in ``--log-dir``), one
change to the ConfigMap, and a watch on the Deployment until its pod template changes.
``--control`` runs kube-nudge through the same steps, to show the harness itself works.

    PYTHONPATH=. .venv/bin/python -m bench.peers.check [reloader] [wave] [--control]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx2 as httpx

from bench.peers.build import PEERS, ensure_peer, latest_release, peer_launch
from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH
from kube_nudge_dev.build import BuildError, cache_root
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.waiting import wait_for_object

NAMESPACE = "peer-check"
CONFIGMAP = "app-config"
DEPLOYMENT = "app"
READY_TIMEOUT = 60.0
RELOAD_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Target:
    """One controller to exercise and how to tell what it did."""

    name: str
    version: str
    argv: list[str]
    env: dict[str, str] | None
    probe_url: str | None
    opt_in: Mapping[str, str]
    marker: str
    adopted: Callable[[JSON], bool] | None  # None: nothing shows adoption; settle instead
    settle: float = 2.0
    namespaces: tuple[str, ...] = field(default=())


@dataclass(slots=True)
class Outcome:
    """What happened to one target."""

    name: str
    version: str
    status: str  # ok, failed, unavailable
    detail: str = ""
    ready_seconds: float | None = None
    reload_seconds: float | None = None
    wrote: list[str] = field(default_factory=list)
    log: Path | None = None


def _template_annotations(obj: JSON) -> dict[str, str]:
    template = obj.get("spec", {}).get("template", {})
    return dict((template.get("metadata") or {}).get("annotations") or {})


def _env(template: JSON) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            pairs[f"{container['name']}: env {var.get('name')}"] = json.dumps(
                var.get("value", var.get("valueFrom"))
            )
    return pairs


def _short(value: str, width: int = 90) -> str:
    return value if len(value) <= width else value[: width - 3] + "..."


def template_diff(before: JSON, after: JSON) -> list[str]:
    """What changed between two pod templates: annotations and container env, else a note."""
    lines = []
    old, new = _env(before), _env(after)
    for side, template in ((old, before), (new, after)):
        annotations = _template_annotations({"spec": {"template": template}})
        side.update((f"annotation {key}", value) for key, value in annotations.items())
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {_short(str(old.get(key)))} -> {_short(str(new.get(key)))}")
    return lines or ["the pod template changed outside its annotations and env"]


def _deployment(opt_in: Mapping[str, str]) -> JSON:
    labels = {"app": DEPLOYMENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "annotations": dict(opt_in)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{
                        "name": "app",
                        "image": "registry.invalid/app:1",
                        "envFrom": [{"configMapRef": {"name": CONFIGMAP}}],
                    }],
                },
            },
        },
    }  # fmt: skip


async def _ensure_namespace(kube: KubeClient, name: str) -> None:
    try:
        await kube.create(NAMESPACES.path(), {"metadata": {"name": name}})
    except ApiError as exc:
        if not exc.conflict:
            raise


class _Exited(RuntimeError):
    pass


async def _while_alive(process: subprocess.Popen[bytes], work: Awaitable[T]) -> T:
    """Await ``work``, failing at once if ``process`` exits meanwhile."""
    task = asyncio.ensure_future(work)
    while not task.done():
        if process.poll() is not None:
            task.cancel()
            raise _Exited(f"exited with code {process.returncode}")
        await asyncio.wait({task}, timeout=0.05)
    return task.result()


async def _probe(url: str) -> None:
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            try:
                await http.get(url)
                return
            except httpx.TransportError:
                await asyncio.sleep(0.05)


def _spawn(target: Target, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(target.argv, env=target.env, stdout=log, stderr=subprocess.STDOUT)


async def exercise(target: Target, kubeconfig: Path, log_path: Path) -> Outcome:
    """Run ``target`` in a cluster, change the ConfigMap once, wait for the rollout."""
    outcome = Outcome(target.name, target.version, "failed", log=log_path)
    kube = KubeClient.from_config(kubeconfig)
    deployments = DEPLOYMENTS.path(NAMESPACE)
    process: subprocess.Popen[bytes] | None = None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        for namespace in (NAMESPACE, *target.namespaces):
            await _ensure_namespace(kube, namespace)
        await kube.create(CONFIGMAPS.path(NAMESPACE), {
            "metadata": {"name": CONFIGMAP}, "data": {"GREETING": "hello"}})  # fmt: skip
        await kube.create(deployments, _deployment(target.opt_in))
        started = time.perf_counter()
        process = _spawn(target, log_path)
        try:
            if target.probe_url:
                await _while_alive(
                    process, asyncio.wait_for(_probe(target.probe_url), READY_TIMEOUT)
                )
            if target.adopted is not None:
                adoption = wait_for_object(
                    kube, deployments, DEPLOYMENT, target.adopted, timeout=READY_TIMEOUT
                )
                await _while_alive(process, adoption)
            else:
                await _while_alive(process, asyncio.sleep(target.settle))
            outcome.ready_seconds = time.perf_counter() - started
            before = (await kube.get(DEPLOYMENTS.path(NAMESPACE, DEPLOYMENT)))["spec"]["template"]
            changed_at = time.perf_counter()
            await kube.merge_patch(
                CONFIGMAPS.path(NAMESPACE, CONFIGMAP), {"data": {"GREETING": "bye"}}
            )
            rollout = wait_for_object(
                kube,
                deployments,
                DEPLOYMENT,
                lambda obj: obj["spec"]["template"] != before,
                timeout=RELOAD_TIMEOUT,
            )
            after = await _while_alive(process, rollout)
            outcome.reload_seconds = time.perf_counter() - changed_at
            outcome.wrote = template_diff(before, after["spec"]["template"])
            outcome.status = "ok"
        except TimeoutError:
            stage = "became ready" if outcome.ready_seconds is None else "rolled the Deployment"
            outcome.detail = f"never {stage}"
        except _Exited as exc:
            outcome.detail = str(exc)
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        await kube.aclose()
    return outcome


def _peer_target(name: str, kubeconfig: Path) -> Target:
    spec = PEERS[name]
    launch = peer_launch(name, kubeconfig, None)

    def adopted(obj: JSON) -> bool:
        return spec.marker in _template_annotations(obj)

    return Target(
        name=name,
        version=spec.version or "?",
        argv=launch.argv,
        env=launch.env,
        probe_url=launch.probe_url,
        opt_in=spec.opt_in,
        marker=spec.marker,
        adopted=adopted if spec.adopts else None,
    )


def _control_target(kubeconfig: Path) -> Target:
    from kube_nudge import __version__

    port = free_port()
    exe = Path(sys.executable).with_name("kube-nudge")

    def adopted(obj: JSON) -> bool:
        annotations = obj.get("metadata", {}).get("annotations") or {}
        return BASELINE_HASH in annotations or CONFIG_HASH in _template_annotations(obj)

    return Target(
        name="kube-nudge",
        version=__version__,
        argv=[str(exe), "run", "--kubeconfig", str(kubeconfig),
              "--metrics-addr", f"127.0.0.1:{port}", "--state-namespace", "kube-nudge"],
        env=None,
        probe_url=f"http://127.0.0.1:{port}/readyz",
        opt_in={"kube-nudge.io/enabled": "true"},
        marker=CONFIG_HASH,
        adopted=adopted,
        namespaces=("kube-nudge",),
    )  # fmt: skip


def run_one(name: str, log_dir: Path) -> Outcome:
    """Build (if needed) and exercise one target in its own fresh cluster."""
    if name != "kube-nudge":
        try:
            ensure_peer(name)
        except BuildError as exc:
            detail = str(exc)
            if PEERS[name].version is None:
                try:  # say whether it could be pinned now, or why not
                    latest = latest_release(PEERS[name].module)
                    detail += f"; the latest release on the proxy is {latest}"
                except BuildError as why:
                    detail += f"; and it cannot be: {why}"
            return Outcome(name, PEERS[name].version or "unpinned", "unavailable", detail)
    make: Callable[[Path], Target] = (
        _control_target if name == "kube-nudge" else (lambda kc: _peer_target(name, kc))
    )
    with LocalCluster() as cluster:
        target = make(cluster.kubeconfig)
        print(f"{name}: cluster up in {cluster.startup_seconds:.1f} s")
        print(f"{name}: running {' '.join(target.argv)}", flush=True)
        return asyncio.run(exercise(target, cluster.kubeconfig, log_dir / f"{name}.log"))


def _report(outcome: Outcome) -> None:
    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    print(f"== {outcome.name} {outcome.version}: {outcome.status.upper()}")
    if outcome.detail:
        print(f"   {outcome.detail}")
    if outcome.status != "unavailable":
        ready, reload = secs(outcome.ready_seconds), secs(outcome.reload_seconds)
        print(f"   ready after {ready}; first reload {reload} after the ConfigMap change")
    for line in outcome.wrote:
        print(f"   wrote {line}")
    if outcome.log is not None:
        print(f"   log: {outcome.log}")


def main(argv: list[str] | None = None) -> int:
    """Exercise the named peers (default: all); exit 1 unless every one reloaded."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.check", description=__doc__)
    parser.add_argument("peers", nargs="*", help=f"default: all of {sorted(PEERS)}")
    parser.add_argument("--control", action="store_true", help="also run kube-nudge")
    parser.add_argument("--log-dir", type=Path, default=cache_root() / "peer-check-logs")
    args = parser.parse_args(argv)
    names: list[str] = list(args.peers or sorted(PEERS))
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {sorted(PEERS)}")
    if args.control:
        names.insert(0, "kube-nudge")
    outcomes = []
    for name in names:
        outcome = run_one(name, args.log_dir)
        _report(outcome)
        outcomes.append(outcome)
    return 0 if all(outcome.status == "ok" for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
