"""Benchmark sizes and knobs, read from the environment."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from bench.peers.given import PeerBinary, parse_peers
from bench.profile import py_spy

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each scenario is, and how often it is repeated."""

    latency_changes: int = 200
    debounce_changes: int = 20
    fanout_workloads: int = 1000
    burst_workloads: int = 1000
    memory_secrets: int = 10_000
    memory_configmaps: int = 5_000
    memory_workloads: int = 1000
    memory_namespaces: int = 200
    secret_bytes: int = 10 * 1024
    configmap_bytes: int = 2 * 1024
    api_workloads: int = 1000
    api_changes: int = 20
    restarts: int = 3
    restart_pause: float = 5.0
    flap_interval: float = 0.2
    flap_seconds: float = 60.0
    steady_after: float = 10.0
    #: How long a fan-out or burst may take; a tool still rolling then is projected.
    roll_timeout: float = 300.0
    #: ``..data`` swaps per reload-agent setting (BENCH_AGENT_SWAPS).
    agent_swaps: int = 50
    #: Pods (each app + agent, its own ConfigMap) on the real node (BENCH_NODE_PODS), and the
    #: rounds of changes with the nudge (each pod's ConfigMap changed once per round).
    node_pods: int = 24
    node_rounds: int = 2
    #: Commands of each writer (kubectl apply, helm upgrade) in the writers scenario.
    writer_commands: int = 10
    #: The ``scale`` scenario (not in the default list): Secrets, opted-in Deployments and
    #: namespaces (BENCH_SCALE_SECRETS, BENCH_SCALE_WORKLOADS, BENCH_SCALE_NAMESPACES).
    scale_secrets: int = 100_000
    scale_workloads: int = 10_000
    scale_namespaces: int = 1_000
    scale_secret_bytes: int = 256
    #: Deployments gated in one wave by one analysis template (the ``analysis`` scenario).
    analysis_workloads: int = 1000
    repeat: int = 3
    memory_repeat: int = 3


QUICK = Sizes(
    latency_changes=20,
    writer_commands=3,
    debounce_changes=3,
    fanout_workloads=50,
    burst_workloads=50,
    memory_secrets=500,
    memory_configmaps=250,
    memory_workloads=50,
    memory_namespaces=10,
    api_workloads=20,
    api_changes=5,
    restarts=2,
    restart_pause=2.0,
    flap_seconds=10.0,
    steady_after=3.0,
    roll_timeout=60.0,
    agent_swaps=10,
    node_pods=4,
    node_rounds=1,
    scale_secrets=2_000,
    scale_workloads=200,
    scale_namespaces=20,
    analysis_workloads=50,
    repeat=1,
    memory_repeat=1,
)


@dataclass(frozen=True, slots=True)
class Output:
    """Where a run's results go: the JSON, the page, and the plots beside it."""

    data: Path
    page: Path
    plots: Path  # directory
    prefix: str  # plot file names start with it
    logs: Path


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Everything a run was asked for."""

    quick: bool
    sizes: Sizes
    peers: tuple[PeerBinary, ...]
    scenarios: tuple[str, ...]
    tool_args: tuple[str, ...] = ()
    output: str = ""  # BENCH_OUTPUT; "" = latest (full) or quick
    allow_dirty: bool = False  # BENCH_ALLOW_DIRTY=1: measure a tree that differs from HEAD
    profile: bool = False  # BENCH_PROFILE=1: py-spy shares of the fan-out's CPU (bench/profile.py)

    def out(self) -> Output:
        """The files this run writes (see ``outputs``)."""
        return outputs(self.output or ("quick" if self.quick else "latest"))


SCENARIOS = (
    "latency", "latency-debounce", "writers", "fanout", "burst", "memory", "api-cost", "flapping",
    "agent", "agent-node", "analysis",
)  # fmt: skip
#: Scenarios run only when named in BENCH_SCENARIOS (``scale`` takes well over 10 minutes).
EXTRA_SCENARIOS = ("scale",)
KNOWN_SCENARIOS = SCENARIOS + EXTRA_SCENARIOS


def outputs(name: str) -> Output:
    """``latest``: bench/results/latest.json, BENCHMARKS.md, bench/results/latest-*.png.
    A plain name: bench/results/NAME.json, NAME.md, NAME-*.png. A path (with a ``/``):
    a directory holding results.json, BENCHMARKS.md, *.png and logs/."""
    if "/" in name:
        directory = Path(name).expanduser().resolve()
        return Output(
            directory / "results.json", directory / "BENCHMARKS.md", directory, "",
            directory / "logs",
        )  # fmt: skip
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"BENCH_OUTPUT must be a plain name or a directory path, got {name!r}")
    page = ROOT / "BENCHMARKS.md" if name == "latest" else RESULTS / f"{name}.md"
    return Output(RESULTS / f"{name}.json", page, RESULTS, f"{name}-", RESULTS / "logs")


def _int_env(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _list_env(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    text = os.environ.get(name, "").strip()
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else default


#: What in BENCH_NOTE would tell how a peer was built: a path, Go build flags.
_BUILD_DETAILS = re.compile(r"(?:^|[\s=(])/[\w.-]+/|\bgo (?:build|install)\b|-ldflags|GOFLAGS|"
                            r"CGO_ENABLED|-trimpath")  # fmt: skip


def note_env() -> str:
    """BENCH_NOTE, refused (ValueError) if it names a path or build flags: the note is kept
    in the results and the page, which record nothing of how a peer was built."""
    note = os.environ.get("BENCH_NOTE", "").strip()
    found = _BUILD_DETAILS.search(note)
    if found:
        raise ValueError(f"BENCH_NOTE must not say how a peer was built (found {found[0]!r})")
    return note


def _scale_env(sizes: Sizes) -> Sizes:
    """BENCH_SCALE_SECRETS, BENCH_SCALE_WORKLOADS, BENCH_SCALE_NAMESPACES over ``sizes``."""
    for field_name in ("scale_secrets", "scale_workloads", "scale_namespaces"):
        value = _int_env(f"BENCH_{field_name.upper()}")
        if value is not None:
            sizes = replace(sizes, **{field_name: value})
    if sizes.scale_namespaces > min(sizes.scale_secrets, sizes.scale_workloads):
        raise ValueError("BENCH_SCALE_NAMESPACES must not exceed the Secrets or the workloads")
    return sizes


def from_env(known_peers: tuple[str, ...]) -> BenchConfig:
    """BENCH_QUICK=1, BENCH_REPEAT=N, BENCH_MEMORY_REPEAT=N, BENCH_SCENARIOS, BENCH_PEERS,
    BENCH_ROLL_TIMEOUT (seconds), BENCH_AGENT_SWAPS, BENCH_NODE_PODS, BENCH_SCALE_*,
    BENCH_TOOL_ARGS (extra kube-nudge flags), BENCH_OUTPUT, BENCH_ALLOW_DIRTY=1 (run on a tree
    that differs from its commit; the results say so), BENCH_PROFILE=1 (bench/profile.py).
    Raises ValueError with one line naming what is wrong."""
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    sizes = QUICK if quick else Sizes()
    repeat = _int_env("BENCH_REPEAT")
    if repeat is not None:
        sizes = replace(sizes, repeat=repeat, memory_repeat=repeat)
    memory_repeat = _int_env("BENCH_MEMORY_REPEAT")
    if memory_repeat is not None:
        sizes = replace(sizes, memory_repeat=memory_repeat)
    roll_timeout = _int_env("BENCH_ROLL_TIMEOUT")
    if roll_timeout is not None:
        sizes = replace(sizes, roll_timeout=float(roll_timeout))
    agent_swaps = _int_env("BENCH_AGENT_SWAPS")
    if agent_swaps is not None:
        sizes = replace(sizes, agent_swaps=agent_swaps)
    node_pods = _int_env("BENCH_NODE_PODS")
    if node_pods is not None:
        sizes = replace(sizes, node_pods=node_pods)
    sizes = _scale_env(sizes)
    scenarios = _list_env("BENCH_SCENARIOS", SCENARIOS)
    unknown = sorted(set(scenarios) - set(KNOWN_SCENARIOS))
    if unknown:
        raise ValueError(f"BENCH_SCENARIOS: unknown {unknown}; known: {', '.join(KNOWN_SCENARIOS)}")
    peers = parse_peers(os.environ.get("BENCH_PEERS", ""), known_peers)
    tool_args = tuple(shlex.split(os.environ.get("BENCH_TOOL_ARGS", "")))
    note_env()  # refused now, not after an hour of running
    output = os.environ.get("BENCH_OUTPUT", "").strip()
    if output:
        outputs(output)  # validate now, not after an hour of running
    allow_dirty = os.environ.get("BENCH_ALLOW_DIRTY", "") not in ("", "0")
    profile = os.environ.get("BENCH_PROFILE", "") not in ("", "0")
    if profile and py_spy() is None:
        raise ValueError("BENCH_PROFILE=1 needs py-spy: `make install` puts it in .venv")
    return BenchConfig(quick, sizes, peers, scenarios, tool_args, output, allow_dirty, profile)
