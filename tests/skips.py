"""No hidden skips: every skip is reported (``-rs``), and a run fails on a skip whose reason
is not in ``ALLOWED``, or, in CI, on any skip at all.

A skip hides a feature going untested, so each allowed one names what a developer's machine
may lack and how to get it; CI (``.ci/run`` sets ``CI=true``) runs as root after
``make host-packages``, so there nothing may be missing and nothing is skipped. A new
``pytest.skip`` needs an entry here, and a reason that CI can never meet.
"""

from __future__ import annotations

import os

import pytest

#: Reasons (the start of the skip's message) a developer's machine may have, and why.
ALLOWED = {
    "no bash": "the bash completion tests run bash (the host packages have it)",
    "no zsh": "the zsh completion tests run zsh (`make host-packages` installs it)",
    "not root: the image tests need rootful podman": "`make image` needs root",
    "podman not found": "the image tests run the image with podman (`make host-packages`)",
    "needs root to run the agent as another user": "the agent test switches users",
    "no hashed system CA directory": "the lazy CA test reads /etc/ssl/certs (ca-certificates)",
    "glibc's malloc_trim": "the heap test needs Linux",
    "not a git checkout": "the figures test reads the commit of bench/results",
}

_skipped: list[tuple[str, str]] = []


def in_ci() -> bool:
    """True in CI, where no skip is allowed (``CI`` set to anything but empty or false)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def refused(reason: str) -> bool:
    """Whether a skip with ``reason`` fails the run here."""
    return in_ci() or not any(reason.startswith(allowed) for allowed in ALLOWED)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note every skip (an xfail is not one: it ran)."""
    if report.skipped and not hasattr(report, "wasxfail") and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        _skipped.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail a run that would otherwise pass if any skip is refused."""
    if any(refused(reason) for _, reason in _skipped) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name each refused skip and the rule it broke."""
    bad = [(nodeid, reason) for nodeid, reason in _skipped if refused(reason)]
    if not bad:
        return
    rule = "CI allows no skip" if in_ci() else "not in tests/skips.py ALLOWED"
    terminalreporter.section("refused skips", sep="=", red=True)
    for nodeid, reason in bad:
        terminalreporter.line(f"{nodeid}: {reason} ({rule})")
