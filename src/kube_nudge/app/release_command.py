"""``kube-nudge release`` and ``kube-nudge approve``: stamp "now" on workloads.

``release`` writes ``kube-nudge.io/released-at`` (now, Unix seconds) on the workload's
metadata: the flap cap counts only rollouts after it, and a line stopped by a failed
rollout restarts (on the failed workload: for every workload of that change; on a held
one: for that one). The cap also counts rollouts the controller remembers, so deleting
``kube-nudge.io/rolled-at`` does not release it. ``approve`` writes
``kube-nudge.io/approved-at``: a workload with ``kube-nudge.io/approval: required`` rolls
the changes made before it. The same works with ``kubectl annotate --overwrite
deployment/web kube-nudge.io/released-at=$(date +%s)``.

Exit code 0 when every workload was stamped, 1 when some could not be (each named with the
reason: not found, forbidden, ...), 2 on bad arguments or kubeconfig, 5 when the API server
is unreachable or refuses the credentials (nothing more is tried).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from kube_nudge.app.errors import (
    EXIT_CLUSTER,
    EXIT_USAGE,
    UsageError,
    api_failure,
    connect,
    describe_api_error,
)
from kube_nudge.app.flags import add_cluster_flags, check_namespace
from kube_nudge.app.wait_command import NamedObject, parse_target
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.patches import Patch, send
from kube_nudge.kube.workloads import BUILTIN_KINDS, DISCOVERED_KINDS
from kube_nudge.model.annotations import APPROVED_AT, RELEASED_AT
from kube_nudge.model.records import format_rolled_at

__all__ = ["APPROVE", "RELEASE", "StampCommand"]


class StampCommand:
    """Write the time now into one annotation of each workload named."""

    def __init__(self, name: str, help: str, annotation: str, done: str) -> None:
        self.name = name
        self.help = help
        self.annotation = annotation
        self.done = done
        self.field_manager = f"kube-nudge-{name}"
        self.exit_codes = (
            (0, f"every named workload was stamped ({annotation})"),
            (1, "some workload could not be stamped (each is named, with the reason)"),
            (EXIT_USAGE, "a bad argument or kubeconfig; nothing was sent"),
            (EXIT_CLUSTER, "the API server was unreachable or refused the credentials"),
        )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge release``."""
        parser.description = self.help
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
                    f"{sources[0].kind}/{sources[0].name}: {self.name} takes workloads "
                    "(deployment/NAME, statefulset/NAME, ...), not sources"
                )
            if args.namespace is not None:
                check_namespace("--namespace", args.namespace)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        client = connect(args)
        return asyncio.run(self._stamp(client, args.namespace, targets))

    async def _stamp(
        self, client: KubeClient, namespace: str | None, targets: list[NamedObject]
    ) -> int:
        failed = 0
        namespace = namespace or client.default_namespace
        stamp = format_rolled_at([time.time()])
        try:
            for target in targets:
                kind = next(
                    k for k in (*BUILTIN_KINDS, *DISCOVERED_KINDS) if k.resource.kind == target.kind
                )
                label = f"{namespace}/{target.kind}/{target.name}"
                try:
                    stamped = {"metadata": {"annotations": {self.annotation: stamp}}}
                    path = kind.resource.path(namespace, target.name)
                    await send(client, Patch(path, stamped, field_manager=self.field_manager))
                except ApiError as exc:
                    if exc.status in (0, 401):
                        raise api_failure(exc, client) from None  # every other one would fail
                    failed += 1
                    if exc.not_found:
                        print(f"kube-nudge: {label}: not found", file=sys.stderr)
                    else:
                        print(f"kube-nudge: {label}: {describe_api_error(exc, client)}",
                              file=sys.stderr)  # fmt: skip
                    continue
                print(self.done.format(label=label))
        finally:
            await client.aclose()
        return 1 if failed else 0


RELEASE = StampCommand(
    "release",
    "let workloads held by the flap cap or a stopped line roll their latest config now",
    RELEASED_AT,
    "released {label}: the flap cap counts rollouts from now on; a stopped line restarts",
)
APPROVE = StampCommand(
    "approve",
    "approve the config changes waiting for approval (kube-nudge.io/approval: required)",
    APPROVED_AT,
    "approved {label}: config changes made before now roll",
)
