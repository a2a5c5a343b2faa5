"""Helpers of the agent's tests, unit and integration (a kubelet-style writer, an app process
that counts SIGHUPs, a recording HTTP server); tests/unit/test_agent_support.py checks that
they do what the real thing does."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

WAIT = 20.0  # seconds any condition may take on a busy machine before the test fails
KEY = b"test-key-0123456789abcdef"  # the agents' HMAC key in tests (16 bytes or more)


def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def kubelet_write(
    target: Path, payload: dict[str, bytes], after_swap: Callable[[], None] | None = None
) -> Path:
    """Update ``target`` the way the kubelet's AtomicWriter does; the new data directory.

    A new ``..<timestamp>`` directory with the payload, a ``..data_tmp`` symlink to it,
    renamed over ``..data`` (the one atomic step; ``after_swap`` runs right after it), then
    the user-visible symlinks into ``..data`` and the old directory removed.
    """
    target.mkdir(exist_ok=True)
    data = target / "..data"
    old = os.readlink(data) if data.is_symlink() else None
    stamp = datetime.now(UTC).strftime("..%Y_%m_%d_%H_%M_%S.") + str(secrets.randbelow(10**9))
    ts_dir = target / stamp
    ts_dir.mkdir(mode=0o755)
    for rel, content in payload.items():
        (ts_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (ts_dir / rel).write_bytes(content)
    os.symlink(stamp, target / "..data_tmp")
    os.rename(target / "..data_tmp", data)
    if after_swap is not None:
        after_swap()
    top = {rel.split("/", 1)[0] for rel in payload}
    for entry in target.iterdir():
        if not entry.name.startswith("..") and entry.name not in top:
            entry.unlink()
    for name in top:
        if not (target / name).is_symlink():
            os.symlink(f"..data/{name}", target / name)
    if old is not None:
        for path in sorted((target / old).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (target / old).rmdir()
    return ts_dir


CHILD = r"""
import signal, sys
out = sys.argv[1]
def note(name):
    with open(out, "a") as f:
        f.write(name + "\n")
signal.signal(signal.SIGHUP, lambda *_: note("HUP"))
signal.signal(signal.SIGUSR1, lambda *_: note("USR1"))
note("ready")
while True:
    signal.pause()
"""


@dataclass
class App:
    """A real process under a unique executable name that counts the SIGHUPs it handles."""

    name: str
    process: subprocess.Popen[bytes]
    notes: Path

    def lines(self) -> list[str]:
        return self.notes.read_text().split() if self.notes.exists() else []

    def hups(self) -> int:
        """SIGHUPs handled so far, once every signal sent before this call was handled.

        SIGUSR1 is sent as a marker: the child handles pending signals in number order, and
        SIGHUP (1) comes before SIGUSR1 (10), so the marker's line ends the count.
        """
        markers = self.lines().count("USR1")
        os.kill(self.process.pid, signal.SIGUSR1)
        wait_for(lambda: self.lines().count("USR1") > markers, "the child's marker line")
        return self.lines().count("HUP")


@pytest.fixture(name="app")
def app_fixture(tmp_path: Path) -> Iterator[App]:
    name = f"knhup{secrets.token_hex(4)}"  # 13 characters: /proc/PID/comm keeps 15
    exe = tmp_path / name
    exe.symlink_to(os.path.realpath(sys.executable))
    notes = tmp_path / f"{name}.notes"
    child = subprocess.Popen([str(exe), "-I", "-S", "-c", CHILD, str(notes)])
    try:
        wait_for(lambda: notes.exists() and "ready" in notes.read_text(), "the child to start")
        yield App(name, child, notes)
    finally:
        child.kill()
        child.wait()


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """What a local HTTP server received, and how it answers."""

    statuses: list[int] = field(default_factory=list)  # answers in turn; then 200
    body: bytes = b"{}"
    hang: threading.Event | None = None  # set: answer only when this is set
    on_request: Callable[[Hit], None] | None = None
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, method: str | None = None) -> int:
        with self.lock:
            return sum(1 for h in self.hits if method is None or h.method == method)


def serve(recorder: Recorder, wrap: Callable[[ThreadingHTTPServer], None] | None = None) -> str:
    """Start a local HTTP server answering as ``recorder`` says; its base URL.

    The caller shuts it down with ``stop(url)``.
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            hit = Hit(self.command, self.path, dict(self.headers.items()), self.rfile.read(length))
            with recorder.lock:
                recorder.hits.append(hit)
                status = recorder.statuses.pop(0) if recorder.statuses else 200
            if recorder.on_request is not None:
                recorder.on_request(hit)
            if recorder.hang is not None:
                recorder.hang.wait(WAIT)
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(recorder.body)))
            self.end_headers()
            self.wfile.write(recorder.body)

        do_GET = do_POST = do_PUT = do_PATCH = _any

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if wrap is not None:
        wrap(server)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    scheme = "https" if wrap is not None else "http"
    url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    _SERVERS[url] = (server, recorder)
    return url


_SERVERS: dict[str, tuple[ThreadingHTTPServer, Recorder]] = {}


def stop(url: str) -> None:
    server, recorder = _SERVERS.pop(url)
    if recorder.hang is not None:
        recorder.hang.set()
    server.shutdown()
    server.server_close()


@pytest.fixture(name="http")
def http_fixture() -> Iterator[Callable[..., tuple[str, Recorder]]]:
    started: list[str] = []

    def start(**answers: object) -> tuple[str, Recorder]:
        recorder = Recorder(**answers)  # type: ignore[arg-type]
        url = serve(recorder)
        started.append(url)
        return url, recorder

    yield start
    for url in started:
        stop(url)
