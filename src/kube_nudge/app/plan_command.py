"""``kube-nudge plan``: what a config change would roll, reload, evict, announce or hold,
before it is applied.

Against the live cluster (the default) it reads, never writes, and needs what ``status``
needs; with ``--base`` it compares two sets of manifests with no cluster at all (a pull
request check). The decisions are the controller's own rules (``model.preview``), the
inputs are read by ``reporting.plan`` and planned by ``reporting.planning`` (what changes in
each source: ``reporting.sourcechanges``); ``app.plan_output`` prints the plan.

Exit code 0 when nothing would roll, reload or be evicted, 1 when something would (as
``kubectl diff`` does) or when the input deletes config a workload still requires, 2 on bad
flags or manifests, 5 when the API server is unreachable or refuses. A deletion that
strands a workload has no code of its own: as ``kubectl diff``'s, a code above 1 says the
command failed, and a CI step that accepts 0 and 1 would read the finding as a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from collections.abc import Sequence

from kube_nudge.app.errors import (
    CLUSTER_REFUSED,
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
    check_namespace,
    read_installation_key,
)
from kube_nudge.app.manifest_checks import annotation_problem
from kube_nudge.app.manifest_files import Manifest, read_manifests
from kube_nudge.app.plan_output import render, render_markdown, render_table
from kube_nudge.app.status_command import say_unlisted
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import BUILTIN_KINDS, DISCOVERED_KINDS, readable_kinds
from kube_nudge.reporting.plan import live_inputs, offline_inputs, sort_objects
from kube_nudge.reporting.planning import Inputs, Plan, plan_rows
from kube_nudge.reporting.sourcechanges import source_changes
from kube_nudge.strategies.registry import (
    capped_by_name,
    delivers,
    model_extensions,
    product_defaults,
    strategy_names,
)

__all__ = ["PLAN", "PlanCommand", "render_markdown", "render_table"]

#: The kinds a manifest may be: every built-in one, Argo's Rollout too (a file can hold one
#: whether or not a cluster serves it).
_FILE_KINDS = (*BUILTIN_KINDS, *DISCOVERED_KINDS)


class PlanCommand:
    """Say what kube-nudge would do when manifests are applied."""

    name = "plan"
    help = "say what applying manifests would roll, reload, evict or hold (exit 1 if any)"
    exit_codes = (
        (0, "nothing would roll, reload or be evicted, nor lose config it requires"),
        (1, "something would roll, reload or be evicted, or lose config it requires"),
        (EXIT_USAGE, "a bad flag, manifest or kubeconfig; nothing was sent"),
        CLUSTER_REFUSED,
    )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The flags of ``kube-nudge plan``."""
        parser.description = (
            "For every workload a change of ConfigMaps and Secrets in the manifests reaches: "
            "whether kube-nudge rolls it, reloads it in place, announces it, evicts its pods "
            "(pod-selector) or holds it, and why. Against the live cluster (read-only), or "
            "with --base against other manifests, offline."
        )
        add = parser.add_argument
        add(
            "-f",
            "--filename",
            action="append",
            default=[],
            dest="files",
            required=True,
            metavar="FILE|DIR|-",
            help="manifests to apply (repeatable; - reads stdin)",
        )
        add("-R", "--recursive", action="store_true", help="read directories' subdirectories")
        add(
            "--base",
            action="append",
            default=[],
            metavar="FILE|DIR",
            help="the manifests before (repeatable): plan offline, with no cluster",
        )
        add("--namespace", "-n", help="namespace of manifests that name none (default: the "
            "context's; offline: default)")  # fmt: skip
        add("--output", "-o", choices=["table", "wide", "json", "markdown"], default="table",
            help="output format: table fits the terminal, wide shows every cell whole")  # fmt: skip
        add_cluster_flags(parser)
        add_key_flags(parser)
        add_csi_flag(parser)

    def execute(self, args: argparse.Namespace) -> int:
        """Validate everything, read, plan, print; the exit code."""
        if args.namespace is not None:
            try:
                check_namespace("--namespace", args.namespace)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        check_key_flags(args)
        if "-" in args.base:
            raise UsageError("--base -: the base can't be standard input; give files")
        head = _manifests(args.files, args.recursive, "-f")
        _refuse_invalid_annotations(head, args)
        base = _manifests(args.base, args.recursive, "--base") if args.base else None
        plan = _offline(base, head, args) if base is not None else _live(head, args)
        print(render(plan, args.output, width=_terminal_width(), colour=_colour()), end="")
        return 1 if plan.acting or plan.stranded else 0


def _manifests(paths: Sequence[str], recursive: bool, flag: str) -> list[Manifest]:
    try:
        # A base may be empty: the change adds the first manifests.
        return read_manifests(paths, recursive=recursive, flag=flag, empty_ok=flag == "--base")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _refuse_invalid_annotations(manifests: Sequence[Manifest], args: argparse.Namespace) -> None:
    """A kube-nudge annotation the controller would refuse (a Warning Event): the same words,
    one line, before anything is planned."""
    defaults = product_defaults(compat=args.compat, csi_secrets=args.csi_secrets)
    workloads = {(k.resource.api_version, k.resource.kind) for k in _FILE_KINDS}
    for manifest in manifests:
        problem = annotation_problem(
            manifest.obj, manifest.namespace(args.namespace or "default"), defaults, workloads
        )
        if problem is not None:
            raise UsageError(f"-f {manifest.origin}: {manifest.kind} {manifest.name}: {problem}")


def _plan(inputs: Inputs, notes: list[str]) -> Plan:
    models = {model.name: model for model in model_extensions()}
    rows = plan_rows(
        inputs, now=time.time(), models=models, capped=capped_by_name(),
        records={name: delivers(name) for name in strategy_names()},
    )  # fmt: skip
    return Plan(rows, live=inputs.live, notes=notes, sources=source_changes(inputs, rows))


def _offline(base: list[Manifest], head: list[Manifest], args: argparse.Namespace) -> Plan:
    namespace = args.namespace or "default"
    defaults = product_defaults(compat=args.compat, csi_secrets=args.csi_secrets)
    inputs = offline_inputs(
        sort_objects((m.obj for m in base), namespace, _FILE_KINDS),
        sort_objects((m.obj for m in head), namespace, _FILE_KINDS),
        defaults=defaults,
    )
    return _plan(inputs, [
        "offline: what needs the cluster is not known (the hashes recorded on workloads, the "
        "flap cap, a stopped line, how many pods a pod-selector names); sources no manifest "
        "names are taken to exist unchanged; a rollout window is judged as if applied now",
    ])  # fmt: skip


def _live(head: list[Manifest], args: argparse.Namespace) -> Plan:
    client = connect(args)
    try:
        return asyncio.run(_read_live(client, head, args))
    except ApiError as exc:
        raise api_failure(exc, client) from None


async def _read_live(client: KubeClient, head: list[Manifest], args: argparse.Namespace) -> Plan:
    try:
        key = await read_installation_key(client, args, sys.stderr)
        namespace = args.namespace or client.default_namespace
        given = sort_objects((m.obj for m in head), namespace, _FILE_KINDS)
        defaults = product_defaults(compat=args.compat, csi_secrets=args.csi_secrets)
        refused: list[str] = []
        kinds = await readable_kinds(client, (namespace,), refused=refused)
        inputs = await live_inputs(client, given, defaults=defaults, hmac_key=key, kinds=kinds)
    finally:
        await client.aclose()
    say_unlisted(refused)  # once the plan stands: an error stays one line
    notes = []
    if key is None:
        notes.append(
            f"without the installation key (get on secret {args.state_namespace}/"
            f"{args.hmac_secret}): each workload is taken to run the config in the cluster now"
        )
    return _plan(inputs, notes)


def _terminal_width() -> int | None:
    """The terminal's columns; None when the output goes to no terminal (a file, a pipe, a
    CI log: nothing to fit, so no cell is cut) unless ``COLUMNS`` gives a width."""
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        return None
    return shutil.get_terminal_size().columns


def _colour() -> bool:
    """Colour on a terminal only, and never with ``NO_COLOR`` set and not empty
    (https://no-color.org) or on a dumb terminal."""
    return (
        sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


PLAN = PlanCommand()
