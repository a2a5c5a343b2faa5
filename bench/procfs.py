"""Process memory and machine facts from /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
from pathlib import Path

from bench.gitstate import tree_state


def memory_kib(pid: int) -> dict[str, int]:
    """The Vm* fields of ``/proc/PID/status`` (VmRSS, VmHWM, ...) in KiB."""
    fields: dict[str, int] = {}
    with Path(f"/proc/{pid}/status").open() as status:
        for line in status:
            name, _, value = line.partition(":")
            parts = value.split()
            if name.startswith("Vm") and len(parts) == 2 and parts[1] == "kB":
                fields[name] = int(parts[0])
    return fields


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    with Path("/proc/stat").open() as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    tick = os.sysconf("SC_CLK_TCK")
    return (total - idle) / tick, total / tick


class CpuMeter:
    """CPU used by one process, and by the whole machine, between start and ``read``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._process = cpu_seconds(pid)
        self._busy, self._total = machine_busy()

    def read(self) -> tuple[float, float]:
        """(process CPU seconds, machine busy fraction 0-1) since construction."""
        busy, total = machine_busy()
        fraction = (busy - self._busy) / (total - self._total) if total > self._total else 0.0
        return cpu_seconds(self.pid) - self._process, fraction


async def quiet(
    pid: int, *, timeout: float = 120.0, tool_cpu: float = 0.05, machine_cpu: float = 0.3
) -> tuple[float, float]:
    """Wait until, over one second, the process used under ``tool_cpu`` CPU s and the machine
    was busy under ``machine_cpu`` (so background work, e.g. Events still being posted, does
    not overlap the next measurement). Returns (seconds waited, last busy fraction)."""
    started = time.monotonic()
    busy = 1.0
    while time.monotonic() - started < timeout:
        meter = CpuMeter(pid)
        await asyncio.sleep(1.0)
        used, busy = meter.read()
        if used < tool_cpu and busy < machine_cpu:
            break
    return time.monotonic() - started, busy


def _first(path: str, prefix: str) -> str:
    try:
        with Path(path).open() as lines:
            for line in lines:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def git_commit(root: Path) -> str:
    """Short HEAD commit, with ``+dirty`` when the tree differs from it (bench/gitstate.py)."""
    state = tree_state(root)
    return state.commit + ("+dirty" if state.dirty else "")


def machine(root: Path) -> dict[str, object]:
    """CPUs, memory, CPU model and software versions of this run."""
    from kube_nudge import __version__
    from kube_nudge_dev.build import ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION

    mem_kib = int(_first("/proc/meminfo", "MemTotal").split()[0] or 0)
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu_model": _first("/proc/cpuinfo", "model name"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "kube_nudge": __version__,
        "git_commit": git_commit(root),
        "kubernetes": KUBERNETES_VERSION,
        "etcd": ETCD_VERSION,
        "kwok": KWOK_VERSION,
    }


class RssSampler:
    """Samples a process's VmRSS every ``interval`` seconds in the background.

    ``samples`` holds (seconds since ``origin``, MiB); ``async with`` runs it."""

    def __init__(self, pid: int, origin: float, interval: float = 0.1) -> None:
        self.pid = pid
        self.origin = origin  # a time.perf_counter() value, e.g. when the process started
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> RssSampler:
        self._task = asyncio.create_task(self._run(), name=f"rss {self.pid}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            try:
                rss = memory_kib(self.pid).get("VmRSS", 0)
            except OSError:
                return  # the process is gone
            self.samples.append((round(time.perf_counter() - self.origin, 3), round(rss / 1024, 1)))
            await asyncio.sleep(self.interval)
