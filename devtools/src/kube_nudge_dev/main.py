"""``kube-nudge-dev cluster``: run the local cluster in the foreground until a signal."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from kube_nudge_dev.build import BuildError
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import ImageError
from kube_nudge_dev.node import NODE_LABEL, NODE_NAME, TAINT_KEY
from kube_nudge_dev.processes import ClusterError
from kube_nudge_dev.releases import KubeRelease


class _StopRequested(Exception):
    """Raised from the signal handler so that start-up, too, unwinds and cleans up."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    # One-shot: a second Ctrl-C must not interrupt the clean-up the first one started.
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)
    raise _StopRequested(signal.Signals(signum).name)


def run_dev_cluster(
    directory: str | None,
    *,
    nodes: int = 2,
    real_node: bool = False,
    registry: bool = False,
    kube: KubeRelease | None = None,
) -> int:
    """Start the cluster, print one ready line, run until SIGINT/SIGTERM; return exit code."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise_stop)
    try:
        cluster = LocalCluster(Path(directory) if directory else None, nodes=nodes, kube=kube)
    except BuildError as exc:  # $KUBE_NUDGE_KUBE_VERSION names no pinned release
        print(f"kube-nudge-dev cluster: {exc}", file=sys.stderr)
        return 2
    idle = threading.Event()
    try:
        cluster.start()
        if real_node:
            from kube_nudge_dev.image import build_image  # podman: only for a real node

            image = build_image(Path.cwd())
            cluster.add_real_node((image.archive,))
            print(
                f"real node {NODE_NAME} Ready with {image.ref} loaded (pods need "
                f"nodeSelector {NODE_LABEL}=real and a toleration of {TAINT_KEY})",
                flush=True,
            )
        if registry:
            served = cluster.add_registry()
            trusted = " (the real node trusts it)" if real_node else ""
            print(
                f"registry https://{served.host} serving, its CA {served.ca.cert}{trusted}",
                flush=True,
            )
        print(
            f"dev-cluster ready in {cluster.startup_seconds:.1f} s "
            f"(Kubernetes {cluster.kube_version}): "
            f"export KUBECONFIG={cluster.kubeconfig}  (logs: {cluster.logs})",
            flush=True,
        )
        while True:
            cluster.check()
            idle.wait(0.25)  # child liveness poll; signals interrupt it immediately
    except _StopRequested as stop:
        print(f"dev-cluster: {stop}, stopping", file=sys.stderr, flush=True)
        cluster.stop()
        return 0
    except (ClusterError, BuildError, ImageError) as exc:
        first, _, rest = str(exc).partition("\n")
        print(f"kube-nudge-dev cluster: {first}", file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        cluster.stop()
        return 1
