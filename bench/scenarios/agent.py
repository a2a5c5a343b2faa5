"""The reload agent: ``..data`` swap to reload latency, and the agent's CPU and memory. No
cluster.

``kube-nudge agent`` runs as a user runs it (the ``kube-nudge`` console script, as the image's
entrypoint does), watching a temporary directory laid out by the kubelet's AtomicWriter and
reloading by ``POST`` to a local HTTP server of the benchmark's, which timestamps each request
on arrival. Per setting (``SETTINGS``: the agent's defaults, woken by inotify, and
``--watch-mode poll``, the fallback where there is no inotify) a fresh agent first idles for
``IDLE_SECONDS`` (its idle CPU), then takes ``agent_swaps`` swaps one at a time, each waited
for.

t0 is ``time.perf_counter()`` right after the rename of ``..data_tmp`` over ``..data`` (the
kubelet's one atomic step); t1 is the same clock, in the same process, when the reload request
arrives. Before each swap the benchmark waits a random fraction of the poll interval (seeded),
so swaps land at random points of the agent's poll cycle, as independent kubelet syncs do;
right after a reload they would always land just after a poll. The agent is scraped (``/metrics``)
after each reload, outside the timed span, as Prometheus would. RSS: VmRSS at ready and after
the swaps, VmHWM then (the peak over the agent's life). Reloads: requests the server received
(checked after a window of two polls plus the debounce past the last one), against the swaps.
The agent has no API server here, so it records nothing on a Pod (no worker thread).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

from bench.procfs import cpu_seconds, memory_kib
from bench.progress import say
from bench.scenarios import LocalContext, Metrics
from bench.stats import latency_summary
from bench.tools import STOP_TIMEOUT, ToolError
from kube_nudge.agent.config import add_flags, parse_duration
from kube_nudge_dev.cluster import free_port

DATA = "..data"
RELOAD_PATH = "/-/reload"
READY_TIMEOUT = 60.0
#: How long a reload may take beyond the setting's poll interval and debounce.
RELOAD_SLACK = 30.0
#: The defaults the page's rows name; ``check_defaults`` fails the run if the agent's differ.
DEFAULT_DEBOUNCE, DEFAULT_POLL, DEFAULT_MODE = 0.02, 1.0, "auto"
#: How long each agent idles after it is ready, for its idle CPU.
IDLE_SECONDS = 30.0
_METRIC = re.compile(r"^(kube_nudge_agent_[a-z_]+)(\{[^}]*\})? (\S+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Setting:
    """One way of running the agent: its flags, and the debounce and poll they mean."""

    name: str  # the prefix of its metrics
    flags: tuple[str, ...]
    debounce: float
    poll: float


SETTINGS = (
    Setting("default", (), DEFAULT_DEBOUNCE, DEFAULT_POLL),
    Setting("polling", ("--watch-mode", "poll"), DEFAULT_DEBOUNCE, DEFAULT_POLL),
)


def check_defaults() -> None:
    """Raise if the agent's default debounce, poll interval or watch mode are not what the
    page says."""
    parser = argparse.ArgumentParser()
    add_flags(parser)
    args = parser.parse_args(["--watch", "x"])
    found = (parse_duration("--debounce", args.debounce),
             parse_duration("--poll-interval", args.poll_interval), args.watch_mode)  # fmt: skip
    if found != (DEFAULT_DEBOUNCE, DEFAULT_POLL, DEFAULT_MODE):
        raise ToolError(
            f"the agent's defaults are now debounce {found[0]:g} s, poll {found[1]:g} s, watch "
            f"mode {found[2]}: update DEFAULT_* in bench/scenarios/agent.py and the rows' labels"
        )


def kubelet_write(target: Path, payload: dict[str, bytes]) -> float:
    """Update ``target`` as the kubelet's AtomicWriter does; the time of the swap.

    A new ``..<timestamp>.<random>`` directory with the payload, a ``..data_tmp`` symlink to
    it renamed over ``..data`` (the one atomic step; timed right after it), then the
    user-visible symlinks into ``..data`` and the old directory removed.
    """
    target.mkdir(exist_ok=True)
    data = target / DATA
    old = os.readlink(data) if data.is_symlink() else None
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime())
    new = Path(tempfile.mkdtemp(prefix=stamp, dir=target))
    new.chmod(0o755)
    for name, content in payload.items():
        (new / name).write_bytes(content)
        (new / name).chmod(0o644)
    os.symlink(new.name, target / "..data_tmp")
    os.rename(target / "..data_tmp", data)
    swapped = time.perf_counter()
    for entry in target.iterdir():
        if not entry.name.startswith("..") and entry.name not in payload:
            entry.unlink()
    for name in payload:
        if not (target / name).is_symlink():
            os.symlink(f"{DATA}/{name}", target / name)
    if old is not None:
        shutil.rmtree(target / old)
    return swapped


def payload(revision: int, blob: str) -> dict[str, bytes]:
    """A ConfigMap's three keys; ``revision`` changes two of them."""
    return {
        "app.conf": f"# revision {revision}\n{blob}\n".encode(),
        "LEVEL": str(revision).encode(),
        "features.json": b'{"beta": false, "cache": true}\n',
    }


class ReloadEndpoint:
    """The app's reload endpoint: a local HTTP server recording when each request arrives
    (any method or path counts: the agent calls nothing else)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self._changed = threading.Condition()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                at = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                endpoint._arrived(at)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _any

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{RELOAD_PATH}"

    def __enter__(self) -> ReloadEndpoint:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _arrived(self, at: float) -> None:
        with self._changed:
            self.arrivals.append(at)
            self._changed.notify_all()

    def count(self) -> int:
        """Requests so far."""
        with self._changed:
            return len(self.arrivals)

    def wait(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` requests arrived; False after ``timeout``."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.arrivals) >= count, timeout)


class AgentProcess:
    """``kube-nudge agent`` as a subprocess, logging to a file, metrics on a free port."""

    def __init__(self, log_path: Path, argv: list[str]) -> None:
        self.log_path = log_path
        self.port = free_port()
        self.argv = [*argv, "--listen", f"127.0.0.1:{self.port}"]
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.started_at = 0.0
        # The agent's endpoints are local: never through a proxy from the environment.
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    @property
    def pid(self) -> int:
        """The running agent's pid."""
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        """Spawn it with our environment minus what would make it record on a Pod."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
        self._log.write(f"{' '.join(self.argv)}\n".encode())
        self._log.flush()
        env = {k: v for k, v in os.environ.items()
               if k not in ("POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST")}  # fmt: skip
        self.started_at = time.perf_counter()
        self.process = subprocess.Popen(
            self.argv, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def scrape(self) -> dict[str, float]:
        """``/metrics``: each ``kube_nudge_agent_*`` family summed over its labels."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with self._http.open(url, timeout=5) as response:
            text = response.read().decode()
        found: dict[str, float] = {}
        for name, _, value in _METRIC.findall(text):
            found[name] = found.get(name, 0.0) + float(value)
        return found

    def wait_ready(self, timeout: float) -> float:
        """Poll ``/metrics`` every 20 ms until it shows the loaded hash (taken at start, just
        before the watch loop begins); seconds since ``start``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ToolError(f"the agent exited {self.process.returncode}; see {self.log_path}")
            with contextlib.suppress(OSError):
                if "kube_nudge_agent_loaded_info" in self.scrape():
                    return time.perf_counter() - self.started_at
            time.sleep(0.02)
        raise ToolError(f"the agent was not ready within {timeout:g} s; see {self.log_path}")

    def stop(self) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; the exit code."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if process is None else process.returncode


def run(ctx: LocalContext) -> Metrics:
    """Every setting in turn, each with a fresh agent and directory; flat metrics."""
    check_defaults()
    metrics: Metrics = {"swaps": 0, "reloads": 0, "agent_reloads": 0, "reload_failures": 0}
    ctx.series["settings"] = []
    peaks = []
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        for setting in SETTINGS:
            found, latencies = measure(ctx, setting, Path(tmp) / setting.name)
            for name in ("swaps", "reloads", "agent_reloads", "reload_failures"):
                metrics[name] += found.pop(name)
            peaks.append(found["peak_rss_mib"])
            if setting.name == "default":
                metrics.update(found)
            else:
                metrics.update({k: v for k, v in found.items() if k.startswith(setting.name)})
            ctx.series["settings"].append(
                {"name": setting.name, "flags": list(setting.flags), "latency_s": latencies}
            )
    metrics["peak_rss_any_mib"] = max(peaks)
    return metrics


def measure(ctx: LocalContext, setting: Setting, directory: Path) -> tuple[Metrics, list[float]]:
    """Start an agent on ``directory``, swap ``agent_swaps`` times, read its memory."""
    swaps = ctx.sizes.agent_swaps
    phase = random.Random(f"{ctx.label}-{setting.name}")  # noqa: S311 # timing jitter only
    blob = base64.b64encode(os.urandom(1536)).decode()
    kubelet_write(directory, payload(0, blob))
    name = setting.name
    with ReloadEndpoint() as endpoint:
        exe = Path(sys.executable).with_name("kube-nudge")
        argv = [str(exe), "agent", "--watch", str(directory), "--http-url", endpoint.url,
                *setting.flags]  # fmt: skip
        agent = AgentProcess(ctx.logs / f"{ctx.label}-{name}.log", argv)
        try:
            agent.start()
            ready = agent.wait_ready(READY_TIMEOUT)
            at_ready = memory_kib(agent.pid)
            flags = " ".join(setting.flags) or "defaults"
            say(f"  agent ({flags}) ready in {ready:.2f} s, RSS "
                f"{at_ready['VmRSS'] / 1024:.1f} MiB; idle for {IDLE_SECONDS:g} s")  # fmt: skip
            idle_from, idle_wall_from = cpu_seconds(agent.pid), time.monotonic()
            time.sleep(IDLE_SECONDS)
            idle_cpu = cpu_seconds(agent.pid) - idle_from
            idle_wall = time.monotonic() - idle_wall_from
            idle_rss = memory_kib(agent.pid)
            cpu_from, wall_from = cpu_seconds(agent.pid), time.monotonic()
            latencies: list[float] = []
            timeout = setting.poll + setting.debounce + RELOAD_SLACK
            for n in range(1, swaps + 1):
                time.sleep(phase.uniform(0.0, setting.poll))  # a random point of the poll cycle
                before = endpoint.count()
                swapped = kubelet_write(directory, payload(n, blob))
                if not endpoint.wait(before + 1, timeout):
                    raise ToolError(f"no reload within {timeout:g} s of swap {n}; see "
                                    f"{agent.log_path}")  # fmt: skip
                latencies.append(endpoint.arrivals[before] - swapped)
                agent.scrape()
                if n % max(swaps // 4, 1) == 0:
                    say(f"  {n}/{swaps} swaps, last {latencies[-1] * 1000:.1f} ms")
            # Not a wait for a result: the window in which a second reload of the last swap
            # would arrive (the agent polls twice more and its debounce passes).
            endpoint.wait(swaps + 1, 2 * setting.poll + setting.debounce + 0.5)
            steady = memory_kib(agent.pid)
            cpu = cpu_seconds(agent.pid) - cpu_from
            wall = time.monotonic() - wall_from
            counted = agent.scrape()
        finally:
            code = agent.stop()
        reloads = endpoint.count()
    if code != 0:
        raise ToolError(f"the agent exited {code} on SIGTERM, not 0; see {agent.log_path}")
    summary = latency_summary(latencies)
    idle_pct = round(100 * idle_cpu / idle_wall, 3) if idle_wall > 0 else math.nan
    say(f"  p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, max {summary['max_ms']} ms; "
        f"{reloads} reloads for {swaps} swaps; RSS {steady['VmRSS'] / 1024:.1f} MiB, peak "
        f"{steady['VmHWM'] / 1024:.1f} MiB; idle CPU {idle_pct}%")  # fmt: skip
    return {
        f"{name}_p50_ms": summary["p50_ms"],
        f"{name}_p99_ms": summary["p99_ms"],
        f"{name}_max_ms": summary["max_ms"],
        f"{name}_cpu_pct": round(100 * cpu / wall, 2) if wall > 0 else math.nan,
        f"{name}_idle_cpu_pct": idle_pct,
        f"{name}_idle_cpu_s": round(idle_cpu, 3),
        "idle_rss_mib": round(idle_rss["VmRSS"] / 1024, 1),
        "ready_s": round(ready, 3),
        "start_rss_mib": round(at_ready["VmRSS"] / 1024, 1),
        "rss_mib": round(steady["VmRSS"] / 1024, 1),
        "peak_rss_mib": round(steady["VmHWM"] / 1024, 1),
        "swaps": swaps,
        "reloads": reloads,
        "agent_reloads": counted.get("kube_nudge_agent_reloads_total", math.nan),
        "reload_failures": counted.get("kube_nudge_agent_reload_failures_total", math.nan),
    }, latencies
