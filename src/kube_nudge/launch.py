"""The ``kube-nudge`` console script and ``python -m kube_nudge``.

``kube-nudge agent ...`` goes straight to the lean sidecar (standard library only): the
controller's command line imports its whole stack (about 43 MB), more than a sidecar's memory
limit allows even for a moment. Every other command goes to the full command line.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

AGENT = "agent"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: this process's arguments) names; the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [AGENT]:
        from kube_nudge.agent.main import main as agent_main

        return agent_main(args[1:])
    from kube_nudge.app.cli import main as cli_main

    return cli_main(args)
