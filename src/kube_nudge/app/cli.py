"""The ``kube-nudge`` command line.

Each subcommand is a module with a ``Command`` object and one entry in ``COMMANDS``. The
local development cluster, its build and the demo are the separate ``kube-nudge-dev``
command (``devtools/``), never part of the product.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Protocol

from kube_nudge import __version__
from kube_nudge.app.agent_command import AGENT
from kube_nudge.app.release_command import APPROVE, RELEASE
from kube_nudge.app.run_command import RUN
from kube_nudge.app.status_command import STATUS
from kube_nudge.app.wait_command import WAIT


class Command(Protocol):
    """One ``kube-nudge`` subcommand."""

    name: str
    help: str

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Add the subcommand's flags."""
        ...

    def execute(self, args: argparse.Namespace) -> int:
        """Validate the flags (exit code 2 on bad input), then run; the exit code."""
        ...


COMMANDS: tuple[Command, ...] = (RUN, STATUS, WAIT, RELEASE, APPROVE, AGENT)


def build_parser() -> argparse.ArgumentParser:
    """The top-level argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="kube-nudge", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"kube-nudge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command_parser = sub.add_parser(command.name, help=command.help)
        command.configure(command_parser)
        command_parser.set_defaults(execute=command.execute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kube-nudge`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.execute(args))


if __name__ == "__main__":
    raise SystemExit(main())
