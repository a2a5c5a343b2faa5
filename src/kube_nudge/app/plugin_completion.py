"""``kubectl_complete-nudge``: shell completion for ``kubectl nudge`` (kube-nudge installed
as a kubectl plugin, ``kubectl-nudge``).

kubectl (1.26 and later) completes a plugin's words by running ``kubectl_complete-<plugin>``
from $PATH with the words typed so far and the one being completed (possibly empty), and
reads one candidate per line, then optionally ``:<directive>`` (cobra's shell-completion
directives: 0 lets the shell complete file names, 4 stops it). The candidates come from the
same description of the parser as ``kube-nudge completion``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from kube_nudge.app.completion_command import Subcommand, describe

__all__ = ["FILES", "NO_FILES", "candidates", "main"]

FILES = 0
"""cobra.ShellCompDirectiveDefault: the shell completes file names."""
NO_FILES = 4
"""cobra.ShellCompDirectiveNoFileComp."""


def candidates(words: Sequence[str], commands: Sequence[Subcommand]) -> tuple[list[str], int]:
    """What completes the last of ``words`` (the earlier ones typed already), and the
    directive for the shell."""
    *typed, current = words or [""]
    if not typed:
        names = [c.name for c in commands] + ["--help", "--version"]
        return [n for n in names if n.startswith(current)], NO_FILES
    chosen = next((c for c in commands if c.name == typed[0]), None)
    if chosen is None:
        return [], NO_FILES
    flag = next((f for f in chosen.flags if typed[-1] in f.names and f.takes_value), None)
    if flag is not None and len(typed) > 1:
        if flag.choices:
            return [c for c in flag.choices if c.startswith(current)], NO_FILES
        return [], FILES if flag.is_file else NO_FILES
    words_here = [n for f in chosen.flags for n in f.names] if current.startswith("-") else [
        *chosen.targets, *(chosen.choices[1] if chosen.choices else ()),
    ]  # fmt: skip
    return [w for w in words_here if w.startswith(current)], NO_FILES


def main(argv: Sequence[str] | None = None) -> int:
    """Print the candidates for ``argv`` (default: this process's arguments)."""
    from kube_nudge.app.cli import build_parser

    words = list(sys.argv[1:] if argv is None else argv)
    found, directive = candidates(words, describe(build_parser()))
    print("\n".join([*found, f":{directive}"]))
    return 0
