"""``kube-nudge wait``: block a pipeline until a config change is out.

``kubectl rollout status`` right after editing a ConfigMap reports success on the old
revision (kube-nudge's debounce window hasn't fired yet). This waits until every consumer
of the named sources (or every named workload) runs the config now in the cluster: its
recorded hash equals the desired one and its own rollout completed. Exit 0 when all are
out; 1 naming those held (missing config), rolled back (snapshot undo) or stale for good;
3 on timeout, naming those still pending; 4 at once when there is nothing to wait for (a
named workload or source does not exist, a named workload is not opted in, or no opted-in
workload consumes a named source); 2 on bad flags or kubeconfig; 5 when the API server is
unreachable or refuses; 6 at once when a workload can't be verified by waiting (the user may
not read a source it consumes or its pods, or without the key it has no pods).

Without the installation key (the user may not get its Secret) no hash can be compared:
a workload is out once every pod was created in a later second than the config's last
change and its own rollout completed, as ``status`` tells without the key. A
change of keys a workload doesn't read rolls nothing, so its pods stay older than the change:
without the key that waits until ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from kube_nudge.app.errors import (
    CLUSTER_REFUSED,
    EXIT_UNVERIFIED,
    EXIT_USAGE,
    CommandError,
    UsageError,
    api_failure,
    connect,
)
from kube_nudge.app.flags import (
    add_cluster_flags,
    add_csi_flag,
    add_key_flags,
    check_duration,
    check_key_flags,
    check_namespace,
    quoted,
    read_installation_key,
)
from kube_nudge.app.status_command import say_unlisted
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import source_resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, DISCOVERED_KINDS, readable_kinds
from kube_nudge.model import SourceKind
from kube_nudge.model.parsing import is_dns_subdomain
from kube_nudge.model.source_kinds import is_source_kind, source_kind_rows
from kube_nudge.reporting.status import WorkloadStatus, collect

__all__ = ["WAIT", "NamedObject", "WaitCommand", "parse_target"]


def _source_kinds() -> dict[str, str]:
    """Every name a user may type for a source kind (``source_kinds``), to the kind's."""
    return {
        alias: row.kind.value
        for row in source_kind_rows()
        for alias in (row.kind.value, f"{row.kind.value}s", *row.aliases)
    }


_WORKLOAD_KINDS = {
    alias: kind.resource.kind
    for kind in (*BUILTIN_KINDS, *DISCOVERED_KINDS)
    for alias in (kind.resource.kind.lower(), kind.resource.plural, kind.resource.kind)
}
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
POLL_SECONDS = 1.0
MIN_TIMEOUT, MAX_TIMEOUT = 0.001, 86400.0
EXIT_FAILED, EXIT_TIMEOUT, EXIT_NOTHING_TO_WAIT_FOR = 1, 3, 4


@dataclass(frozen=True, slots=True)
class NamedObject:
    """A source (all its consumers) or one workload, as named on the command line
    (``KIND/NAME``); not a strategy's ``Target``."""

    kind: str  # "configmap", "secret", or a workload Kind such as "Deployment"
    name: str

    @property
    def is_source(self) -> bool:
        """True for a source of any kind (``source_kinds``)."""
        return is_source_kind(self.kind)


def parse_target(text: str) -> NamedObject:
    """``configmap/NAME``, ``secret/NAME`` or ``deployment/NAME`` (any built-in kind, as
    kind, plural or Kind); ValueError naming the value."""
    kind, sep, name = text.partition("/")
    if not sep or _NAME.fullmatch(name) is None or not is_dns_subdomain(name):
        raise ValueError(
            f"{quoted(text)}: want KIND/NAME such as configmap/app, secret/db or deployment/web"
        )
    if kind in (sources := _source_kinds()):
        return NamedObject(sources[kind], name)
    if kind in _WORKLOAD_KINDS:
        return NamedObject(_WORKLOAD_KINDS[kind], name)
    kinds = ", ".join(
        sorted({*_source_kinds().values(), *(k.lower() for k in _WORKLOAD_KINDS.values())})
    )
    raise ValueError(f"{quoted(text)}: unknown kind {quoted(kind)}; one of {kinds}")


def _selected(
    rows: Sequence[WorkloadStatus], targets: Sequence[NamedObject]
) -> list[WorkloadStatus]:
    chosen = []
    for row in rows:
        for target in targets:
            if target.is_source:
                prefix = f"{target.kind}/{target.name} "
                hit = any(source.startswith(prefix) for source in row.sources)
            else:
                hit = (row.kind, row.name) == (target.kind, target.name)
            if hit and row.opted_in:
                chosen.append(row)
                break
    return chosen


def _done(row: WorkloadStatus) -> bool:
    return row.state == "notify-only" or (row.state == "current" and row.rolled_out is not False)


def _failed(row: WorkloadStatus) -> bool:
    # None of these ends by waiting.
    return row.state in ("held", "stale", "rolled-back", "failed")


def _line(row: WorkloadStatus) -> str:
    if _done(row):
        mark = "done"
    elif _failed(row):
        mark = "FAILED"
    else:
        mark = "UNVERIFIED" if row.unverified and not row.waiting_helps else "waiting"
    return f"{row.namespace}/{row.kind}/{row.name}: {mark} ({row.state}: {row.detail})"


class WaitCommand:
    """Wait until a config change is out."""

    name = "wait"
    help = "wait until every consumer of a config change runs it (for pipelines)"
    exit_codes = (
        (0, "every named workload (every opted-in consumer of the named sources) runs the "
            "config in the cluster and finished its rollout"),
        (EXIT_FAILED, "a workload is held, rolled back, stale or failed: waiting won't help"),
        (EXIT_USAGE, "a bad flag, target or kubeconfig; nothing was sent"),
        (EXIT_TIMEOUT, "timed out (--timeout), naming the workloads still pending"),
        (EXIT_NOTHING_TO_WAIT_FOR, "at once: a named workload or source does not exist, a "
                                   "named workload is not opted in, or no opted-in workload "
                                   "consumes a named source"),
        CLUSTER_REFUSED,
        (EXIT_UNVERIFIED, "at once: a workload can't be verified by waiting (the user may not "
                          "read a source it consumes or its pods; or, without the key, it "
                          "has no pods)"),
    )  # fmt: skip

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge wait``."""
        parser.description = (
            "Block until every consumer of the named ConfigMaps/Secrets (or every named "
            "workload) runs the config now in the cluster and finished its rollout."
        )
        add = parser.add_argument
        add("targets", nargs="+", metavar="KIND/NAME",
            help="configmap/NAME, secret/NAME, or a workload such as deployment/NAME")  # fmt: skip
        add_cluster_flags(parser)
        add("--namespace", "-n", help="namespace (default: the context's)")
        add("--timeout", default="10m", help="give up after this long (default 10m)")
        add_key_flags(parser)
        add_csi_flag(parser)

    def execute(self, args: argparse.Namespace) -> int:
        """Validate, then wait; the exit code."""
        try:
            targets = [parse_target(text) for text in args.targets]
            timeout = check_duration("--timeout", args.timeout, MIN_TIMEOUT, MAX_TIMEOUT)
            if args.namespace is not None:
                check_namespace("--namespace", args.namespace)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        check_key_flags(args)
        client = connect(args)
        try:
            return asyncio.run(self._wait(client, args, targets, timeout, sys.stdout))
        except ApiError as exc:
            raise api_failure(exc, client) from None

    async def _wait(
        self,
        client: KubeClient,
        args: argparse.Namespace,
        targets: Sequence[NamedObject],
        timeout: float,
        out: TextIO,
    ) -> int:
        try:
            key = await read_installation_key(client, args, sys.stderr)
            if key is None:
                print("kube-nudge: without the key, a workload is out once every pod was "
                      "created after its config last changed and its rollout completed",
                      file=sys.stderr)  # fmt: skip
            namespace = args.namespace or client.default_namespace
            where = f"{args.state_namespace}/{args.hmac_secret}"
            deadline = time.monotonic() + timeout
            shown: dict[str, str] = {}
            live = out.isatty()
            refused: list[str] = []
            kinds = await readable_kinds(client, (namespace,), refused=refused)
            while True:
                rows = await collect(client, namespaces=(namespace,), hmac_key=key, kinds=kinds,
                                     compat=args.compat, key_location=where,
                                     csi_secrets=args.csi_secrets)  # fmt: skip
                say_unlisted(refused)  # once the first report stands: an error stays one line
                chosen = _selected(rows, targets)
                await self._something_to_wait_for(client, namespace, targets, chosen, args)
                self._show(chosen, shown, out, live)
                if hopeless := [r for r in chosen if r.unverified and not r.waiting_helps]:
                    # Waiting can't settle these: stop now (failed ones are said too).
                    failed = [r for r in chosen if _failed(r)]
                    for row in failed:
                        print(f"failed: {_line(row)}", file=sys.stderr)
                    for row in hopeless:
                        print(f"unverified: {_line(row)}", file=sys.stderr)
                    return EXIT_FAILED if failed else EXIT_UNVERIFIED
                missing = [t for t in targets if not t.is_source and not any(
                    (r.kind, r.name) == (t.kind, t.name) for r in chosen)]  # fmt: skip
                if chosen and all(_done(r) or _failed(r) for r in chosen) and not missing:
                    failed = [r for r in chosen if _failed(r)]
                    for row in failed:
                        print(f"failed: {_line(row)}", file=sys.stderr)
                    if not failed:
                        print(f"all {len(chosen)} workload(s) run the new config", file=out)
                    return EXIT_FAILED if failed else 0
                if time.monotonic() >= deadline:
                    pending = [_line(r) for r in chosen if not _done(r)]
                    pending += [f"{namespace}/{t.kind}/{t.name}: not found or not opted in"
                                for t in missing]  # fmt: skip
                    if not chosen and not missing:
                        pending.append("no opted-in workload consumes the named sources")
                    for line in pending:
                        print(f"timed out: {line}", file=sys.stderr)
                    return EXIT_TIMEOUT
                await asyncio.sleep(POLL_SECONDS)
        finally:
            await client.aclose()

    @staticmethod
    async def _something_to_wait_for(
        client: KubeClient,
        namespace: str,
        targets: Sequence[NamedObject],
        chosen: Sequence[WorkloadStatus],
        args: argparse.Namespace,
    ) -> None:
        """``CommandError`` (exit code 4) naming each target that nothing will ever satisfy:
        a workload that doesn't exist or isn't opted in, a source that doesn't exist or that
        no opted-in workload consumes. Waiting for them would only end at --timeout."""
        problems = []
        for target in targets:
            if target.is_source:
                prefix = f"{target.kind}/{target.name} "
                if any(source.startswith(prefix) for row in chosen for source in row.sources):
                    continue
                resource = source_resource(SourceKind(target.kind))
            else:
                if any((r.kind, r.name) == (target.kind, target.name) for r in chosen):
                    continue
                resource = next(
                    k.resource
                    for k in (*BUILTIN_KINDS, *DISCOVERED_KINDS)
                    if k.resource.kind == target.kind
                )
            label = f"{namespace}/{target.kind}/{target.name}"
            try:
                await client.get(resource.path(namespace, target.name))
            except ApiError as exc:
                if exc.status == 403:
                    continue  # can't tell: leave it to --timeout
                if not exc.not_found:
                    raise
                problems.append(f"{label}: not found")
                continue
            if target.is_source:
                problems.append(f"{label}: no opted-in workload consumes it")
            else:
                hint = "" if args.compat else "; Wave and Reloader opt-ins count with --compat"
                problems.append(f"{label}: not opted in (kube-nudge.io/enabled is not true{hint})")
        if problems:
            raise CommandError(
                "nothing to wait for: " + "; ".join(problems), EXIT_NOTHING_TO_WAIT_FOR
            )

    @staticmethod
    def _show(
        rows: Sequence[WorkloadStatus], shown: dict[str, str], out: TextIO, live: bool
    ) -> None:
        """On a terminal: one progress line per workload, redrawn in place. Otherwise
        (CI logs): a line whenever a workload's state changes."""
        lines = {f"{r.namespace}/{r.kind}/{r.name}": _progress(r) for r in rows}
        if live:
            if shown:
                out.write(f"\x1b[{len(shown)}F")  # back to the first line drawn last time
            for line in lines.values():
                out.write(f"\x1b[2K{line}\n")
        else:
            for key, line in lines.items():
                if shown.get(key) != line:
                    out.write(line + "\n")
        out.flush()
        shown.clear()
        shown.update(lines)


def _progress(row: WorkloadStatus) -> str:
    total = sum(row.pods.values())
    new = row.pods.get(row.desired_hash or "", 0) if row.desired_hash else 0
    width = 20
    filled = round(width * new / total) if total and row.desired_hash in row.pods else 0
    if _done(row):
        filled = width
    bar = "#" * filled + "-" * (width - filled)
    return f"[{bar}] {row.namespace}/{row.kind}/{row.name} {row.state}: {row.detail}"


WAIT = WaitCommand()
