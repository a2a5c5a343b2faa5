"""What ``kube-nudge plan`` prints, the same content in each format: the summary, what the
plan could not know, the changed sources (their keys by name, their consumers) and a row
per workload, those with an action first. A table fitted to the terminal (``-o wide``:
every cell whole), markdown for a pull-request comment, or the JSON document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from kube_nudge.app.tables import GAP, column_widths, fit
from kube_nudge.model.preview import Verb
from kube_nudge.reporting.planning import Change, Consumer, Plan, PlanRow, SourceChange

__all__ = ["COLOURS", "render", "render_json", "render_markdown", "render_table"]

#: The ANSI colour of each action's cell on a terminal (the others stay plain).
COLOURS: dict[str, str] = {
    Verb.ROLL: "33", Verb.RELOAD: "33", Verb.EVICT: "33", Verb.HOLD: "31", Verb.UNKNOWN: "31",
}  # fmt: skip
_SOURCES_HEADER = ("CHANGED SOURCE", "CHANGE", "KEYS", "CONSUMERS")
_ROWS_HEADER = ("WORKLOAD", "ACTION", "SOURCES", "REASON")
#: On a narrow terminal, which columns are cut first: the details, the names last, the
#: change and the action never. A row's sources are cut before its reason: the changed
#: sources above name them whole.
_SOURCES_GIVE_WAY = (3, 2, 0)
_ROWS_GIVE_WAY = (2, 3, 0)


def render(plan: Plan, output: str, *, width: int | None, colour: bool) -> str:
    """``plan`` as ``-o OUTPUT`` asks: table, wide, markdown or json."""
    if output == "json":
        return render_json(plan)
    if output == "markdown":
        return render_markdown(plan)
    return render_table(plan, width=None if output == "wide" else width, colour=colour)


def render_json(plan: Plan) -> str:
    """The document of docs/schemas/plan-v2.json."""
    return json.dumps(plan.document(), indent=2) + "\n"


def render_table(plan: Plan, *, width: int | None = None, colour: bool = False) -> str:
    """Aligned columns that fit ``width`` (None: no limit, every cell whole); with
    ``colour``, the action cells are coloured, nothing else."""
    lines = [plan.summary()]
    lines += [f"warning: {warning}" for warning in warnings(plan)]
    lines += [f"note: {note}" for note in plan.notes]
    if plan.sources:
        table = [_SOURCES_HEADER, *(_source_cells(s, plan.live) for s in plan.sources)]
        lines += ["", *_aligned(table, width, _SOURCES_GIVE_WAY, colour=False)]
    if plan.rows:
        table = [_ROWS_HEADER, *(_row_cells(row) for row in plan.rows)]
        lines += ["", *_aligned(table, width, _ROWS_GIVE_WAY, colour=colour)]
    return "\n".join(lines) + "\n"


def _aligned(
    table: Sequence[Sequence[str]], width: int | None, give_way: Sequence[int], *, colour: bool
) -> list[str]:
    """Each row of ``table`` (header first) as a line, cut to ``width`` as ``give_way``
    says; with ``colour``, the word of its second column (the action) coloured."""
    widths = column_widths(table, width, give_way)
    lines = []
    for n, row in enumerate(table):
        cells = [fit(cell, w) for cell, w in zip(row, widths, strict=True)]
        code = COLOURS.get(row[1]) if colour and n else None
        if code is not None:  # the word only: its padding stays plain
            cells[1] = f"\x1b[{code}m{row[1]}\x1b[0m" + cells[1][len(row[1]) :]
        lines.append((" " * GAP).join(cells).rstrip())
    return lines


def render_markdown(plan: Plan) -> str:
    """For a pull-request comment: the summary first, then the changed sources and the
    workloads as tables."""
    lines = [f"**kube-nudge plan:** {plan.summary()}", ""]
    quoted = [f"**warning:** {w}" for w in warnings(plan)] + list(plan.notes)
    lines += [f"> {_md(line)}" for line in quoted] + ([""] if quoted else [])
    if plan.sources:
        lines += ["| Changed source | Change | Keys | Consumers |", "|---|---|---|---|"]
        lines += [
            f"| `{cells[0]}` | {cells[1]} | {_md(cells[2])} | {_md(cells[3])} |"
            for cells in (_source_cells(s, plan.live) for s in plan.sources)
        ]
        lines.append("")
    if plan.rows:
        lines += ["| Workload | Action | Sources | Why |", "|---|---|---|---|"]
        lines += [
            f"| `{_workload(r)}` | **{r.action}** | {_md(_sources(r))} | {_md(_reason(r))} |"
            for r in plan.rows
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def warnings(plan: Plan) -> list[str]:
    """What a reviewer must not miss: each source whose deletion (or lost keys) leaves
    workloads without config they require."""
    found = []
    for source in plan.sources:
        n = sum(c.stranded for c in source.consumers)
        if not n:
            continue
        who = "1 workload requires" if n == 1 else f"{n} workloads require"
        theirs = "its" if n == 1 else "their"
        if source.change is Change.DELETED:
            found.append(f"{source.ref} is deleted, yet {who} it: {theirs} new pods can't "
                         "start until it is back")  # fmt: skip
        else:
            found.append(f"{source.ref} loses keys {who}: {theirs} new pods can't start "
                         "until they are back")  # fmt: skip
    return found


def _source_cells(source: SourceChange, live: bool) -> tuple[str, str, str, str]:
    return (str(source.ref), str(source.change), _keys(source), _consumers(source, live))


def _keys(source: SourceChange) -> str:
    """Names only, never a value."""
    if source.change is Change.UNREADABLE:
        return "not known: this user may not get it"
    parts = [
        f"{label}: {', '.join(keys)}"
        for label, keys in (
            ("changed", source.changed), ("added", source.added), ("removed", source.removed),
        )
        if keys
    ]  # fmt: skip
    if source.annotations:
        parts.append("its kube-nudge annotations")
    return "; ".join(parts) or "no key"


def _consumers(source: SourceChange, live: bool) -> str:
    if not source.consumers:
        return "no consumer in this input or cluster" if live else "no consumer in this input"
    text = ", ".join(_consumer(c, source.ref.namespace) for c in source.consumers)
    if source.unread:
        text += f"; no consumer reads {', '.join(source.unread)}"
    return text


def _consumer(consumer: Consumer, namespace: str) -> str:
    where = "" if consumer.namespace == namespace else f"{consumer.namespace}/"
    stranded = " (new pods can't start)" if consumer.stranded else ""
    return f"{where}{consumer.kind}/{consumer.name} {consumer.action}{stranded}"


def _row_cells(row: PlanRow) -> tuple[str, str, str, str]:
    return (_workload(row), str(row.action), _sources(row), _reason(row))


def _workload(row: PlanRow) -> str:
    return f"{row.namespace}/{row.kind}/{row.name}"


def _sources(row: PlanRow) -> str:
    return "; ".join(row.sources) or "-"


def _reason(row: PlanRow) -> str:
    # A window's hold names its opening itself; the others (a flap cap, say) end by then.
    if row.action is Verb.HOLD and row.until is not None and row.hold != "window":
        until = datetime.fromtimestamp(row.until, UTC).strftime("%Y-%m-%d %H:%M UTC")
        return f"{row.reason} (until {until} at the latest)"
    return row.reason


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
