"""What one PATCH costs the client's process, per HTTP client library, measured side by side.

``python -m bench.httpcost`` (``make bench-http``) starts a local control plane, creates
``--workloads`` Deployments, then has each candidate send ``--requests`` JSON merge patches
(a metadata annotation: no rollout, the API server answers the whole Deployment, which each
candidate parses with orjson as kube-nudge does), ``--concurrency`` at a time over keep-alive
connections opened beforehand. The candidates take turns, in a rotated order each round, so
a busy machine slows them alike; the figure is this process's CPU time (user + system) per
request, median over the rounds. The API server runs in its own processes and is not counted.

Candidates whose library is not installed are skipped: only the one kube-nudge uses is a
dependency (``pip install`` the others to compare). ``raw asyncio`` is the floor: the minimal
client's hand-written HTTP/1.1 (bench/minimal.py), which parses nothing but the status line
and headers.

Each run writes bench/results/http.json (``--output``): every round's figures, their medians,
the command and the tree measured; the pages' figures of it are generated from it
(bench/docfigures.py). ``pip install`` the candidates that aren't dependencies before a run
that should compare them.

KubeClient adds its limiter, retry loop and error mapping to the transport's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib.metadata
import importlib.util
import json
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig

from bench.config import ROOT
from bench.gitstate import tree_state
from bench.minimal import Connection, Server
from bench.objects import bench_client, create_all, deployment
from kube_nudge.kube.client import MERGE_PATCH, ClientOptions
from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster

NAMESPACE = "default"
RESULTS = ROOT / "bench" / "results" / "http.json"
AGENT = "nudge-httpcost/1"
Patch = Callable[[str, bytes], Awaitable[int]]


@dataclass(slots=True)
class Candidate:
    """One HTTP client: how to open it (returns its patch function and its closer)."""

    name: str
    module: str  # the import that must be present
    open: Callable[[Path, int], Awaitable[tuple[Patch, Callable[[], Awaitable[None]]]]]
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)


def _tls(kubeconfig: Path) -> tuple[str, ssl.SSLContext]:
    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None and config.user is not None
    tls = client_adapter.verify_cluster(config.cluster, config.user, config.abs_file)
    return config.cluster.server, tls


def _check(status: int, content: bytes) -> int:
    if status >= 300:
        raise RuntimeError(f"PATCH answered {status}: {content[:200]!r}")
    orjson.loads(content)
    return status


async def open_kube_client(kubeconfig: Path, concurrency: int) -> Any:
    """kube-nudge's own ``KubeClient.request`` (limiter, retries, error mapping included),
    sending the merge patch as ``AdminClient.merge_patch`` does: the product's client and
    its aiohttp transport, with the dev tools' one verb on top."""
    options = ClientOptions(write_qps=100_000.0, write_burst=100_000)
    kube = AdminClient.from_config(kubeconfig, options=options, user_agent=AGENT)

    async def patch(path: str, body: bytes) -> int:
        await kube.merge_patch(path, orjson.loads(body))
        return 200

    return patch, kube.aclose


async def open_httpx2(kubeconfig: Path, concurrency: int) -> Any:
    """httpx2's AsyncClient as lightkube builds it (kube-nudge's HTTP client before aiohttp)."""
    import httpx2

    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None
    params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(30.0))
    http = client_adapter.AsyncClient(config, params)
    headers = {"Content-Type": MERGE_PATCH, "Accept": "application/json", "User-Agent": AGENT}

    async def patch(path: str, body: bytes) -> int:
        response = await http.request("PATCH", path, content=body, headers=headers)
        return _check(response.status_code, response.content)

    return patch, http.aclose


async def open_httpcore2(kubeconfig: Path, concurrency: int) -> Any:
    """httpcore2's connection pool directly, without httpx2's request/response models."""
    import httpcore2

    server, tls = _tls(kubeconfig)
    pool = httpcore2.AsyncConnectionPool(ssl_context=tls, max_connections=concurrency)
    headers = [(b"Content-Type", MERGE_PATCH.encode()), (b"Accept", b"application/json"),
               (b"User-Agent", AGENT.encode())]  # fmt: skip

    async def patch(path: str, body: bytes) -> int:
        response = await pool.request("PATCH", server + path, headers=headers, content=body)
        return _check(response.status, response.content)

    return patch, pool.aclose


async def open_aiohttp(kubeconfig: Path, concurrency: int) -> Any:
    """aiohttp's ClientSession (its C HTTP parser) with the kubeconfig's TLS context."""
    import aiohttp

    server, tls = _tls(kubeconfig)
    connector = aiohttp.TCPConnector(ssl=tls, limit=concurrency)
    session = aiohttp.ClientSession(server, connector=connector, headers={"User-Agent": AGENT})
    headers = {"Content-Type": MERGE_PATCH, "Accept": "application/json"}

    async def patch(path: str, body: bytes) -> int:
        async with session.request("PATCH", path, data=body, headers=headers) as response:
            return _check(response.status, await response.read())

    return patch, session.close


async def open_niquests(kubeconfig: Path, concurrency: int) -> Any:
    """niquests' AsyncSession (urllib3-future underneath)."""
    import niquests

    server, _ = _tls(kubeconfig)
    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None and config.user is not None
    files = _pem_files(config)
    session = niquests.AsyncSession(pool_connections=1, pool_maxsize=concurrency)
    headers = {"Content-Type": MERGE_PATCH, "Accept": "application/json", "User-Agent": AGENT}

    async def patch(path: str, body: bytes) -> int:
        response = await session.request(
            "PATCH", server + path, data=body, headers=headers, verify=files["ca"],
            cert=(files["cert"], files["key"]),
        )  # fmt: skip
        return _check(int(response.status_code or 0), response.content or b"")

    return patch, session.close


async def open_pyreqwest(kubeconfig: Path, concurrency: int) -> Any:
    """pyreqwest's async Client (Rust reqwest with rustls)."""
    from pyreqwest.client import ClientBuilder

    config = KubeConfig.from_file(kubeconfig).get()
    assert config is not None and config.user is not None
    files = _pem_files(config)
    pem = _read_all(files)
    identity = pem["cert"] + pem["key"]
    client = (
        ClientBuilder()
        .base_url(config.cluster.server)
        .add_root_certificate_pem(pem["ca"])
        .identity_pem(identity)
        .max_connections(concurrency)
        .http1_only()
        .default_headers({"User-Agent": AGENT, "Accept": "application/json"})
        .build()
    )

    async def patch(path: str, body: bytes) -> int:
        request = client.patch(path).header("Content-Type", MERGE_PATCH).body_bytes(body)
        response = await request.build().send()
        return _check(response.status, bytes(await response.bytes()))

    async def close() -> None:
        await client.close()

    return patch, close


async def open_raw(kubeconfig: Path, concurrency: int) -> Any:
    """The minimal client's HTTP/1.1 over asyncio streams, one connection per worker."""
    server = Server.from_kubeconfig(kubeconfig)
    free = [Connection(server) for _ in range(concurrency)]
    await asyncio.gather(*(connection.open() for connection in free))
    everyone = list(free)

    async def patch(path: str, body: bytes) -> int:
        connection = free.pop()
        try:
            status, _, content = await connection.patch(path, body)
        finally:
            free.append(connection)
        return _check(status, content)

    async def close() -> None:
        for connection in everyone:
            connection.close()

    return patch, close


def _pem_files(config: Any) -> dict[str, str]:
    """The kubeconfig's CA, client certificate and key as PEM files (for libraries that take
    paths or PEM bytes, not an ssl.SSLContext)."""
    directory = Path(tempfile.mkdtemp(prefix="httpcost-"))
    found: dict[str, str] = {}
    for name, data, path in (
        ("ca", config.cluster.certificate_auth_data, config.cluster.certificate_auth),
        ("cert", config.user.client_cert_data, config.user.client_cert),
        ("key", config.user.client_key_data, config.user.client_key),
    ):
        if data:
            target = directory / f"{name}.pem"
            target.write_bytes(base64.b64decode(data))
            found[name] = str(target)
        else:
            found[name] = str(path)
    return found


def _read_all(files: dict[str, str]) -> dict[str, bytes]:
    return {name: Path(path).read_bytes() for name, path in files.items()}


CANDIDATES = (
    Candidate("kube-nudge KubeClient", "kube_nudge", open_kube_client),
    Candidate("httpx2", "httpx2", open_httpx2),
    Candidate("httpcore2", "httpcore2", open_httpcore2),
    Candidate("aiohttp", "aiohttp", open_aiohttp),
    Candidate("niquests", "niquests", open_niquests),
    Candidate("pyreqwest", "pyreqwest", open_pyreqwest),
    Candidate("raw asyncio", "asyncio", open_raw),
)


async def measure(candidate: Candidate, kubeconfig: Path, names: list[str], args: Any) -> None:
    """One round: ``args.requests`` patches, ``args.concurrency`` in flight."""
    patch, close = await candidate.open(kubeconfig, args.concurrency)
    try:
        # Warm up: open the connections and fill the caches, uncounted.
        await asyncio.gather(*(patch(DEPLOYMENTS.path(NAMESPACE, n), b'{"metadata":{}}')
                               for n in names[: args.concurrency]))  # fmt: skip
        todo = iter(range(args.requests))
        stamp = str(time.time_ns())

        async def worker() -> None:
            for i in todo:
                name = names[i % len(names)]
                body = orjson.dumps(
                    {"metadata": {"annotations": {"bench/httpcost": f"{stamp}-{i}"}}}
                )
                await patch(DEPLOYMENTS.path(NAMESPACE, name), body)

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await close()
    candidate.cpu_ms.append(cpu * 1000 / args.requests)
    candidate.wall_ms.append(wall * 1000 / args.requests)


async def run(kubeconfig: Path, args: Any) -> list[Candidate]:
    """Create the Deployments, then every round of every available candidate."""
    chosen = [c for c in CANDIDATES if not args.only or c.name in args.only]
    available = [c for c in chosen if importlib.util.find_spec(c.module) is not None]
    for candidate in chosen:
        if candidate not in available:
            print(f"skipped {candidate.name}: {candidate.module} is not installed", flush=True)
    kube = bench_client(kubeconfig)
    names = [f"httpcost-{i}" for i in range(args.workloads)]
    items = ((DEPLOYMENTS.path(NAMESPACE), deployment(name, {}, [])) for name in names)
    await create_all(kube, items, len(names), "Deployments")
    await kube.aclose()
    for round_ in range(args.rounds):
        shift = round_ % len(available)
        for candidate in available[shift:] + available[:shift]:
            try:
                await measure(candidate, kubeconfig, names, args)
            except Exception as exc:
                print(f"dropped {candidate.name}: {type(exc).__name__}: {exc}", flush=True)
                available.remove(candidate)
                continue
            print(f"round {round_ + 1}: {candidate.name}: {candidate.cpu_ms[-1]:.3f} ms CPU, "
                  f"{candidate.wall_ms[-1]:.3f} ms wall per request", flush=True)  # fmt: skip
    return available


def _version(candidate: Candidate) -> str:
    """The measured library's version ("" for the standard library's asyncio)."""
    if candidate.module == "asyncio":
        return ""
    try:
        return importlib.metadata.version(candidate.module.split(".")[0].replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return ""


def results_document(
    results: list[Candidate], args: Any, tree: dict[str, Any], argv: list[str]
) -> dict[str, Any]:
    """What ``make bench-http`` keeps (bench/results/http.json): per candidate every round's
    CPU and wall time per request, and their medians; the command and the tree measured."""
    return {
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(["python -m bench.httpcost", *argv]),
        "tree": tree,
        "requests": args.requests,
        "rounds": args.rounds,
        "concurrency": args.concurrency,
        "candidates": {
            c.name: {
                "version": _version(c),
                "cpu_ms": [round(v, 4) for v in c.cpu_ms],
                "wall_ms": [round(v, 4) for v in c.wall_ms],
                "cpu_ms_median": round(statistics.median(c.cpu_ms), 4),
            }
            for c in results
        },
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.httpcost [--requests N] [--rounds R] [--concurrency C]``."""
    parser = argparse.ArgumentParser(prog="python -m bench.httpcost", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000, help="per candidate and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--only", action="append", help="a candidate's name (repeatable)")
    parser.add_argument("--output", type=Path, default=RESULTS,
                        help=f"the results file (default {RESULTS.relative_to(ROOT)})")  # fmt: skip
    args = parser.parse_args(argv)
    tree = tree_state(ROOT)
    with LocalCluster() as cluster:
        results = asyncio.run(run(cluster.kubeconfig, args))
    document = results_document(results, args, tree.record(), argv or sys.argv[1:])
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {args.output}")
    print(f"\n{args.requests} merge patches x {args.rounds} rounds, {args.concurrency} in flight; "
          "median (min-max) per request:")  # fmt: skip
    print(f"{'candidate':<24} {'CPU ms':>22} {'wall ms':>22}")
    for c in sorted(results, key=lambda c: statistics.median(c.cpu_ms)):
        cpu = f"{statistics.median(c.cpu_ms):.3f} ({min(c.cpu_ms):.3f}-{max(c.cpu_ms):.3f})"
        wall = f"{statistics.median(c.wall_ms):.3f} ({min(c.wall_ms):.3f}-{max(c.wall_ms):.3f})"
        print(f"{c.name:<24} {cpu:>22} {wall:>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
