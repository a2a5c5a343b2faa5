"""``make test-matrix``: the compatibility suite (``compat_suite.py``) on every supported
Kubernetes minor, one after another, then the committed results and docs/compatibility.md.

For each pinned release it builds (or reuses) the control plane, kubelet and kube-proxy,
timing that, then runs the suite's tests in a pytest session of its own with
``$KUBE_NUDGE_KUBE_VERSION`` set, reading each test's outcome and duration from its JUnit
report. A tree that differs from its commit is refused before anything runs: the committed
results always name a commit that holds the code they measured. Usage:
``python -m tests.integration.compat_matrix [--minors 1.34,1.35] [--no-real-node]``
(a subset writes build/compatibility.json only, never the committed file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess  # nosec B404 # runs pytest, one session per release
import sys
import time
import xml.etree.ElementTree as ElementTree  # nosec B405 # our own pytest's JUnit report
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gitstate import src_changes_since, tree_state

from kube_nudge_dev.build import COMPONENTS, HELM_VERSION, NODE_COMPONENTS, ensure_binaries
from kube_nudge_dev.releases import ENV, KubeRelease, UnknownRelease, every, parse_release
from tests.integration.compat_report import check_outcome, render
from tests.integration.compat_suite import CHECKS, node_ids

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "compatibility.json"
PAGE = REPO / "docs" / "compatibility.md"
SCRATCH = REPO / "build" / "compat"
#: What the matrix itself writes: never a reason to refuse a run.
OUTPUTS = ("docs/compatibility.json", "docs/compatibility.md")


def junit_tests(report: Path) -> list[dict[str, Any]]:
    """Each test case of a JUnit report: its node id, outcome and seconds."""
    tests = []
    for case in ElementTree.parse(report).iter("testcase"):  # noqa: S314  # nosec B314 # our own report
        module = case.get("classname", "").replace(".", "/")
        outcome = "passed"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        node = f"{module}.py::{case.get('name')}"
        tests.append({"id": node, "outcome": outcome, "seconds": float(case.get("time", 0))})
    return tests


def selects(node_id: str, test_id: str) -> bool:
    """Whether the suite's ``node_id`` (a module, or a test of it) selects ``test_id`` (a
    test, with its parameters)."""
    if "::" not in node_id:
        return test_id.startswith(f"{node_id}::")
    return test_id == node_id or test_id.startswith(f"{node_id}[")


def by_check(tests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each check's outcome, seconds and tests, from the session's test cases."""
    checks = {}
    for check in CHECKS:
        mine = [t for t in tests if any(selects(node, t["id"]) for node in check.tests)]
        checks[check.name] = {
            "outcome": check_outcome(mine),
            "seconds": round(sum(t["seconds"] for t in mine), 1),
            "tests": mine,
        }
    return checks


def run_release(kube: KubeRelease, *, real_node: bool) -> dict[str, Any]:
    """Build (or reuse) ``kube``'s binaries, then run the suite against it."""
    names = COMPONENTS + (NODE_COMPONENTS if real_node else ())
    started = time.monotonic()
    ensure_binaries(names, kube=kube)
    built = time.monotonic() - started
    SCRATCH.mkdir(parents=True, exist_ok=True)
    report = SCRATCH / f"{kube.version}.xml"
    report.unlink(missing_ok=True)
    env = {**os.environ, ENV: f"1.{kube.minor}"}
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        f"--junitxml={report}", *node_ids(real_node=real_node),
    ]  # fmt: skip
    print(f"[matrix] {kube.version}: {len(command) - 6} selections", flush=True)
    suite_started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, env=env, check=False)  # nosec B603 # our pytest
    tests = junit_tests(report) if report.exists() else []
    return {
        "version": kube.version,
        "build_seconds": round(built, 1),
        "suite_seconds": round(time.monotonic() - suite_started, 1),
        "pytest_exit": done.returncode,
        "checks": by_check(tests),
    }


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make test-matrix", description=__doc__)
    parser.add_argument("--minors", help="a comma-separated subset, e.g. 1.34,1.37")
    parser.add_argument("--no-real-node", action="store_true", help="leave the real node out")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the matrix; exit 0 only when every check passed on every minor."""
    args = _arguments(argv)
    try:
        chosen = (
            tuple(parse_release(text) for text in args.minors.split(","))
            if args.minors
            else every()
        )
    except UnknownRelease as exc:
        print(f"make test-matrix: --minors {exc}", file=sys.stderr)
        return 2
    state = tree_state(REPO)
    dirty = [entry for entry in state.dirty if not entry.split(" ", 1)[1].startswith(OUTPUTS)]
    if dirty:
        print(
            f"make test-matrix: the tree differs from {state.commit} ({', '.join(dirty[:5])}): "
            "commit or stash first, so the results name the code they measured",
            file=sys.stderr,
        )
        return 2
    started, wall = datetime.now(UTC), time.monotonic()
    runs = [run_release(kube, real_node=not args.no_real_node) for kube in chosen]
    results = {
        "commit": state.commit,
        "clean": True,
        "started": f"{started:%Y-%m-%d %H:%M} UTC",
        "seconds": round(time.monotonic() - wall, 1),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "helm": HELM_VERSION,
        "real_node": not args.no_real_node,
        "runs": runs,
    }
    complete = not args.minors and not args.no_real_node
    target = RESULTS if complete else REPO / "build" / "compatibility.json"
    target.write_text(json.dumps(results, indent=1) + "\n")
    if complete:
        PAGE.write_text(render(results, src_changes_since(str(results["commit"]))))
    print(f"[matrix] wrote {target}{' and ' + str(PAGE) if complete else ''}", flush=True)
    failed = [
        f"{run['version']}: {name}"
        for run in runs
        for name, check in run["checks"].items()
        if check["outcome"] != "passed"
    ]
    for line in failed:
        print(f"[matrix] not passed: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
