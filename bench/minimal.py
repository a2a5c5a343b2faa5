"""The minimal client: what the control plane allows for a fan-out or burst, beside the tools.

Not a controller: it watches nothing and computes nothing. The scenario tells it, on its
stdin, each workload whose source has just changed (``NAMESPACE NAME VALUE`` lines, written
the moment the ConfigMap PATCH has been answered, so it never rolls a workload before its
source changed), and it sends the one write a perfect controller would send: a JSON merge
patch setting the pod-template annotation ``bench.kube-nudge.io/minimal-client`` to the
new value, ``CONCURRENCY`` at a time, each on its own connection opened before the change.

It runs as a subprocess (``python -m bench.minimal``) like every tool: it competes for the
same CPUs, its CPU time is measured the same way, and its work does not share the event
loop of the benchmark's watch that timestamps the rollouts. lightkube reads the kubeconfig
and builds the TLS context, as in kube-nudge's client; the HTTP/1.1 on top is written out
here because httpx costs ~1.2 ms of CPU per PATCH and this ~0.3 ms (QUICK runs), CPU the
API server shares on a small machine. Nothing is parsed but the status line and headers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import orjson
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

from bench.config import ROOT
from bench.tools import DEPLOYMENT_TEMPLATE, SubprocessTool, ToolError, ToolSettings
from kube_nudge.kube.client import JSON, MERGE_PATCH, KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge.model import template_annotation

KIND = "minimal"  # its ``Entry.kind``: neither kube-nudge nor a peer
MARKER = "bench.kube-nudge.io/minimal-client"
AGENT = "nudge-minimal/1"  # never a prefix of the benchmark's own agent (nudge-bench/1)
#: PATCHes (and connections) in flight. QUICK runs (50 workloads, 3 repetitions, medians of
#: all rolled, fan-out / burst) on the 2-CPU machine: 8: 0.22 / 0.42 s, 16: 0.22 / 0.40 s,
#: 24: 0.17 / 0.33 s, 32: 0.13 / 0.31 s, 48: 0.23 / 0.30 s, 64: 0.26 / 0.31 s. Past 32 the
#: API server only queues them.
CONCURRENCY = 32
NOTE = "no watch: told of each change, it sends one merge patch per workload"
READY = "minimal client ready"
RETRIES = 5


class MinimalClient(SubprocessTool):
    """``python -m bench.minimal``, fed the changed workloads on its stdin."""

    name = "minimal client"
    writer_agent = AGENT
    marker_text = f"pod-template annotation `{MARKER}`"
    adopts = False
    stdin_pipe = True

    def __init__(self, log_path: Path, settings: ToolSettings) -> None:
        super().__init__(log_path)
        self.settings = settings

    def argv(self, kubeconfig: Path) -> list[str]:
        """This module as a script; ``extra_args`` carry ``--concurrency``."""
        return [sys.executable, "-m", "bench.minimal", "--kubeconfig", str(kubeconfig),
                *self.settings.extra_args]  # fmt: skip

    def env(self, kubeconfig: Path) -> dict[str, str]:
        """Ours, with the checkout importable (``bench`` is not installed)."""
        path = os.environ.get("PYTHONPATH", "")
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), path) if p)}

    async def wait_ready(self, timeout: float) -> float:
        """Until it logged that its connections are open."""
        async with asyncio.timeout(timeout):
            while READY not in self.log_since_start():
                if self.exited() is not None:
                    raise ToolError(f"{self.name} exited:\n{self.log_tail()}")
                await asyncio.sleep(0.02)
        return time.perf_counter() - self.started_at

    async def prepare(self, kube: KubeClient) -> None:
        """Nothing to set up."""

    def opt_in(self) -> dict[str, str]:
        """None: it knows the workloads from the scenario."""
        return {}

    def marker(self, workload: JSON) -> str | None:
        """The template's ``bench.kube-nudge.io/minimal-client``."""
        return template_annotation(workload, DEPLOYMENT_TEMPLATE, MARKER)

    def adopted(self, workload: JSON) -> bool:
        """Always: it records nothing before a change."""
        return True

    def changed(self, namespace: str, names: Sequence[str], value: str) -> None:
        """One line per workload on its stdin, at once (it starts sending on the first)."""
        process = self._process
        if process is None or process.stdin is None:
            raise ToolError(f"{self.name} is not running")
        process.stdin.write("".join(f"{namespace} {name} {value}\n" for name in names).encode())
        process.stdin.flush()


# -- the subprocess ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    """Where and how to connect: the kubeconfig's API server, TLS context and credentials."""

    host: str
    port: int
    tls: ssl.SSLContext
    headers: str  # Host, User-Agent and (for a token) Authorization lines

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Server:
        """Read the current context through lightkube, as kube-nudge's client does."""
        config = KubeConfig.from_file(path).get()
        if config is None or config.user is None:
            raise SystemExit(f"{path}: no current context with a user")
        url = urlsplit(config.cluster.server)
        tls = client_adapter.verify_cluster(config.cluster, config.user, config.abs_file)
        token = f"Authorization: Bearer {config.user.token}\r\n" if config.user.token else ""
        headers = f"Host: {url.netloc}\r\nUser-Agent: {AGENT}\r\n{token}"
        return cls(url.hostname or "localhost", url.port or 443, tls, headers)


class Connection:
    """One keep-alive HTTP/1.1 connection to the API server, one request at a time."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def open(self) -> None:
        """Connect, TLS handshake included."""
        self._streams = await asyncio.open_connection(
            self.server.host, self.server.port, ssl=self.server.tls
        )

    def close(self) -> None:
        """Drop the connection (the next request opens a new one)."""
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None

    async def patch(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        """A merge patch: (status, Retry-After, body). Once more on a new connection if the
        server had closed this one (a merge patch can be repeated)."""
        request = (
            f"PATCH {path} HTTP/1.1\r\n{self.server.headers}Content-Type: {MERGE_PATCH}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for attempt in (1, 2):
            try:
                if self._streams is None:
                    await self.open()
                return await self._exchange(request)
            except (OSError, asyncio.IncompleteReadError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _exchange(self, request: bytes) -> tuple[int, bytes, bytes]:
        assert self._streams is not None
        reader, writer = self._streams
        writer.write(request)
        await writer.drain()
        status = (await reader.readline()).split()
        if len(status) < 2:
            raise ConnectionResetError("the server closed the connection")
        headers: dict[bytes, bytes] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get(b"transfer-encoding") == b"chunked":
            chunks = []
            while size := int((await reader.readline()).split(b";")[0], 16):
                chunks.append((await reader.readexactly(size + 2))[:-2])
            await reader.readline()  # the empty trailer
            content = b"".join(chunks)
        else:
            content = await reader.readexactly(int(headers.get(b"content-length", b"0")))
        if headers.get(b"connection") == b"close":
            self.close()
        return int(status[1]), headers.get(b"retry-after", b""), content


async def _send(connection: Connection, path: str, body: bytes) -> None:
    """One PATCH, again on 429/5xx (after Retry-After or a short pause); say if it failed."""
    for attempt in range(RETRIES + 1):
        status, retry_after, content = await connection.patch(path, body)
        if status < 300:
            return
        if status != 429 and status < 500:
            break
        await asyncio.sleep(float(retry_after or 0.05 * 2**attempt))
    print(f"PATCH {path} failed: {status} {content[:200]!r}", flush=True)


async def serve(kubeconfig: Path, concurrency: int) -> None:
    """Open ``concurrency`` connections, say ready, then patch what stdin names until EOF."""
    server = Server.from_kubeconfig(kubeconfig)
    connections = [Connection(server) for _ in range(concurrency)]
    await asyncio.gather(*(connection.open() for connection in connections))
    queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()

    async def worker(connection: Connection) -> None:
        while True:
            path, body = await queue.get()
            try:
                await _send(connection, path, body)
            except (OSError, asyncio.IncompleteReadError) as exc:
                print(f"PATCH {path} failed: {type(exc).__name__}: {exc}", flush=True)
            queue.task_done()

    workers = [asyncio.create_task(worker(connection)) for connection in connections]
    stdin = asyncio.StreamReader(limit=1 << 20)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    print(READY, flush=True)
    while line := await stdin.readline():
        namespace, name, value = line.decode().split()
        patch: JSON = {"spec": {"template": {"metadata": {"annotations": {MARKER: value}}}}}
        queue.put_nowait((DEPLOYMENTS.path(namespace, name), orjson.dumps(patch)))
    await queue.join()
    for task in workers:
        task.cancel()


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.minimal --kubeconfig PATH [--concurrency N]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.minimal", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.kubeconfig, args.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
