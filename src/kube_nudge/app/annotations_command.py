"""``kube-nudge annotations``: the annotation contract, from its declarations (the model's
and each strategy's, ``strategies.registry.contract``): every annotation and label
kube-nudge reads or writes, what it goes on, who writes it, what it accepts and its default.

    kube-nudge annotations                  # for a terminal
    kube-nudge annotations -o markdown      # the annotation table (tools/readme_annotations.py)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Iterable

from kube_nudge.model.shapes import Annotation, By

__all__ = ["ANNOTATIONS_COMMAND", "AnnotationsCommand", "markdown_table", "text_listing"]

OUTPUTS = ("text", "markdown")
_HEADINGS = {
    By.USER: "Set by you",
    By.CONTROLLER: "Written by kube-nudge",
    By.AGENT: "Written by the reload agent (kube-nudge agent)",
}
_MAX_WIDTH = 100


def _shown_name(annotation: Annotation) -> str:
    return f"{annotation.name} (label)" if annotation.label else annotation.name


def _contract() -> tuple[Annotation, ...]:
    """The model's declarations and every registered strategy's (imported lazily, like
    every subcommand's dependencies)."""
    from kube_nudge.strategies.registry import contract

    return contract()


def markdown_table(annotations: Iterable[Annotation] | None = None) -> str:
    """A Markdown table with one row per annotation (docs/concepts.md's; the whole contract unless
    `annotations` are given)."""
    lines = [
        "| Annotation | On | Set by | Values | Default | Meaning |",
        "|---|---|---|---|---|---|",
    ]
    for annotation in _contract() if annotations is None else annotations:
        name = f"`{annotation.name}`" + (" (label)" if annotation.label else "")
        cells = (
            name,
            annotation.on,
            annotation.by,
            annotation.values,
            annotation.shown_default,
            annotation.doc,
        )
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def text_listing(annotations: Iterable[Annotation] | None = None, width: int = 80) -> str:
    """Plain text for a terminal: by who writes them, each annotation with what it goes
    on, then its meaning, values and default indented, wrapped at `width`."""
    wrap = textwrap.TextWrapper(
        width=width, initial_indent="    ", subsequent_indent="    ", break_on_hyphens=False
    )
    by_writer: dict[By, list[Annotation]] = {}
    for annotation in _contract() if annotations is None else annotations:
        by_writer.setdefault(annotation.by, []).append(annotation)
    blocks = []
    for writer, group in by_writer.items():
        lines = [f"{_HEADINGS[writer]}:", ""]
        for annotation in group:
            lines.append(f"  {_shown_name(annotation)}  (on {annotation.on})")
            lines += wrap.wrap(annotation.doc)
            if annotation.values:
                lines += wrap.wrap(f"values: {annotation.values}")
            if annotation.shown_default:
                lines += wrap.wrap(f"default: {annotation.shown_default}")
            lines.append("")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


class AnnotationsCommand:
    """``kube-nudge annotations``."""

    name = "annotations"
    help = "print every annotation kube-nudge reads or writes, with its values and default"
    exit_codes = (
        (0, "the table is printed"),
        (2, "an output other than text or markdown"),
    )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """The output format."""
        parser.description = (
            "Print the annotation contract: every annotation (and label) kube-nudge reads or "
            "writes, what it goes on, who writes it, the values it accepts and its default."
        )
        parser.add_argument(
            "--output",
            "-o",
            choices=OUTPUTS,
            default="text",
            help="text (default: for a terminal) or markdown (the annotation table)",
        )

    def execute(self, args: argparse.Namespace) -> int:
        """Print the table."""
        if args.output == "markdown":
            sys.stdout.write(markdown_table())
        else:
            width = min(shutil.get_terminal_size().columns, _MAX_WIDTH)
            sys.stdout.write(text_listing(width=width))
        return 0


ANNOTATIONS_COMMAND = AnnotationsCommand()
