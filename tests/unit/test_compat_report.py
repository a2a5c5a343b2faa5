"""docs/compatibility.md is what tests/integration/compat_report.py renders from the committed
matrix results; the suite selects tests that exist; each difference is backed by a check;
the matrix reads outcomes and durations from pytest's JUnit report exactly."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from bench.gitstate import src_changes_since

from kube_nudge.model.kubeversion import SUPPORTED_MINORS
from kube_nudge_dev.releases import PINNED
from tests.integration.compat_matrix import OUTPUTS, by_check, junit_tests, selects
from tests.integration.compat_report import check_outcome, render
from tests.integration.compat_suite import CHECKS, DIFFERENCES, node_ids

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "compatibility.json"
PAGE = REPO / "docs" / "compatibility.md"
REGENERATE = (
    "python -m tests.integration.compat_report docs/compatibility.json docs/compatibility.md"
)


def committed_results() -> dict[str, object] | None:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else None


def test_the_page_is_generated_from_the_committed_results() -> None:
    """Including how many commits since the proof changed src/: a product change makes the
    page say so (regenerated), or the matrix runs again."""
    results = committed_results()
    behind = src_changes_since(str(results["commit"])) if results is not None else None
    assert PAGE.read_text() == render(results, behind), f"regenerate it: {REGENERATE}"
    assert (str(RESULTS.relative_to(REPO)), str(PAGE.relative_to(REPO))) == OUTPUTS


def test_the_readme_names_the_commit_the_matrix_proved() -> None:
    results = committed_results()
    if results is None:
        pytest.skip("no matrix run committed yet")
    readme = (REPO / "README.md").read_text()
    assert f"`make test-matrix` proves\neach minor, last at commit {results['commit']} " in readme


def test_committed_results_name_a_clean_commit_and_every_pinned_release() -> None:
    results = committed_results()
    if results is None:
        pytest.skip("no matrix run committed yet")
    assert results["clean"] is True and results["commit"]
    runs = results["runs"]
    assert isinstance(runs, list)
    assert [run["version"] for run in runs] == [PINNED[minor] for minor in SUPPORTED_MINORS]
    for run in runs:
        assert set(run["checks"]) == {check.name for check in CHECKS}


def _functions(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_selection_names_an_existing_test() -> None:
    for node in node_ids():
        path, _, name = node.partition("::")
        assert (REPO / path).is_file(), node
        if name:
            assert name in _functions(REPO / path), node
    assert len({check.name for check in CHECKS}) == len(CHECKS)


def test_every_difference_is_backed_by_a_check() -> None:
    names = {check.name for check in CHECKS}
    assert DIFFERENCES
    for difference in DIFFERENCES:
        assert difference.check in names, difference.check


def test_real_node_checks_can_be_left_out() -> None:
    every, without = node_ids(), node_ids(real_node=False)
    assert set(without) < set(every)
    assert not [n for n in without if "real_node" in n]


INFORMER, ROLLOUTS = "tests.integration.test_informer", "tests.integration.test_controller_rollouts"
CASES = [
    (INFORMER, "test_paginated_list_then_watch_events", "1.5", ""),
    (INFORMER, "test_streaming_list_sends_no_list_request", "2.0", '<failure message="x"/>'),
    (ROLLOUTS, "test_every_reference_form_rolls_every_kind[deployments]", "3.25", ""),
    (ROLLOUTS, "test_every_reference_form_rolls_every_kind[cronjobs]", "1.0", "<skipped/>"),
]
REPORT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
    + "".join(
        f'<testcase classname="{module}" name="{name}" time="{seconds}">{inner}</testcase>'
        for module, name, seconds, inner in CASES
    )
    + "</testsuite></testsuites>"
)


def test_outcomes_and_durations_come_from_the_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(REPORT)
    tests = junit_tests(report)
    assert [(t["outcome"], t["seconds"]) for t in tests] == [
        ("passed", 1.5), ("failed", 2.0), ("passed", 3.25), ("skipped", 1.0),
    ]  # fmt: skip
    checks = by_check(tests)
    assert checks["initial state by pages (the fallback, forced)"]["outcome"] == "passed"
    assert checks["initial state by streaming list (sendInitialEvents)"]["outcome"] == "failed"
    kinds = checks["rollouts of every built-in kind"]
    assert (kinds["outcome"], kinds["seconds"]) == ("passed", 4.2)  # one ran, one skipped
    assert checks["a restart writes nothing"]["outcome"] == "not run"


@pytest.mark.parametrize(
    ("node", "test", "selected"),
    [
        ("tests/integration/test_a.py::test_x", "tests/integration/test_a.py::test_x", True),
        ("tests/integration/test_a.py::test_x", "tests/integration/test_a.py::test_x[1]", True),
        ("tests/integration/test_a.py::test_x", "tests/integration/test_a.py::test_xy", False),
        ("tests/integration/test_a.py", "tests/integration/test_a.py::test_y", True),
        ("tests/integration/test_a.py", "tests/integration/test_ab.py::test_y", False),
    ],
)
def test_which_tests_a_selection_takes(node: str, test: str, selected: bool) -> None:
    assert selects(node, test) is selected


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([], "not run"),
        (["passed", "skipped"], "passed"),
        (["passed", "failed"], "failed"),
        (["skipped"], "skipped"),
    ],
)
def test_a_checks_outcome(outcomes: list[str], expected: str) -> None:
    assert check_outcome([{"outcome": o} for o in outcomes]) == expected


def test_results_of_a_dirty_tree_are_refused() -> None:
    results = json.loads(RESULTS.read_text())
    with pytest.raises(ValueError, match="dirty tree"):
        render({**results, "clean": False})
