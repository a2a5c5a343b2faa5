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


def build_parser() -> argparse.ArgumentParser:
    """The top-level argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="kube-nudge", description=__doc__)
    parser.add_argument("--version", action="version", version=f"kube-nudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _dev_cluster_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kube-nudge`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
