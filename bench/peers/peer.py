"""What every peer shares: a given binary, run out-of-cluster against the kubeconfig."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench.peers.given import PeerBinary
from bench.tools import SubprocessTool, ToolError, ToolSettings
from kube_nudge.kube.client import KubeClient


def port_taken(port: int) -> bool:
    """True if something listens on ``port`` (any address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))  # noqa: S104 - probing the peer's wildcard bind
        except OSError:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Variant:
    """A second column for a peer: its documented knob raised where its default dominates."""

    label: str
    args: tuple[str, ...]
    scenarios: frozenset[str]
    note: str


class PeerTool(SubprocessTool):
    """A peer controller binary given in ``BENCH_PEERS``."""

    #: Extra columns with flags raised (none unless a default throttle dominates a result).
    variants: ClassVar[tuple[Variant, ...]] = ()

    #: The HTTP port the peer always binds on every address (neither peer has a flag for it),
    #: so only one instance runs at a time.
    fixed_port: int

    def __init__(self, log_path: Path, settings: ToolSettings, binary: PeerBinary) -> None:
        super().__init__(log_path)
        self.settings = settings
        self.binary = binary
        # client-go's default user agent: the executable's name, then "/<version> (...)".
        self.writer_agent = f"{binary.path.name}/"

    async def prepare(self, kube: KubeClient) -> None:
        """Nothing to set up: the peers need no namespace of their own out of cluster."""

    def check_can_start(self) -> None:
        """Fail clearly if the fixed port is taken (another instance, or anything else)."""
        if port_taken(self.fixed_port):
            raise ToolError(
                f"{self.name} cannot start: port {self.fixed_port}, which it always binds, "
                "is in use"
            )

    async def poll(self, ready: Callable[[], Awaitable[bool]], timeout: float) -> float:
        """Call ``ready`` every 50 ms until it holds; return seconds since start."""
        async with asyncio.timeout(timeout):
            while True:
                if self.exited() is not None:
                    raise ToolError(f"{self.name} exited:\n{self.log_tail()}")
                if await ready():
                    return time.perf_counter() - self.started_at
                await asyncio.sleep(0.05)
