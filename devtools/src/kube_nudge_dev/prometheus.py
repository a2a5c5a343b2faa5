"""The pinned Prometheus server (``build.prometheus_binary``) as a local process, for the
integration tests (its alert rules, the analysis gate) and the benchmark: given a
configuration, it runs on a free loopback port with its data and log in one directory,
until the context ends."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kube_nudge_dev.build import prometheus_binary
from kube_nudge_dev.cluster import free_port

__all__ = ["READY_WITHIN", "PrometheusProcess", "PrometheusStartError", "prometheus_process"]

READY_WITHIN = 60.0
"""Seconds Prometheus may take to answer ``/-/ready``."""


class PrometheusStartError(RuntimeError):
    """Prometheus never became ready (its log says why)."""


@dataclass(frozen=True, slots=True)
class PrometheusProcess:
    """A running Prometheus: where it answers, where it logs, and its process (a fault test
    stops and continues it)."""

    port: int
    log: Path
    pid: int = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def prometheus_process(
    config: Mapping[str, Any], into: Path, *, ready_within: float = READY_WITHIN
) -> AsyncIterator[PrometheusProcess]:
    """Prometheus with ``config`` (its YAML configuration, as a mapping) written to
    ``into/prometheus.yaml``, its data in ``into/data`` and its log in
    ``into/prometheus.log``; yielded once ready, stopped on exit. ``$PROMETHEUS`` points at
    another binary than the pinned one."""
    binary = os.environ.get("PROMETHEUS") or str(prometheus_binary())
    config_file, log = _prepared(config, into)
    port = free_port()
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            binary, f"--config.file={config_file}", f"--storage.tsdb.path={into / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
            stdout=sink, stderr=sink,
        )  # fmt: skip
    running = PrometheusProcess(port, log, proc.pid)
    try:
        await _until_ready(running, proc, ready_within)
        yield running
    finally:
        if proc.returncode is None:
            proc.terminate()
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(proc.wait(), 30)


def _prepared(config: Mapping[str, Any], into: Path) -> tuple[Path, Path]:
    """``into`` made, ``config`` written there: (the configuration file, the log's path)."""
    into.mkdir(parents=True, exist_ok=True)
    config_file = into / "prometheus.yaml"
    config_file.write_text(yaml.safe_dump(dict(config)))
    return config_file, into / "prometheus.log"


async def _until_ready(
    running: PrometheusProcess, proc: asyncio.subprocess.Process, within: float
) -> None:
    """Ask ``/-/ready`` every 0.2 s; ``PrometheusStartError`` with its log after ``within``
    seconds, or as soon as it exits."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline and proc.returncode is None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(f"{running.url}/-/ready") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise PrometheusStartError(f"Prometheus not ready: {running.log.read_text()[-4000:]}")
