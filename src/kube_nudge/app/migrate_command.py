"""``kube-nudge migrate``: before switching from Reloader or Wave, what kube-nudge will do
with every workload that carries their annotations (under ``--compat``), which of their
settings have no meaning here and what replaces them, and whether anything restarts at the
switch. Reads only, with what ``status`` needs.

Exit code 0 when nothing would restart at the switch, 1 when something would, 2 on bad
flags, 5 when the API server is unreachable or refuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import time
from collections.abc import Sequence

from kube_nudge.app.errors import (
    CLUSTER_REFUSED,
    EXIT_USAGE,
    UsageError,
    api_failure,
    connect,
)
from kube_nudge.app.flags import add_cluster_flags, check_namespaces
from kube_nudge.app.status_command import say_unlisted
from kube_nudge.app.tables import fit
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import readable_kinds
from kube_nudge.reporting.migrate import Migration, MigrationRow, collect_migration

__all__ = ["MIGRATE", "MigrateCommand", "render_markdown", "render_table"]

_MIN_WIDTH = 100


class MigrateCommand:
    """Report what a switch from Reloader or Wave to kube-nudge will do."""

    name = "migrate"
    help = "before leaving Reloader or Wave: what --compat does with each of their workloads"
    exit_codes = (
        (0, "nothing would restart at the switch"),
        (1, "some workload would roll once at the switch (its pods run stale config)"),
        (EXIT_USAGE, "a bad flag or kubeconfig; nothing was sent"),
        CLUSTER_REFUSED,
    )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge migrate``."""
        parser.description = (
            "For every workload with Reloader or Wave annotations: whether kube-nudge opts it "
            "in under --compat and which sources count, which settings have no meaning here "
            "and what replaces them, and what happens at the switch."
        )
        add_cluster_flags(parser)
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--namespace", "-n", action="append", default=[],
                           dest="namespaces", help="namespace (repeatable; default: the "
                           "context's)")  # fmt: skip
        scope.add_argument("--all-namespaces", "-A", action="store_true", help="every namespace")
        parser.add_argument("--output", "-o", choices=["table", "json", "markdown"],
                            default="table", help="output format")  # fmt: skip

    def execute(self, args: argparse.Namespace) -> int:
        """Validate, read, print; the exit code."""
        try:
            check_namespaces("--namespace", args.namespaces)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        client = connect(args)
        try:
            found = asyncio.run(_collect(client, args))
        except ApiError as exc:
            raise api_failure(exc, client) from None
        if args.output == "json":
            print(json.dumps(found.document(), indent=2))
        elif args.output == "markdown":
            print(render_markdown(found), end="")
        else:
            width = max(shutil.get_terminal_size((_MIN_WIDTH, 24)).columns, _MIN_WIDTH)
            print(render_table(found, width=width), end="")
        return 1 if found.rolls else 0


async def _collect(client: KubeClient, args: argparse.Namespace) -> Migration:
    try:
        scope: Sequence[str | None] = (
            (None,) if args.all_namespaces
            else tuple(args.namespaces) or (client.default_namespace,)
        )  # fmt: skip
        refused: list[str] = []
        kinds = await readable_kinds(client, scope, refused=refused)
        found = await collect_migration(client, namespaces=scope, now=time.time(), kinds=kinds)
        say_unlisted(refused)  # once the report stands: an error stays one line
        return found
    finally:
        await client.aclose()


def render_table(found: Migration, *, width: int = _MIN_WIDTH) -> str:
    """The report as aligned columns; each unmapped setting on a line of its own."""
    lines = [found.summary()]
    if found.rows:
        table = [("WORKLOAD", "PEER", "AT SWITCH", "DETAIL")]
        table += [(_workload(r), ",".join(r.peers), r.at_switch, _detail(r)) for r in found.rows]
        widths = [min(max(len(r[i]) for r in table), cap) for i, cap in enumerate((44, 13, 9))]
        for workload, peers, at, detail in table:
            head = "  ".join([fit(workload, widths[0]), fit(peers, widths[1]),
                              at.ljust(widths[2])]) + "  "  # fmt: skip
            lines.append((head + fit(detail, max(width - len(head), 20))).rstrip())
        for row in found.rows:
            lines += [f"  {_workload(row)}: {setting}" for setting in row.unmapped]
    return "\n".join(lines) + "\n"


def render_markdown(found: Migration) -> str:
    """The report for a migration ticket: the summary, then a table."""
    lines = [f"**kube-nudge migrate:** {found.summary()}", ""]
    if found.rows:
        lines += ["| Workload | Peer | Counts | At the switch | No meaning here |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in found.rows:
            unmapped = "<br>".join(_md(u) for u in r.unmapped) or "-"
            lines.append(f"| `{_workload(r)}` | {','.join(r.peers)} | {_md(r.counts)} | "
                         f"**{r.at_switch}**: {_md(r.reason)} | {unmapped} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _workload(row: MigrationRow) -> str:
    return f"{row.namespace}/{row.kind}/{row.name}"


def _detail(row: MigrationRow) -> str:
    return f"{row.reason}; counts: {row.counts}" if row.opted_in else row.reason


def _md(text: str) -> str:
    return text.replace("|", "\\|")


MIGRATE = MigrateCommand()
