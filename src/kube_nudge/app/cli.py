"""The ``kube-nudge`` command line.

Each subcommand is a module with a ``Command`` object and one entry in ``COMMANDS``. The
local development cluster, its build and the demo are the separate ``kube-nudge-dev``
command (``devtools/``), never part of the product.

Every failure is one line on stderr, never a traceback: a bad flag or argument (exit code 2,
argparse's own errors included), a command's ``CommandError``, and as a last resort anything
unforeseen (exit code 5; ``KUBE_NUDGE_DEBUG=1`` shows the traceback instead).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, Protocol

from kube_nudge import __version__
from kube_nudge.app.completion_command import CompletionCommand
from kube_nudge.app.errors import EXIT_CLUSTER, EXIT_USAGE, CommandError, one_line
from kube_nudge.app.lazy import LazyCommand
from kube_nudge.kube.client import KubeconfigError


class Command(Protocol):
    """One ``kube-nudge`` subcommand."""

    name: str

    @property
    def help(self) -> str:
        """The command's one-line help."""
        ...

    @property
    def exit_codes(self) -> Sequence[tuple[int, str]]:
        """What each exit code means for this command (shown by ``--help``)."""
        ...

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the subcommand's flags."""
        ...

    def execute(self, args: argparse.Namespace) -> int:
        """Validate the flags (exit code 2 on bad input), then run; the exit code."""
        ...


COMPLETION = CompletionCommand(lambda: build_parser())
# Each module is imported only when its command is used (see app/lazy.py).
COMMANDS: tuple[Command, ...] = (
    LazyCommand("run", "kube_nudge.app.run_command", "RUN"),
    LazyCommand("status", "kube_nudge.app.status_command", "STATUS"),
    LazyCommand("wait", "kube_nudge.app.wait_command", "WAIT"),
    LazyCommand("plan", "kube_nudge.app.plan_command", "PLAN"),
    LazyCommand("migrate", "kube_nudge.app.migrate_command", "MIGRATE"),
    LazyCommand("release", "kube_nudge.app.release_command", "RELEASE"),
    LazyCommand("approve", "kube_nudge.app.release_command", "APPROVE"),
    LazyCommand("agent", "kube_nudge.app.agent_command", "AGENT"),
    LazyCommand("annotations", "kube_nudge.app.annotations_command", "ANNOTATIONS_COMMAND"),
    COMPLETION,
)

#: The exit codes of every command (each command's ``--help`` shows its own).
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (0, "success"),
    (1, "the command's negative answer: drift (status), a failed workload (wait), something "
        "would roll (plan, migrate), a workload not stamped (release, approve), a fatal error "
        "(run)"),
    (EXIT_USAGE, "usage: a bad flag, argument or kubeconfig; nothing was sent"),
    (3, "wait: timed out"),
    (4, "wait: nothing to wait for (no such workload or source, or not opted in)"),
    (EXIT_CLUSTER, "the API server was unreachable or refused a request (unauthorized, "
                   "forbidden), or an unforeseen error"),
)  # fmt: skip
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports a SIGINT
DEBUG_ENV = "KUBE_NUDGE_DEBUG"
PROG = "kube-nudge"
#: How kubectl users type it: kubectl runs the plugin ``kubectl-nudge`` for ``kubectl nudge``.
PLUGIN_PROG = "kubectl nudge"
_PLUGIN_EXECUTABLE = "kubectl-nudge"
_LITERAL = re.compile(r"``(.+?)``")


def program_name(argv0: str | None = None) -> str:
    """The command as its user typed it, for usage lines and help: ``kubectl nudge`` when
    run as the kubectl plugin (``argv0``, default this process's, names ``kubectl-nudge``),
    else ``kube-nudge``."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return PLUGIN_PROG if name.split(".")[0] == _PLUGIN_EXECUTABLE else PROG


def plain(text: str) -> str:
    """``text`` without the docstrings' reStructuredText literal markup (````x```` → x),
    as help shows it."""
    return _LITERAL.sub(r"\1", text)


class PlainHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help, with descriptions and epilogs kept as written and every text shown
    plain (``plain``): a docstring's literal markup never reaches a terminal."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


class OneLineParser(argparse.ArgumentParser):
    """argparse, with each usage error as one line naming the command (exit code 2)."""

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads, one used here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, refusing ``--flag=--``: Python's argparse drops the ``--`` and stores
        an empty list where the flag's type wants one value, which no check expects."""
        parsed, extra = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(parsed, action.dest, None)
            given = value is not action.default  # argparse copies a default it appends to
            empty = value == [] or (isinstance(value, list) and [] in value)
            if action.option_strings and action.nargs is None and given and empty:
                flag = max(action.option_strings, key=len)
                self.error(f"{flag} '--': want a value, e.g. {flag}={action.metavar or 'VALUE'}")
        return parsed, extra

    def error(self, message: str) -> NoReturn:
        """One line instead of the whole usage block."""
        root = PLUGIN_PROG if self.prog.startswith(PLUGIN_PROG) else PROG
        command = self.prog.removeprefix(root).strip()
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"kube-nudge: {where}{one_line(message)} (see {self.prog} --help)\n")


def exit_code_help(codes: Sequence[tuple[int, str]]) -> str:
    """The "exit codes" paragraph of a command's ``--help``."""
    return "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in codes)


def build_parser(only: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The top-level argument parser with every subcommand; with ``only``, the others get
    no flags (their modules are not imported: see app/lazy.py). ``prog``: the command as
    typed (default: ``program_name()``)."""
    parser = OneLineParser(
        prog=prog or program_name(),
        description=__doc__.split("\n")[0],
        epilog=exit_code_help(EXIT_CODES),
        formatter_class=PlainHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kube-nudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for command in COMMANDS:
        if only is not None and command.name != only:
            sub.add_parser(command.name)
            continue
        command_parser = sub.add_parser(
            command.name, help=command.help, epilog=exit_code_help(command.exit_codes),
            formatter_class=PlainHelpFormatter,
        )  # fmt: skip
        command.configure(command_parser)
        command_parser.set_defaults(execute=command.execute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kube-nudge`` console script."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = args_list[0] if args_list else None
    only = chosen if chosen in {command.name for command in COMMANDS} else None
    args = build_parser(only).parse_args(args_list)
    try:
        return int(args.execute(args))
    except CommandError as exc:
        print(f"kube-nudge: {one_line(exc)}", file=sys.stderr)
        return exc.code
    except KubeconfigError as exc:  # its credentials, found wanting by a request
        print(f"kube-nudge: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("kube-nudge: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        text = one_line(" ".join(str(exc).split())[:300])
        print(
            f"kube-nudge: {args.command}: unexpected {type(exc).__name__}: {text} "
            f"(set {DEBUG_ENV}=1 to see where)",
            file=sys.stderr,
        )
        return EXIT_CLUSTER


if __name__ == "__main__":
    raise SystemExit(main())
