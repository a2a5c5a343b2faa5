"""The ``kube-nudge-dev`` command line: the local ``cluster``, its ``build``, the ``demo``.

Development tools only: this distribution (``kube-nudge-dev``) is never installed with the
product, which must not depend on it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kube_nudge_dev.releases import ENV, KubeRelease, UnknownRelease, choices, parse_release


def _kube_release(command: str, value: str | None) -> KubeRelease | None:
    """``--kube-version``'s release (None when not given: the environment's or the
    default); an unknown one is one line on stderr and exit code 2."""
    if value is None:
        return None
    try:
        return parse_release(value)
    except UnknownRelease as exc:
        print(f"kube-nudge-dev {command}: --kube-version {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _run_cluster(args: argparse.Namespace) -> int:
    from kube_nudge_dev.main import run_dev_cluster

    kube = _kube_release("cluster", args.kube_version)
    return run_dev_cluster(
        args.dir, nodes=args.nodes, real_node=args.real_node, registry=args.registry, kube=kube
    )


def _run_build(args: argparse.Namespace) -> int:
    from kube_nudge_dev.build import (
        ACTIONLINT,
        ARGO_ROLLOUTS,
        COMPONENTS,
        COSIGN,
        HELM,
        NODE_COMPONENTS,
        PROMETHEUS,
        PROMTOOL,
        REGISTRY,
        SYFT,
        BuildError,
        ensure_binaries,
        go_tool_binary,
        secrets_store_csi_binaries,
    )

    kube = _kube_release("build", args.kube_version)
    try:
        tools = {tool.name: tool for tool in (HELM, PROMTOOL, PROMETHEUS, ARGO_ROLLOUTS,
                                              REGISTRY, COSIGN, SYFT, ACTIONLINT)}  # fmt: skip
        if args.target in tools:
            print(f"{args.target}\t{go_tool_binary(tools[args.target])}")
            return 0
        if args.target == "csi-driver":
            for name, path in secrets_store_csi_binaries().items():
                print(f"{name}\t{path}")
            return 0
        for name, path in ensure_binaries(COMPONENTS + NODE_COMPONENTS, kube=kube).items():
            print(f"{name}\t{path}")
    except BuildError as exc:
        print(f"kube-nudge-dev: {exc}", file=sys.stderr)
        return 1
    return 0


def _run_manifests(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kube_nudge_dev.build import BuildError
    from kube_nudge_dev.chart import ChartError, write_manifests

    try:
        for path in write_manifests(Path(args.repo)):
            print(path)
    except (BuildError, ChartError) as exc:
        print(f"kube-nudge-dev: {exc}", file=sys.stderr)
        return 1
    return 0


def _run_image(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kube_nudge_dev.image import ImageError, base_image, build_image, pause_image

    try:
        if args.target == "base":
            built = base_image()
        elif args.target == "pause":
            built = pause_image()
        else:
            built = build_image(Path(args.repo))
    except ImageError as exc:
        print(f"kube-nudge-dev: {exc}", file=sys.stderr)
        return 1
    print(f"{built.ref}\t{built.archive}")
    return 0


def _run_release(args: argparse.Namespace) -> int:
    from kube_nudge_dev.build import BuildError
    from kube_nudge_dev.image import ImageError
    from kube_nudge_dev.multiarch import EmulationUnavailable
    from kube_nudge_dev.processes import ClusterError
    from kube_nudge_dev.release import ReleaseError, UsageError, parse_request, run

    try:
        request = parse_request(args)
    except UsageError as exc:
        print(f"kube-nudge-dev release: {exc}", file=sys.stderr)
        return 2
    try:
        run(request, lambda line: print(f"[release] {line}", flush=True))
    except (ReleaseError, BuildError, ImageError, ClusterError, EmulationUnavailable) as exc:
        print(f"kube-nudge-dev release: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def _add_release(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    release = sub.add_parser(
        "release",
        help="every step of a release against a real registry: image, chart, signatures, SBOM",
        description="Check that every place names one version, build the image and push it, "
        "package the chart with that image's digest and helm push it, sign both with cosign, "
        "attach a CycloneDX SBOM (syft) and a SLSA provenance naming the commit, verify all "
        "of it (what `make release` and .github/workflows/release.yml run). Without "
        "--registry: a registry of its own on loopback, with a throwaway CA and key pair.",
    )
    release.add_argument("--repo", default=".", help="the checkout (default: .)")
    release.add_argument("--registry", metavar="HOST[:PORT][/PATH]",
                         help="push to PREFIX/kube-nudge and oci://PREFIX/charts (logged in "
                         "already); default: a loopback registry of its own")  # fmt: skip
    release.add_argument("--ca", metavar="FILE", help="the CA the registry's TLS is verified by")
    release.add_argument("--key", metavar="FILE",
                         help="cosign private key (its .pub beside it; COSIGN_PASSWORD); "
                         "default: a throwaway key pair in OUT/keys")  # fmt: skip
    release.add_argument("--keyless", action="store_true",
                         help="sign keyless (Sigstore's Fulcio and Rekor, the OIDC identity of "
                         "the GitHub Actions run)")  # fmt: skip
    release.add_argument("--identity", metavar="REGEX", default="",
                         help="keyless: the certificate identity verification expects "
                         "(default: this repository's release workflow at a v* tag)")  # fmt: skip
    release.add_argument("--tag", metavar="vX.Y.Z",
                         help="the git tag being published: it must name the version, the "
                         "CHANGELOG entry must be dated and the tree clean")  # fmt: skip
    release.add_argument("--base", default="dev",
                         help="the Dockerfile's PYTHON_IMAGE: dev (the Debian base made here "
                         "with mmdebstrap) or an image pinned by digest, "
                         "NAME@sha256:<64 hex>")  # fmt: skip
    release.add_argument("--platforms", default="linux/amd64,linux/arm64",
                         metavar="linux/ARCH,...",
                         help="the image's platforms, of linux/amd64 and linux/arm64 (both, the "
                         "default: a manifest list; arm64 under qemu-user-static)")  # fmt: skip
    release.add_argument(
        "--out", default="build/release", help="where its files go (default: build/release)"
    )
    release.set_defaults(handler=_run_release)


def _run_demo(args: argparse.Namespace) -> int:
    from kube_nudge_dev.demo import main as demo

    return demo()


def _add_kube_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kube-version",
        metavar="1.MINOR",
        help=f"the Kubernetes release to run: one of {choices()}, each its pinned patch, built "
        f"into the cache on first use (default: ${ENV}, else the newest that builds here)",
    )


def _add_cluster(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = sub.add_parser(
        "cluster",
        help="run a real local control plane (etcd, apiserver, kcm, scheduler, kwok)",
        description="Start a local Kubernetes control plane with fake kwok nodes; write "
        "DIR/kubeconfig; run until SIGINT/SIGTERM, then stop everything.",
    )
    cluster.add_argument("--dir", help="where to write kubeconfig and logs (default: a temp dir)")
    cluster.add_argument("--nodes", type=int, default=2, help="number of fake nodes (default 2)")
    cluster.add_argument(
        "--real-node",
        action="store_true",
        help="also join one real node (kubelet + containerd + runc; root) with the "
        "controller image built from this checkout loaded (`make image`)",
    )
    cluster.add_argument(
        "--registry",
        action="store_true",
        help="also serve an OCI registry (the CNCF distribution registry, built on first use) "
        "on a loopback port, with TLS by the cluster's CA; the real node's containerd trusts it",
    )
    _add_kube_version(cluster)
    cluster.set_defaults(handler=_run_cluster)


def _add_build(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    build = sub.add_parser(
        "build",
        help="build (or find) the control-plane binaries, helm, promtool, prometheus, the "
        "Argo rollouts-controller, the Secrets Store CSI driver or a release tool (registry, "
        "cosign, syft, actionlint), and print their paths",
        description="Print NAME<TAB>PATH for each control-plane binary (or for the pinned "
        "helm, promtool, prometheus, Argo rollouts-controller, the Secrets Store CSI driver "
        "with the registrar and test provider run beside it, the distribution registry, cosign, "
        "syft or actionlint), building the missing ones into the cache first (the first build "
        "takes minutes).",
    )
    build.add_argument(
        "target",
        nargs="?",
        choices=(
            "control-plane",
            "helm",
            "promtool",
            "prometheus",
            "rollouts-controller",
            "csi-driver",
            "registry",
            "cosign",
            "syft",
            "actionlint",
        ),
        default="control-plane",
        help="what to build (default: control-plane)",
    )
    _add_kube_version(build)
    build.set_defaults(handler=_run_build)


def build_parser() -> argparse.ArgumentParser:
    """The top-level argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="kube-nudge-dev", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    _add_cluster(sub)
    _add_build(sub)

    manifests = sub.add_parser(
        "manifests",
        help="rewrite deploy/manifests from the Helm chart (with the pinned helm)",
        description="Render deploy/helm/kube-nudge with each of its ci/*-values.yaml into "
        "deploy/manifests/*.yaml (what `make manifests` runs).",
    )
    manifests.add_argument("--repo", default=".", help="the checkout (default: .)")
    manifests.set_defaults(handler=_run_manifests)

    image = sub.add_parser(
        "image",
        help="build (or reuse) a container image with podman and print its ref and archive",
        description="Print REF<TAB>ARCHIVE for the image, building it first when its inputs "
        "changed: the controller image from the Dockerfile (localhost/kube-nudge:<version> and "
        ":dev; what `make image` runs), the kubelet node's pause image, or the Debian base the "
        "controller image is built on here. Needs root and podman (`make host-packages`).",
    )
    image.add_argument(
        "target",
        nargs="?",
        choices=("controller", "pause", "base"),
        default="controller",
        help="which image (default: controller)",
    )
    image.add_argument("--repo", default=".", help="the checkout with the Dockerfile (default: .)")
    image.set_defaults(handler=_run_image)

    _add_release(sub)
    demo = sub.add_parser(
        "demo",
        help="start a local cluster, roll a Deployment, print a summary, stop",
        description="What `make demo` runs: kube-nudge rolling a Deployment when the config "
        "it consumes changes, against a local control plane.",
    )
    demo.set_defaults(handler=_run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kube-nudge-dev`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
