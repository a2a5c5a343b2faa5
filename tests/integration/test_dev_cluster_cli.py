"""`kube-nudge-dev cluster` as a user runs it: ready line, clean stop, failures reported."""

from __future__ import annotations

import asyncio
import os
import signal
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube_nudge_dev.releases import selected

pytestmark = pytest.mark.cluster


def _processes_under(directory: Path) -> list[int]:
    """Pids of live processes whose command line mentions ``directory`` (all children do)."""
    needle = str(directory).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


async def _wait_path(path: Path, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not path.exists():
            await asyncio.sleep(0.05)


def _kube_nudge_dev() -> str:
    """The ``kube-nudge-dev`` console script of this interpreter's environment."""
    script = Path(sysconfig.get_path("scripts")) / "kube-nudge-dev"
    if not script.is_file():
        pytest.fail(f"{script} is missing: install devtools/ (`make install`)")
    return str(script)


@pytest.fixture
async def dev_cluster(tmp_path: Path) -> AsyncIterator[tuple[asyncio.subprocess.Process, Path]]:
    directory = tmp_path / "dev"
    # The release the session runs ($KUBE_NUDGE_KUBE_VERSION or the default), named by flag.
    proc = await asyncio.create_subprocess_exec(
        _kube_nudge_dev(), "cluster", "--dir", str(directory),
        f"--kube-version=1.{selected().minor}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    yield proc, directory
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_ready_line_then_sigterm_stops_everything(
    dev_cluster: tuple[asyncio.subprocess.Process, Path],
) -> None:
    proc, directory = dev_cluster
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
    assert line.startswith("dev-cluster ready in "), line
    assert f" s (Kubernetes {selected().version}): export KUBECONFIG=" in line, line
    assert (directory / "kubeconfig").is_file()
    assert len(_processes_under(directory)) >= 5  # etcd, apiserver, kcm, scheduler, kwok
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    assert _processes_under(directory) == []
    assert not (directory / "state").exists()


async def test_dead_apiserver_is_reported_and_nothing_is_left(
    dev_cluster: tuple[asyncio.subprocess.Process, Path],
) -> None:
    proc, directory = dev_cluster
    assert proc.stdout is not None and proc.stderr is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
    if not line.startswith("dev-cluster ready in "):
        await asyncio.wait_for(proc.wait(), 60)
        pytest.fail(f"no ready line: {line!r}; stderr: {(await proc.stderr.read()).decode()}")
    apiserver = [
        pid for pid in _processes_under(directory)
        if b"kube-apiserver" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    ]  # fmt: skip
    assert len(apiserver) == 1
    os.kill(apiserver[0], signal.SIGKILL)
    assert await asyncio.wait_for(proc.wait(), 60) == 1
    error = (await proc.stderr.read()).decode()
    assert "kube-apiserver exited unexpectedly" in error
    assert str(directory / "logs" / "kube-apiserver.log") in error
    assert _processes_under(directory) == []


async def test_sigint_during_startup_leaves_no_process_and_no_state(
    dev_cluster: tuple[asyncio.subprocess.Process, Path],
) -> None:
    proc, directory = dev_cluster
    await _wait_path(directory / "logs" / "kube-apiserver.log", 120)
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 60) == 0
    assert _processes_under(directory) == []
    assert not (directory / "state").exists()
