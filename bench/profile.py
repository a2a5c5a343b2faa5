"""Where a tool's CPU goes while it rolls: py-spy samples of the fan-out and burst windows.

``BENCH_PROFILE=1`` attaches ``py-spy record`` (a development dependency) to each Python
tool for exactly the window whose CPU the scenario measures, from the change until every
workload rolled, and adds each category's share of the busy samples to the run's figures
(``cpu_pct_<category>``; idle samples, the event loop waiting in ``epoll``, are left out).
py-spy reads the process from outside (``--nonblocking``: it never pauses it), but it
takes CPU of its own on the same machine: run it apart from the figures it would disturb
(``BENCH_OUTPUT=profile``), never in the full run. Tools that aren't Python (the peers) get
no profile.

A sample is charged to the first category one of whose patterns appears in its stack, so
the order matters: a log line written while a reconcile rolls a workload is logging.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess  # nosec B404 # py-spy, a fixed argv of our own
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

#: (category, frame patterns), first match wins. Patterns are substrings of py-spy's frame
#: names (``function (path:line)``).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("events", ("kube_nudge/kube/events.py", "kube_nudge/runtime/events.py")),
    ("logging", ("logging/__init__.py",)),
    ("watch_projection", ("project_workload", "project_source")),
    ("watch_handlers", ("WorkloadEvents.__call__", "SourceEvents.__call__")),
    ("watch_stream", ("Informer.", "KubeClient.watch")),
    ("reconcile_assess_decide", ("assess (", "decide (", "Reconciler._decide")),
    ("reconcile_write_request", ("KubeClient.request", "KubeClient._request")),
    ("reconcile_other", ("Workers._work",)),
)
#: Samples in none of kube-nudge's code: the event loop itself, TLS, and aiohttp's protocol
#: callbacks (reading responses and watch streams off the sockets).
OUTSIDE_TASKS = "loop_tls_http_callbacks"
OTHER = "other"
IDLE_LEAF = "select (selectors.py"
LOOP_DISPATCH = "asyncio/events.py"  # Handle._run: the loop calling a callback or a task
RATE = 250  # samples per second


#: What each category is, for the pages.
LABELS: dict[str, str] = {
    "events": "posting Events",
    "logging": "log lines",
    "watch_projection": "watch: projecting objects",
    "watch_handlers": "watch: change handlers (index, queue)",
    "watch_stream": "watch: reading and decoding the stream",
    "reconcile_assess_decide": "reconcile: hash and decision",
    "reconcile_write_request": "reconcile: the write's HTTP request",
    "reconcile_other": "reconcile: the rest (book, strategy, metrics)",
    OUTSIDE_TASKS: "event loop, TLS, aiohttp's protocol callbacks",
    OTHER: "other kube-nudge code",
}
#: The categories that are HTTP and TLS work (what another HTTP client could make cheaper).
HTTP = ("reconcile_write_request", OUTSIDE_TASKS)


def category_names() -> tuple[str, ...]:
    """Every category a profile reports, in order."""
    return (*(name for name, _ in CATEGORIES), OUTSIDE_TASKS, OTHER)


def classify(frames: list[str]) -> str | None:
    """The category of one sample's stack (outermost frame first); None if idle."""
    if frames and IDLE_LEAF in frames[-1]:
        return None
    for name, patterns in CATEGORIES:
        if any(pattern in frame for frame in frames for pattern in patterns):
            return name
    # What the event loop is running: the frames below its last callback dispatch (the
    # frames above it, down from the entry point, are in every sample).
    dispatched = [i for i, frame in enumerate(frames) if LOOP_DISPATCH in frame]
    running = frames[dispatched[-1] + 1 :] if dispatched else []
    if any("kube_nudge/" in frame for frame in running):
        return OTHER  # kube-nudge's own code in no category above
    return OUTSIDE_TASKS


def samples(collapsed: Iterable[str]) -> Iterator[tuple[list[str], int]]:
    """(stack, count) of each line of py-spy's raw (collapsed) output, ``frame;frame COUNT``;
    lines of any other shape are skipped."""
    for line in collapsed:
        stack, _, number = line.rstrip("\n").rpartition(" ")
        if stack and number.isdigit():
            yield stack.split(";"), int(number)


def shares(collapsed: Iterable[str]) -> dict[str, float]:
    """Percent of the busy samples per category, from py-spy's raw output. Every category
    is present (0.0 if unseen)."""
    counts: Counter[str] = Counter()
    for frames, count in samples(collapsed):
        category = classify(frames)
        if category is not None:
            counts[category] += count
    busy = sum(counts.values())
    return {name: round(100.0 * counts[name] / busy, 1) if busy else 0.0
            for name in category_names()}  # fmt: skip


def py_spy() -> str | None:
    """The py-spy beside this interpreter (the development virtualenv), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Sampler:
    """py-spy recording one process from ``start`` until ``stop``; a no-op when disabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._process: subprocess.Popen[bytes] | None = None
        self._output: Path | None = None

    def start(self, pid: int) -> None:
        """Begin sampling ``pid`` (nothing when disabled or py-spy is missing)."""
        binary = py_spy() if self.enabled else None
        if binary is None:
            return
        handle, name = tempfile.mkstemp(prefix="bench-profile-", suffix=".txt")
        os.close(handle)
        self._output = Path(name)
        argv = [binary, "record", "--pid", str(pid), "--nonblocking", "--rate", str(RATE),
                "--format", "raw", "--output", name]  # fmt: skip
        self._process = subprocess.Popen(  # nosec B603 # fixed argv, no shell
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> dict[str, float]:
        """End sampling; the figures (``cpu_pct_<category>`` and ``profile_samples``), or
        none if nothing was sampled (disabled, or a tool py-spy can't read)."""
        process, output = self._process, self._output
        self._process = self._output = None
        if process is None or output is None:
            return {}
        process.send_signal(signal.SIGINT)  # py-spy writes its output and exits
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        try:
            lines = output.read_text().splitlines() if output.exists() else []
        finally:
            output.unlink(missing_ok=True)
        sampled = sum(count for _, count in samples(lines))
        if not sampled:
            return {}
        figures = {f"cpu_pct_{name}": value for name, value in shares(lines).items()}
        return {**figures, "profile_samples": float(sampled)}
