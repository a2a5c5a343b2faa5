"""The reload itself: check the new files, then signal the app's processes or call its URL.

Each step raises ``ReloadFailed`` with its stage (``validate``, ``signal`` or ``http``) and one
line saying what went wrong and what to do; nothing here lets an error out otherwise.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess  # nosec B404 # runs --validate-command, never a shell
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kube_nudge import __version__
from kube_nudge.agent.config import HttpSpec, SignalSpec, ValidateSpec, shown_url

Sleep = Callable[[float], bool]  # wait this long; True if the agent is stopping meanwhile
USER_AGENT = f"kube-nudge-agent/{__version__}"
BACKOFF_CAP = 30.0
_OUTPUT_TAIL = 400
_COMM_LEN = 15  # the kernel keeps the first 15 bytes of a name in /proc/PID/comm


class ReloadFailed(Exception):
    """A reload that did not happen; ``stage`` is validate, signal or http."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


class Reloader:
    """One way of making the app reload: a stage name and ``reload()``."""

    stage: str

    def reload(self) -> str:
        """Make the app reload; what was done, or ReloadFailed."""
        raise NotImplementedError


def backoff_delays(first: float, retries: int, cap: float = BACKOFF_CAP) -> list[float]:
    """The waits before each of ``retries`` retries: ``first``, doubling, at most ``cap``."""
    return [min(first * 2**i, cap) for i in range(retries)]


@dataclass(frozen=True)
class ProcessInfo:
    """What /proc tells about one process."""

    pid: int
    comm: str
    exe: str  # basename of /proc/PID/exe; "" when not readable (another user, kernel thread)
    argv0: str  # basename of argv[0]
    uid: int
    zombie: bool


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def read_process(pid: int, proc: str = "/proc") -> ProcessInfo | None:
    """/proc/PID's names, owner and state; None if it exited meanwhile."""
    base = f"{proc}/{pid}"
    try:
        comm = _read(f"{base}/comm").decode(errors="replace").rstrip("\n")
        argv = _read(f"{base}/cmdline").split(b"\0")
        stat = _read(f"{base}/stat")
        uid = os.stat(base).st_uid
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        exe = os.readlink(f"{base}/exe").removesuffix(" (deleted)")
    except OSError:
        exe = ""
    state = stat[stat.rfind(b")") + 2 :][:1]
    return ProcessInfo(
        pid=pid,
        comm=comm,
        exe=os.path.basename(exe),
        argv0=os.path.basename(argv[0].decode(errors="replace")),
        uid=uid,
        zombie=state == b"Z",
    )


def _pids(proc: str) -> Iterator[int]:
    for name in os.listdir(proc):
        if name.isdigit():
            yield int(name)


def matches(info: ProcessInfo, name: str) -> bool:
    """Whether ``info`` is a process of the executable ``name``.

    Its comm (the first 15 bytes of the name the kernel keeps), the basename of its
    executable or of its argv[0]: a wrapper that renames itself is still found.
    """
    comm_match = info.comm == name or (len(name) > _COMM_LEN and info.comm == name[:_COMM_LEN])
    return comm_match or name in (info.exe, info.argv0)


def find_processes(name: str, proc: str = "/proc") -> list[ProcessInfo]:
    """Every live process of the executable ``name``, except the agent itself."""
    found = []
    own = os.getpid()
    for pid in _pids(proc):
        if pid == own:
            continue
        info = read_process(pid, proc)
        if info is not None and not info.zombie and matches(info, name):
            found.append(info)
    return sorted(found, key=lambda p: p.pid)


class SignalAction(Reloader):
    """Send a signal to every process of one executable (needs a shared process namespace)."""

    stage = "signal"

    def __init__(self, spec: SignalSpec, backoff: float, sleep: Sleep, proc: str = "/proc") -> None:
        self.spec = spec
        self.signame = signal.Signals(spec.signum).name
        self._delays = backoff_delays(backoff, spec.retries)
        self._sleep = sleep
        self._proc = proc

    def _find(self) -> list[ProcessInfo]:
        for delay in [*self._delays, None]:
            found = find_processes(self.spec.process, self._proc)
            if found:
                return found
            if delay is None or self._sleep(delay):
                break
        raise ReloadFailed(
            self.stage,
            f"no process named {self.spec.process!r} found in {self._proc} "
            f"(tried {len(self._delays) + 1} times); check --process against "
            "/proc/PID/comm of the app and that the pod sets shareProcessNamespace: true",
        )

    def reload(self) -> str:
        """Signal every matching process; ReloadFailed if none is found or one is refused."""
        found = self._find()
        sent, denied = [], []
        for info in found:
            try:
                os.kill(info.pid, self.spec.signum)
            except ProcessLookupError:
                continue  # exited between the scan and the signal
            except PermissionError:
                denied.append(info)
            else:
                sent.append(info.pid)
        if denied:
            first = denied[0]
            raise ReloadFailed(
                self.stage,
                f"{self.signame} to {self.spec.process} pid {first.pid} (uid {first.uid}) not "
                f"permitted (EPERM): the agent runs as uid {os.getuid()}; run it as the app's "
                "user or give it the KILL capability" + (f" (sent to pids {sent})" if sent else ""),
            )
        if not sent:
            raise ReloadFailed(self.stage, f"every {self.spec.process} process exited meanwhile")
        return f"sent {self.signame} to {self.spec.process} (pids {', '.join(map(str, sent))})"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer like any other: compared with --http-expect, not followed."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class HttpAction(Reloader):
    """Call the app's reload endpoint; retry failures that may pass (5xx, 429, no answer)."""

    stage = "http"

    def __init__(self, spec: HttpSpec, backoff: float, sleep: Sleep) -> None:
        self.spec = spec
        self._delays = backoff_delays(backoff, spec.retries)
        self._sleep = sleep
        # The app is local to the pod: never through a proxy from the environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        self.shown = f"{spec.method} {shown_url(spec.url)}"

    def _attempt(self) -> tuple[int | None, str]:
        body = b"" if self.spec.method in ("POST", "PUT", "PATCH") else None
        request = urllib.request.Request(  # noqa: S310 # check_url allows only http(s)
            self.spec.url,
            data=body,
            method=self.spec.method,
            headers={"User-Agent": USER_AGENT},
        )
        try:
            with self._opener.open(request, timeout=self.spec.timeout) as response:
                return int(response.status), f"answered {response.status}"
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code, f"answered {exc.code}"
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                return None, f"no answer within {self.spec.timeout:g}s"
            return None, str(getattr(reason, "strerror", None) or reason)
        except TimeoutError:
            return None, f"no answer within {self.spec.timeout:g}s"
        except (OSError, http.client.HTTPException) as exc:
            return None, str(exc) or type(exc).__name__

    def reload(self) -> str:
        """Call the endpoint until it answers ``expect``, a final error, or retries run out."""
        for attempt, delay in enumerate([*self._delays, None], start=1):
            status, what = self._attempt()
            if status == self.spec.expect:
                return f"{self.shown} {what}"
            retryable = status is None or status >= 500 or status == 429
            if not retryable:
                raise ReloadFailed(
                    self.stage,
                    f"{self.shown} {what}, want {self.spec.expect}; check --http-url and "
                    "--http-method",
                )
            if delay is None or self._sleep(delay):
                raise ReloadFailed(
                    self.stage, f"{self.shown} {what} (attempt {attempt}, giving up)"
                )
        raise AssertionError("unreachable")


def _tail(output: bytes) -> str:
    text = " | ".join(line for line in output.decode(errors="replace").splitlines() if line)
    return text if len(text) <= _OUTPUT_TAIL else "..." + text[-_OUTPUT_TAIL:]


class Validator:
    """Run the check command (no shell) in its own process group, killed whole at timeout.

    A failure says the exit code and how long the check ran; the end of its output only
    with ``--log-validate-output`` (validators quote the line they reject, and in a Secret
    that line may be the secret).
    """

    stage = "validate"

    def __init__(self, spec: ValidateSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.shown = " ".join(spec.argv)
        self._clock = clock

    def check(self) -> None:
        """Return if the command exits 0 in time; otherwise ReloadFailed."""
        started = self._clock()
        try:
            child = subprocess.Popen(  # nosec B603 # argv of --validate-command, no shell
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ReloadFailed(
                self.stage, f"{self.shown}: cannot run it ({exc.strerror or exc})"
            ) from None
        try:
            output, _ = child.communicate(timeout=self.spec.timeout)
        except subprocess.TimeoutExpired:
            exited = child.poll() is not None  # it exited, but a child of its holds the pipe
            _kill_group(child.pid)
            output = _drain(child)
            if not exited:
                raise ReloadFailed(
                    self.stage,
                    f"{self.shown}: no result within {self.spec.timeout:g}s; killed its "
                    "process group (raise --validate-timeout if it needs longer)",
                ) from None
        if child.returncode != 0:
            took = self._clock() - started
            said = f"; its output ends: {_tail(output)}" if self.spec.show_output else ""
            raise ReloadFailed(
                self.stage, f"{self.shown} exited with {child.returncode} after {took:.2f}s{said}"
            )


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(child: subprocess.Popen[bytes]) -> bytes:
    """What the killed command wrote; gives up on the pipe if an escaped child holds it."""
    try:
        output, _ = child.communicate(timeout=5)
        return output
    except subprocess.TimeoutExpired:
        if child.stdout is not None:
            child.stdout.close()
        child.wait()
        return b""
