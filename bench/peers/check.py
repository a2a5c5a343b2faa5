"""Prove that each given peer binary really rolls a Deployment when its ConfigMap changes.

Per peer: a fresh local control plane, a ConfigMap and an opted-in Deployment reading it
through ``envFrom``, the peer as a subprocess through the same ``Tool`` the benchmark uses
(its log in ``--log-dir``), one change to the ConfigMap, and a watch on the Deployment until
the peer's marker changes; then what changed on the template, and the writes the audit log
attributes to the peer's user agent. ``--control`` runs kube-nudge through the same steps.

    BENCH_PEERS=reloader=/path@v1.4.21,wave=/path@v0.11.0 \\
        PYTHONPATH=. .venv/bin/python -m bench.peers.check [--control] [NAME=PATH@V+C ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.audit import AuditLog
from bench.objects import bench_client
from bench.peers import PEERS
from bench.peers.given import PeerBinary, parse_peers
from bench.tools import KubeNudge, Tool, ToolError, ToolSettings, ensure_namespace
from bench.watcher import WorkloadWatcher
from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge_dev.cluster import LocalCluster

NAMESPACE = "peer-check"
CONFIGMAP = "app-config"
DEPLOYMENT = "app"
READY_TIMEOUT = 120.0
RELOAD_TIMEOUT = 60.0


@dataclass(slots=True)
class Outcome:
    """What happened to one tool."""

    name: str
    version: str
    status: str = "failed"  # ok, failed
    detail: str = ""
    ready_seconds: float | None = None
    reload_seconds: float | None = None
    wrote: list[str] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)
    log: Path | None = None


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
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        side.update((f"annotation {key}", value) for key, value in annotations.items())
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(f"{key}: {_short(str(old.get(key)))} -> {_short(str(new.get(key)))}")
    return lines or ["the pod template changed outside its annotations and env"]


def _deployment(opt_in: dict[str, str]) -> JSON:
    labels = {"app": DEPLOYMENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "annotations": opt_in},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    "envFrom": [{"configMapRef": {"name": CONFIGMAP}}],
                }]},
            },
        },
    }  # fmt: skip


async def exercise(tool: Tool, cluster: LocalCluster, outcome: Outcome) -> None:
    """Run ``tool`` in ``cluster``, change the ConfigMap once, wait for its marker to change."""
    kube = bench_client(cluster.kubeconfig)
    audit = AuditLog(cluster.audit_log)
    key = (NAMESPACE, DEPLOYMENT)
    try:
        await ensure_namespace(kube, NAMESPACE)
        await kube.create(CONFIGMAPS.path(NAMESPACE), {
            "metadata": {"name": CONFIGMAP}, "data": {"GREETING": "hello"}})  # fmt: skip
        await kube.create(DEPLOYMENTS.path(NAMESPACE), _deployment(tool.opt_in()))
        await tool.prepare(kube)
        async with WorkloadWatcher(kube, DEPLOYMENTS.path(NAMESPACE), tool) as watch:
            mark = audit.mark()
            tool.start(cluster.kubeconfig)
            outcome.ready_seconds = await tool.wait_ready(READY_TIMEOUT)
            await watch.until(lambda: watch.seen[key].adopted, READY_TIMEOUT, "adoption")
            await asyncio.sleep(1.0)  # let an adoption rollout's echo pass
            before = (await kube.get(DEPLOYMENTS.path(NAMESPACE, DEPLOYMENT)))["spec"]["template"]
            marker = watch.seen[key].marker
            await kube.merge_patch(CONFIGMAPS.path(NAMESPACE, CONFIGMAP),
                                   {"data": {"GREETING": "bye"}})  # fmt: skip
            changed_at = time.perf_counter()
            await watch.until(lambda: watch.seen[key].marker != marker, RELOAD_TIMEOUT,
                              "the marker to change")  # fmt: skip
            outcome.reload_seconds = watch.seen[key].marker_at - changed_at
            after = (await kube.get(DEPLOYMENTS.path(NAMESPACE, DEPLOYMENT)))["spec"]["template"]
            outcome.wrote = template_diff(before, after)
            await asyncio.sleep(1.0)
            outcome.writes = audit.writes(tool.writer_agent, mark).by_resource
            outcome.status = "ok" if outcome.writes.get("deployments") else "failed"
            if outcome.status != "ok":
                outcome.detail = f"no Deployment write attributed to agent {tool.writer_agent!r}"
    except (TimeoutError, ToolError) as exc:
        stage = "became ready" if outcome.ready_seconds is None else "rolled the Deployment"
        outcome.detail = f"never {stage}: {exc}"
    finally:
        await asyncio.to_thread(tool.stop)
        await kube.aclose()


def run_one(name: str, binary: PeerBinary | None, log_dir: Path) -> Outcome:
    """Exercise one tool (a peer binary, or kube-nudge) in its own fresh cluster."""
    log = log_dir / f"{name}.log"
    log.unlink(missing_ok=True)
    tool: Tool
    if binary is None:
        from kube_nudge import __version__

        tool, version = KubeNudge(log, ToolSettings()), __version__
    else:
        tool, version = PEERS[name](log, ToolSettings(), binary), binary.version
    outcome = Outcome(name, version, log=log)
    with LocalCluster() as cluster:
        print(f"{name}: cluster up in {cluster.startup_seconds:.1f} s", flush=True)
        asyncio.run(exercise(tool, cluster, outcome))
    return outcome


def _report(outcome: Outcome) -> None:
    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    print(f"== {outcome.name} {outcome.version}: {outcome.status.upper()}")
    if outcome.detail:
        print(f"   {outcome.detail}")
    print(f"   ready after {secs(outcome.ready_seconds)}; rolled "
          f"{secs(outcome.reload_seconds)} after the ConfigMap change")  # fmt: skip
    for line in outcome.wrote:
        print(f"   wrote {line}")
    if outcome.writes:
        print(f"   writes by its user agent (audit log): {outcome.writes}")
    print(f"   log: {outcome.log}")


def main(argv: list[str] | None = None) -> int:
    """Exercise every given peer; exit 1 unless each one rolled, 2 on a bad entry."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers.check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("peers", nargs="*", help="NAME=PATH@VERSION+COMMIT (default: BENCH_PEERS)")
    parser.add_argument("--control", action="store_true", help="also run kube-nudge")
    parser.add_argument("--log-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "kube-nudge-peer-check")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        text = ",".join(args.peers) if args.peers else os.environ.get("BENCH_PEERS", "")
        peers = parse_peers(text, tuple(PEERS))
    except ValueError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2
    if not peers and not args.control:
        parser.error("no peers given: pass NAME=PATH@VERSION+COMMIT or set BENCH_PEERS")
    todo: list[tuple[str, PeerBinary | None]] = [("kube-nudge", None)] if args.control else []
    todo += [(peer.name, peer) for peer in peers]
    outcomes = []
    for name, binary in todo:
        outcome = run_one(name, binary, args.log_dir)
        _report(outcome)
        outcomes.append(outcome)
    return 0 if all(outcome.status == "ok" for outcome in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
