"""The ``kube-nudge`` command line: ``run`` the controller, or start a ``dev-cluster``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kube_nudge import __version__


def _dev_cluster_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "dev-cluster",
        help="run a real local control plane (etcd, apiserver, kcm, scheduler, kwok)",
        description="Start a local Kubernetes control plane with fake kwok nodes; write "
        "DIR/kubeconfig; run until SIGINT/SIGTERM, then stop everything.",
    )
    parser.add_argument("--dir", help="where to write kubeconfig and logs (default: a temp dir)")
    parser.add_argument("--nodes", type=int, default=2, help="number of fake nodes (default 2)")
    parser.set_defaults(handler=_run_dev_cluster)

    build = sub.add_parser(
        "build-control-plane",
        help="build (or find) the control-plane binaries and print their paths",
    )
    build.set_defaults(handler=_run_build)


def _run_dev_cluster(args: argparse.Namespace) -> int:
    from kube_nudge.devcluster.main import run_dev_cluster

    return run_dev_cluster(args.dir, nodes=args.nodes)


def _run_build(args: argparse.Namespace) -> int:
    from kube_nudge.devcluster.build import BuildError, ensure_binaries

    try:
        for name, path in ensure_binaries().items():
            print(f"{name}\t{path}")
    except BuildError as exc:
        print(f"kube-nudge: {exc}", file=sys.stderr)
        return 1
    return 0


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "run",
        help="run the controller",
        description="Roll opted-in workloads when the ConfigMaps/Secrets they consume change.",
    )
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    add("--context", help="kubeconfig context (default: current)")
    add(
        "--namespace",
        "-n",
        action="append",
        default=[],
        dest="namespaces",
        help="only watch this namespace (repeatable; default: all)",
    )
    add("--source-selector", help="label selector for ConfigMaps/Secrets to watch")
    add("--workload-selector", help="label selector for workloads to watch")
    add(
        "--workload",
        action="append",
        default=[],
        metavar="GROUP/VERSION/PLURAL=PATH",
        help="also manage a custom resource with a pod template at PATH (repeatable)",
    )
    add(
        "--compat", action="store_true", help="also opt in workloads annotated for Wave or Reloader"
    )
    add("--debounce", default="2s", help="default debounce window (default 2s)")
    add(
        "--max-rollouts",
        default="3/5m",
        help="default cap: at most N rollouts per window per workload (default 3/5m)",
    )
    add("--workers", type=int, default=64, help="concurrent reconciles (default 64)")
    add("--write-qps", type=float, default=500.0, help="client-side write rate (default 500/s)")
    add("--write-burst", type=int, default=1000, help="client-side write burst (default 1000)")
    add(
        "--metrics-addr",
        default=":8080",
        help="address for /metrics, /healthz, /readyz (default :8080; empty disables)",
    )
    add("--leader-elect", action="store_true", help="take a Lease; only the leader writes")
    add("--lease-duration", default="15s", help="how long a Lease is valid (default 15s)")
    add(
        "--renew-deadline",
        default="10s",
        help="a leader that can't renew within this stops writing (default 10s)",
    )
    add("--retry-period", default="2s", help="how often to try to acquire/renew (default 2s)")
    add(
        "--state-namespace",
        default=None,
        help="namespace of the Lease and the HMAC key Secret (default: own namespace)",
    )
    add("--lease-name", default="kube-nudge", help="Lease name (default kube-nudge)")
    add("--hmac-key-file", help="read the hash key from this file instead of a Secret")
    add(
        "--hmac-secret",
        default="kube-nudge-hmac-key",
        help="name of the Secret holding the hash key (created if missing)",
    )
    add("--log-level", default="info", help="debug, info, warning or error (default info)")
    add("--log-format", default="text", choices=["text", "json"], help="log format")
    parser.set_defaults(handler=_run_controller)


def _run_controller(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from kube_nudge.controller.controller import ControllerOptions
    from kube_nudge.kube.client import ClientOptions
    from kube_nudge.model import parse_duration
    from kube_nudge.ops.logging import setup_logging
    from kube_nudge.run import (
        RunConfig,
        builtin_and_custom,
        default_state_namespace,
        make_defaults,
        run_forever,
    )

    try:
        setup_logging(args.log_level, args.log_format)
        config = RunConfig(
            kubeconfig=args.kubeconfig,
            context=args.context,
            controller=ControllerOptions(
                namespaces=tuple(args.namespaces),
                kinds=builtin_and_custom(args.workload),
                defaults=make_defaults(args.debounce, args.max_rollouts, args.compat),
                workers=args.workers,
                source_selector=args.source_selector,
                workload_selector=args.workload_selector,
            ),
            client=ClientOptions(write_qps=args.write_qps, write_burst=args.write_burst),
            metrics_addr=args.metrics_addr or None,
            leader_elect=args.leader_elect,
            state_namespace=args.state_namespace or default_state_namespace(),
            lease_name=args.lease_name,
            lease_timings=(
                parse_duration(args.lease_duration),
                parse_duration(args.renew_deadline),
                parse_duration(args.retry_period),
            ),
            hmac_key_file=Path(args.hmac_key_file) if args.hmac_key_file else None,
            hmac_secret=args.hmac_secret,
        )
    except ValueError as exc:
        print(f"kube-nudge: {exc}", file=sys.stderr)
        return 2
    try:
        return run_forever(config)
    except Exception as exc:
        logging.getLogger("kube_nudge").error("fatal: %s: %s", type(exc).__name__, exc)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The top-level argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="kube-nudge", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kube-nudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _dev_cluster_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kube-nudge`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
