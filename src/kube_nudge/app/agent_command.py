"""``kube-nudge agent``: the reload sidecar (``kube_nudge.agent``), from the product's CLI.

The agent must run lean (standard library only), but the ``kube-nudge`` command line imports
every command and so the controller's dependencies. After checking the flags, this command
therefore replaces the process (same PID) with ``python -m kube_nudge.agent`` and the same
flags, unless nothing heavy is loaded, in which case it runs the agent in place.
"""

from __future__ import annotations

import argparse
import os
import sys

from kube_nudge.agent import LEAN_EXCLUDED
from kube_nudge.agent.config import add_flags, build_config, to_argv
from kube_nudge.agent.main import run
from kube_nudge.app.errors import one_line

__all__ = ["AGENT", "AgentCommand", "lean_argv"]


def lean_argv(args: argparse.Namespace) -> list[str]:
    """The command that runs the agent with ``args`` in a fresh, lean interpreter."""
    return [sys.executable, "-m", "kube_nudge.agent", *to_argv(args)]


class AgentCommand:
    """``kube-nudge agent``."""

    name = "agent"
    help = "sidecar: reload an app in place when its mounted ConfigMap/Secret files change"
    exit_codes = (
        (0, "stopped by SIGTERM or SIGINT"),
        (2, "a bad flag; nothing was started"),
    )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The agent's flags."""
        add_flags(parser)

    def execute(self, args: argparse.Namespace) -> int:
        """Validate (exit code 2 on bad input), then run the agent lean."""
        try:
            config = build_config(args)
        except ValueError as exc:
            print(f"kube-nudge: {one_line(exc)}", file=sys.stderr)
            return 2
        if any(name in sys.modules for name in LEAN_EXCLUDED):
            sys.stdout.flush()
            sys.stderr.flush()
            argv = lean_argv(args)
            os.execv(argv[0], argv)  # noqa: S606  # nosec B606 # our own interpreter
        return run(config)


AGENT = AgentCommand()
