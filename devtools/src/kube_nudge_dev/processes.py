"""Child processes of the local cluster: start, health-poll, report death, stop."""

from __future__ import annotations

import ctypes
import signal
import subprocess  # nosec B404 # the dev cluster runs etcd/kube-apiserver/... as children
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
    """A component failed; the first line names it and its log file."""


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if kube-nudge itself is killed (even with
    # SIGKILL), the kernel kills the child too, so no orphan is ever left behind.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(errors="replace").rstrip().splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) if text else "(log is empty)"


@dataclass
class Component:
    """One control-plane process and its log file."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start the process with its output appended to its log file."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as sink:
            # start_new_session: a Ctrl-C in the terminal reaches only us, so we stop the
            # children in order instead of racing them.
            self.process = subprocess.Popen(  # nosec B603 # argv built by kube_nudge_dev, no shell
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def exited(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return None if self.process is None else self.process.poll()

    def failure(self, when: str) -> ClusterError:
        """A ClusterError describing this component's unexpected exit."""
        code = self.exited()
        return ClusterError(
            f"{self.name} exited unexpectedly {when} (exit code {code}); log: {self.log}\n"
            f"--- last lines of {self.log.name} ---\n{log_tail(self.log)}"
        )

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the process and reap it (a crash, as faults tests need it)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def wait_or_kill(self, timeout: float) -> None:
        """Wait for exit, SIGKILL after ``timeout`` seconds."""
        if self.process is None:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def stop_all(components: list[Component], timeout: float = 10.0) -> None:
    """Stop components in reverse start order; etcd (first started) goes last."""
    if not components:
        return
    head, rest = components[0], components[1:]
    for component in rest:
        component.terminate()
    for component in rest:
        component.wait_or_kill(timeout)
    head.terminate()
    head.wait_or_kill(timeout)


def poll_until(
    what: str,
    ready: Callable[[], bool],
    components: list[Component],
    timeout: float,
    interval: float = 0.05,
) -> None:
    """Poll ``ready`` until true; fail fast if any component dies, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        for component in components:
            if component.exited() is not None:
                raise component.failure(f"while waiting for {what}")
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = ", ".join(str(c.log) for c in components[-3:])
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}; logs: {logs}")
        time.sleep(interval)
