"""``kube-nudge status``: which pods run which config, from the API, without the controller.

Exit code 0 when every listed workload runs (or is rolling to) the config in the cluster,
1 when drift is found (so it can run as a CI or cron check), 6 when none is found but some
workload could not be verified (the user may not read the installation key, a source or the
pods), 2 on bad flags or kubeconfig, 5 when the API server is unreachable or refuses (see
``exit_codes``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from collections.abc import Sequence

from kube_nudge.app.errors import (
    CLUSTER_REFUSED,
    EXIT_UNVERIFIED,
    EXIT_USAGE,
    UsageError,
    api_failure,
    connect,
)
from kube_nudge.app.flags import (
    add_cluster_flags,
    add_csi_flag,
    add_key_flags,
    check_key_flags,
    check_namespaces,
    read_installation_key,
)
from kube_nudge.app.tables import fit
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import readable_kinds
from kube_nudge.reporting.status import WorkloadStatus, collect, status_document

__all__ = ["STATUS", "StatusCommand", "exit_code", "render_table"]

# Others: red.
_COLOURS = {"current": "32", "rolling": "33", "not-adopted": "33", "unverified": "33"}
_MIN_WIDTH = 80


class StatusCommand:
    """Report which pods run which config."""

    name = "status"
    help = "show which pods run which config (exit 1 on drift)"
    exit_codes = (
        (0, "every listed workload runs (or is rolling to) the config in the cluster"),
        (1, "drift: some workload runs other config, or is held, stale or failed"),
        (EXIT_USAGE, "a bad flag or kubeconfig; nothing was sent"),
        CLUSTER_REFUSED,
        (EXIT_UNVERIFIED, "no drift found, but some workload is unverified: the user may not "
                          "read the installation key (get on its Secret), a source or the "
                          "pods"),
    )  # fmt: skip

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge status``."""
        parser.description = (
            "For every opted-in workload: its strategy, the config it should run, the config "
            "its pods run, and why. Exit code 1 when drift is found."
        )
        add = parser.add_argument
        add_cluster_flags(parser)
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--namespace", "-n", action="append", default=[],
                           dest="namespaces", help="namespace (repeatable; default: the "
                           "context's)")  # fmt: skip
        scope.add_argument("--all-namespaces", "-A", action="store_true",
                           help="every namespace")  # fmt: skip
        add("--output", "-o", choices=["table", "json"], default="table", help="output format")
        add("--all", action="store_true", dest="include_opted_out",
            help="also list workloads that did not opt in but run stale pods")  # fmt: skip
        add_key_flags(parser)
        add_csi_flag(parser)

    def execute(self, args: argparse.Namespace) -> int:
        """Validate, collect, print; the exit code."""
        try:
            check_namespaces("--namespace", args.namespaces)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        check_key_flags(args)
        client = connect(args)
        try:
            rows, key_known = asyncio.run(self._collect(client, args))
        except ApiError as exc:
            raise api_failure(exc, client) from None
        if args.output == "json":
            print(json.dumps(status_document(rows, desired_known=key_known), indent=2))
        else:
            colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
            width = max(shutil.get_terminal_size((_MIN_WIDTH, 24)).columns, _MIN_WIDTH)
            print(render_table(rows, width=width, colour=colour), end="")
        code = exit_code(rows)
        if code == EXIT_UNVERIFIED:
            unsure = sum(row.unverified for row in rows)
            how = "" if key_known else (
                f"; with get on secret {args.state_namespace}/{args.hmac_secret} (or "
                "--hmac-key-file) status compares hashes"
            )  # fmt: skip
            print(f"kube-nudge: {unsure} workload(s) unverified, no drift found among the "
                  f"others (see DETAIL){how}", file=sys.stderr)  # fmt: skip
        return code

    async def _collect(
        self, client: KubeClient, args: argparse.Namespace
    ) -> tuple[list[WorkloadStatus], bool]:
        try:
            key = await read_installation_key(client, args, sys.stderr)
            if args.all_namespaces:
                scope: Sequence[str | None] = (None,)
            else:
                scope = tuple(args.namespaces) or (client.default_namespace,)
            refused: list[str] = []
            kinds = await readable_kinds(client, scope, refused=refused)
            rows = await collect(
                client, namespaces=scope, hmac_key=key, kinds=kinds,
                include_opted_out=args.include_opted_out, compat=args.compat,
                csi_secrets=args.csi_secrets,
                key_location=f"{args.state_namespace}/{args.hmac_secret}",
            )  # fmt: skip
            say_unlisted(refused)  # once the report stands: an error stays one line
            return rows, key is not None
        finally:
            await client.aclose()


def say_unlisted(refused: list[str]) -> None:
    """One stderr line naming the optional kinds the account may not list (then forgotten)."""
    if refused:
        print(f"kube-nudge: not listed: {', '.join(refused)} (this account may not list them)",
              file=sys.stderr)  # fmt: skip
        refused.clear()


def exit_code(rows: Sequence[WorkloadStatus]) -> int:
    """1 on any drift (known drift is the answer even where other rows are unsure), else 6
    when some row is unverified, else 0."""
    if any(row.drift for row in rows):
        return 1
    return EXIT_UNVERIFIED if any(row.unverified for row in rows) else 0


def render_table(rows: Sequence[WorkloadStatus], *, width: int = 80, colour: bool = False) -> str:
    """The report as aligned columns that fit ``width``; DETAIL is cut to fit."""
    if not rows:
        return 'no workloads found (opt one in with kube-nudge.io/enabled: "true")\n'
    table = [("WORKLOAD", "STATE", "PODS", "DETAIL")]
    for row in rows:
        table.append((f"{row.namespace}/{row.kind}/{row.name}", row.state, _pods(row), row.detail))
    widths = [min(max(len(r[i]) for r in table), cap) for i, cap in enumerate((40, 11, 12))]
    lines = []
    for n, (workload, state, pods, detail) in enumerate(table):
        cells = [fit(workload, widths[0]), state.ljust(widths[1]), fit(pods, widths[2])]
        head = "  ".join(cells) + "  "
        line = head + fit(detail, max(width - len(head), 10)).rstrip()
        if colour and n:
            code = _COLOURS.get(state, "31")
            line = line.replace(state, f"\x1b[{code}m{state}\x1b[0m", 1)
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def _pods(row: WorkloadStatus) -> str:
    total = sum(row.pods.values())
    if not row.pods:
        return "-"
    old = total - row.pods.get(row.applied_hash or "", 0) if row.applied_hash else 0
    if row.state == "rolling":
        return f"{total} ({old} old)"
    if row.stale_pods:
        return f"{total} ({row.stale_pods} stale)"
    return str(total)


STATUS = StatusCommand()
