"""``kube-nudge plan``'s table: columns fitted to the terminal (the names whole, the details
cut first), whole with no width, and colour on the action cell only."""

from __future__ import annotations

import re

from kube_nudge.app.plan_command import render_table
from kube_nudge.app.tables import column_widths
from kube_nudge.model.preview import Verb
from kube_nudge.reporting.planning import Plan, PlanRow

LONG_NAME = "payments-settlement-reconciliation-worker-eu-west-1"  # 51 characters
REASON = "its pod template gets the new hash: it rolls; wave 2, after order 1: a1, b1 completes"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def a_plan(*rows: PlanRow) -> Plan:
    return Plan(list(rows), live=False)


def row(name: str, action: Verb = Verb.ROLL, reason: str = REASON) -> PlanRow:
    return PlanRow("shop", "Deployment", name, action, reason, ("configmap/app [LEVEL]",))


def table_lines(text: str) -> list[str]:
    """The workload table's lines: from its header on."""
    lines = text.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("WORKLOAD")) :]


def test_a_long_name_is_whole_when_the_terminal_is_wide_enough() -> None:
    """No fixed cap: at 200 columns nothing is cut (the old table cut names at 44)."""
    lines = table_lines(render_table(a_plan(row(LONG_NAME)), width=200))
    assert f"shop/Deployment/{LONG_NAME}  roll" in lines[1]
    assert lines[1].endswith(REASON) and "…" not in lines[1]


def test_every_line_fits_a_narrow_terminal_and_the_details_give_way_first() -> None:
    out = render_table(a_plan(row(LONG_NAME), row("web")), width=120)
    lines = table_lines(out)
    assert max(map(len, lines)) <= 120
    assert f"shop/Deployment/{LONG_NAME}  roll" in lines[1]  # the name whole, the reason cut
    assert lines[1].endswith("…")


def test_no_width_is_every_cell_whole() -> None:
    """What ``-o wide`` and output to a pipe or a file give."""
    lines = table_lines(render_table(a_plan(row(LONG_NAME, reason=REASON * 3)), width=None))
    assert lines[1].endswith(REASON * 3)


def test_column_widths_cut_in_the_order_given_and_never_the_others() -> None:
    table = [("NAME", "ACTION", "SOURCES", "REASON"), ("n" * 30, "reload", "s" * 30, "r" * 60)]
    cut = (2, 3, 0)  # the sources first, then the reason, the name last; the action never
    assert column_widths(table, None, cut) == [30, 6, 30, 60]
    assert column_widths(table, 132, cut) == [30, 6, 30, 60]  # fits exactly
    assert column_widths(table, 122, cut) == [30, 6, 20, 60]
    assert column_widths(table, 80, cut) == [28, 6, 20, 20]
    assert column_widths(table, 10, cut) == [20, 6, 20, 20]  # runs over, not empty


def test_colour_lands_on_the_action_cell_only() -> None:
    """Names holding the word of an action (``payroll`` rolls, ``hold-api`` holds): only the
    ACTION column is coloured, and nothing else in the table."""
    plan = a_plan(row("payroll"), row("hold-api", Verb.HOLD, "held until approved"), row("x"))
    lines = table_lines(render_table(plan, width=120, colour=True))
    assert ANSI.search(lines[0]) is None  # the header
    for line, word in zip(lines[1:], ("roll", "hold", "roll"), strict=True):
        plain = ANSI.sub("", line)
        start = plain.index("  ") + 2
        while plain[start] == " ":
            start += 1
        coloured = re.findall(r"\x1b\[\d+m([^\x1b]*)\x1b\[0m", line)
        assert coloured == [word], line
        assert line.index("\x1b[") == start, line  # at the ACTION column, not in the name


def test_no_colour_unless_asked() -> None:
    assert ANSI.search(render_table(a_plan(row("payroll")), width=120)) is None
