"""The tools under test, behind one small interface; a peer (bench/peers/) is one subclass.

A tool runs as a subprocess against a kubeconfig. The scenarios only ask it to start, become
ready, stop, and to say how it marks workloads: which annotations opt one in, what on the
pod template shows a rollout, and which user agent its API writes carry (audit counting).
They also tell it of each change they make, which only the minimal client (bench/minimal.py)
listens to: the controllers learn of changes from their watches.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx2 as httpx

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.resources import NAMESPACES, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import (
    BASELINE_HASH,
    CONFIG_HASH,
    template_annotation,
)
from kube_nudge_dev import confighash
from kube_nudge_dev.cluster import free_port

DEPLOYMENT = BUILTIN_KINDS[0]
DEPLOYMENT_TEMPLATE = DEPLOYMENT.template_path
STOP_TIMEOUT = 15.0


class ToolError(RuntimeError):
    """The tool exited or never became ready."""


@dataclass(frozen=True, slots=True)
class ToolSettings:
    """Scenario knobs; a tool maps what it supports onto its own flags."""

    debounce: str | None = None  # None: the tool's default (peers have no debounce)
    max_rollouts: str | None = None
    extra_args: tuple[str, ...] = ()  # appended verbatim (a variant's flags, BENCH_TOOL_ARGS)
    #: Lift the tool's own write throttle (set-up phases only, e.g. adopting 1,000 workloads
    #: before the measured change); each tool maps it onto its documented flags.
    unthrottled: bool = False


class Tool(ABC):
    """One tool under test."""

    name: str
    #: User-agent prefix of the tool's API requests, to attribute audit-log writes.
    writer_agent: str
    #: What the tool marks when it rolls a workload, for the page ("pod-template annotation X").
    marker_text: str
    #: Whether it records something on a workload when it first sees it (False: Reloader).
    adopts: bool = True

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The running process id, if started."""

    @abstractmethod
    def start(self, kubeconfig: Path) -> None:
        """Launch the tool against ``kubeconfig`` (returns at once)."""

    @abstractmethod
    def stop(self) -> int | None:
        """Stop it (SIGTERM, then SIGKILL); return its exit code (blocking)."""

    @abstractmethod
    async def wait_ready(self, timeout: float) -> float:
        """Wait until it serves; return seconds since ``start``."""

    @abstractmethod
    async def prepare(self, kube: KubeClient) -> None:
        """One-time set-up in a fresh cluster (namespaces, RBAC, ...)."""

    @abstractmethod
    def opt_in(self) -> dict[str, str]:
        """Annotations that make a workload managed by this tool."""

    @abstractmethod
    def marker(self, workload: JSON) -> str | None:
        """What the tool writes on the pod template to roll it (None: not yet)."""

    @abstractmethod
    def adopted(self, workload: JSON) -> bool:
        """True once the tool has taken the workload into account."""

    async def expected_markers(self, kube: KubeClient, workloads: list[JSON]) -> list[str | None]:
        """The marker each workload should carry now (None: the tool cannot say)."""
        return [None for _ in workloads]

    def changed(self, namespace: str, names: Sequence[str], value: str) -> None:
        """The benchmark has just changed the source of these workloads to ``value``.
        Controllers learn it from their watches (nothing to do); the minimal client is told."""
        return None


class SubprocessTool(Tool):
    """Runs ``argv()`` as a child process, logging to a file."""

    #: Give the child a pipe on its stdin (``_process.stdin``) instead of ours.
    stdin_pipe = False

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.started_at = 0.0
        self.log_offset = 0  # where the running instance's output starts in the log

    @abstractmethod
    def argv(self, kubeconfig: Path) -> list[str]:
        """The command line."""

    def env(self, kubeconfig: Path) -> dict[str, str]:
        """The child's environment (default: ours)."""
        return dict(os.environ)

    def check_can_start(self) -> None:
        """Raise ToolError if the tool cannot start now (e.g. its fixed port is taken)."""

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self._process.pid if self._process is not None else None

    def start(self, kubeconfig: Path) -> None:
        """Spawn the child; its output goes to ``log_path``."""
        if self._process is not None:
            raise ToolError(f"{self.name} is already running")
        self.check_can_start()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
        self._log.flush()
        self.started_at = time.perf_counter()
        self.log_offset = self._log.tell()
        self._process = subprocess.Popen(
            self.argv(kubeconfig), env=self.env(kubeconfig), stdout=self._log,
            stderr=subprocess.STDOUT, stdin=subprocess.PIPE if self.stdin_pipe else None,
        )  # fmt: skip

    def stop(self) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; return the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        return process.returncode

    def exited(self) -> int | None:
        """The exit code if the child has died."""
        return self._process.poll() if self._process is not None else None

    def log_since_start(self) -> str:
        """What the running instance has logged so far."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self.log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class KubeNudge(SubprocessTool):
    """``kube-nudge run`` from this checkout's virtualenv."""

    name = "kube-nudge"
    writer_agent = "kube-nudge/"
    marker_text = f"pod-template annotation `{CONFIG_HASH}`"
    state_namespace = "kube-nudge"
    hmac_secret = "kube-nudge-hmac-key"  # noqa: S105 - a Secret name, not a secret

    def __init__(self, log_path: Path, settings: ToolSettings) -> None:
        super().__init__(log_path)
        self.settings = settings
        self.port = free_port()

    def argv(self, kubeconfig: Path) -> list[str]:
        """``kube-nudge run`` with the scenario's settings."""
        exe = Path(sys.executable).with_name("kube-nudge")
        argv = [
            str(exe), "run",
            "--kubeconfig", str(kubeconfig),
            "--metrics-addr", f"127.0.0.1:{self.port}",
            "--state-namespace", self.state_namespace,
        ]  # fmt: skip
        if self.settings.debounce is not None:
            argv += ["--debounce", self.settings.debounce]
        if self.settings.max_rollouts is not None:
            argv += ["--max-rollouts", self.settings.max_rollouts]
        return argv + list(self.settings.extra_args)

    async def wait_ready(self, timeout: float) -> float:
        """Poll ``/readyz`` every 20 ms until it answers 200."""
        url = f"http://127.0.0.1:{self.port}/readyz"
        async with httpx.AsyncClient(timeout=2.0) as http, asyncio.timeout(timeout):
            while True:
                if self.exited() is not None:
                    raise ToolError(f"{self.name} exited:\n{self.log_tail()}")
                try:
                    if (await http.get(url)).status_code == 200:
                        return time.perf_counter() - self.started_at
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.02)

    async def prepare(self, kube: KubeClient) -> None:
        """Create the state namespace (the HMAC key Secret goes there)."""
        await ensure_namespace(kube, self.state_namespace)

    def opt_in(self) -> dict[str, str]:
        """``kube-nudge.io/enabled: "true"``."""
        return {"kube-nudge.io/enabled": "true"}

    def marker(self, workload: JSON) -> str | None:
        """The template's ``kube-nudge.io/config-hash``."""
        return template_annotation(workload, DEPLOYMENT_TEMPLATE, CONFIG_HASH)

    def adopted(self, workload: JSON) -> bool:
        """A baseline hash on the metadata, or a config hash on the template."""
        annotations = (workload.get("metadata") or {}).get("annotations") or {}
        return BASELINE_HASH in annotations or self.marker(workload) is not None

    async def expected_markers(self, kube: KubeClient, workloads: list[JSON]) -> list[str | None]:
        """Recompute each workload's hash from the sources as they are in the API now, by
        the independent oracle (`kube_nudge_dev.confighash`), not the product's own rules."""
        secret = await kube.get(SECRETS.path(self.state_namespace, self.hmac_secret))
        key = base64.b64decode(secret["data"]["hmac-key"])
        cache: dict[confighash.Ref, JSON | None] = {}
        return [
            await confighash.expected_hash(kube, DEPLOYMENT.template_path, obj, key, cache=cache)
            for obj in workloads
        ]


async def ensure_namespace(kube: KubeClient, name: str) -> None:
    """Create namespace ``name`` unless it exists."""
    try:
        await kube.create(NAMESPACES.path(), {"metadata": {"name": name}})
    except ApiError as exc:
        if not exc.conflict:
            raise


class KubeNudgeSnapshot(KubeNudge):
    """The same, with its workloads on strategy ``snapshot`` (copies per change)."""

    def opt_in(self) -> dict[str, str]:
        """Opt in with ``kube-nudge.io/strategy: snapshot``."""
        return {**super().opt_in(), "kube-nudge.io/strategy": "snapshot"}
