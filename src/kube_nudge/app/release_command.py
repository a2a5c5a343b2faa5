"""``kube-nudge release``: let a workload held by the flap cap roll its latest config now.

The cap counts rollouts recorded on the workload and in the controller's memory, so
deleting ``kube-nudge.io/rolled-at`` does not release it. Releasing writes
``kube-nudge.io/released-at`` (now, Unix seconds) on the workload's metadata; the
controller sees the change at once and counts only rollouts after it. The same works with
``kubectl annotate --overwrite deployment/web kube-nudge.io/released-at=$(date +%s)``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from kube_nudge.app.flags import add_cluster_flags
from kube_nudge.app.wait_command import Target, parse_target
from kube_nudge.kube.client import MERGE_PATCH, ApiError, KubeClient
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.annotations import RELEASED_AT, format_rolled_at

__all__ = ["RELEASE", "ReleaseCommand"]

FIELD_MANAGER = "kube-nudge-release"


class ReleaseCommand:
    """Release workloads held by the flap cap."""

    name = "release"
    help = "let workloads held by the flap cap roll their latest config now"

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge release``."""
        parser.description = __doc__.split("\n\n")[1].replace("\n", " ")
        add = parser.add_argument
        add("workloads", nargs="+", metavar="KIND/NAME", help="e.g. deployment/web")
        add_cluster_flags(parser)
        add("--namespace", "-n", help="namespace (default: the context's)")

    def execute(self, args: argparse.Namespace) -> int:
        """Validate, then annotate each workload; the exit code."""
        try:
            targets = [parse_target(text) for text in args.workloads]
            sources = [t for t in targets if t.is_source]
            if sources:
                raise ValueError(
                    f"{sources[0].kind}/{sources[0].name}: release takes workloads "
                    "(deployment/NAME, statefulset/NAME, ...), not sources"
                )
            if args.namespace == "":
                raise ValueError("--namespace '': give a namespace name")
            client = KubeClient.from_config(args.kubeconfig, context=args.context)
        except (ValueError, OSError) as exc:
            print(f"kube-nudge: {exc}", file=sys.stderr)
            return 2
        return asyncio.run(self._release(client, args.namespace, targets))

    async def _release(
        self, client: KubeClient, namespace: str | None, targets: list[Target]
    ) -> int:
        failed = 0
        namespace = namespace or client.default_namespace
        stamp = format_rolled_at([time.time()])
        try:
            for target in targets:
                kind = next(k for k in BUILTIN_KINDS if k.resource.kind == target.kind)
                label = f"{namespace}/{target.kind}/{target.name}"
                try:
                    await client.request(
                        "PATCH", kind.resource.path(namespace, target.name),
                        params={"fieldManager": FIELD_MANAGER},
                        body={"metadata": {"annotations": {RELEASED_AT: stamp}}},
                        content_type=MERGE_PATCH,
                    )  # fmt: skip
                except ApiError as exc:
                    failed += 1
                    print(f"kube-nudge: {label}: {exc}", file=sys.stderr)
                    continue
                print(f"released {label}: the flap cap counts rollouts from now on")
        finally:
            await client.aclose()
        return 1 if failed else 0


RELEASE = ReleaseCommand()
