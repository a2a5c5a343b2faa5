"""Benchmark sizes and knobs, read from the environment."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each scenario is, and how often it is repeated."""

    latency_changes: int = 200
    debounce_changes: int = 20
    fanout_workloads: int = 1000
    memory_secrets: int = 10_000
    memory_workloads: int = 1000
    memory_namespaces: int = 20
    secret_bytes: int = 10 * 1024
    restarts: int = 3
    restart_pause: float = 5.0
    steady_after: float = 10.0
    repeat: int = 3
    memory_repeat: int = 3


QUICK = Sizes(
    latency_changes=20,
    debounce_changes=3,
    fanout_workloads=50,
    memory_secrets=500,
    memory_workloads=50,
    memory_namespaces=5,
    restarts=2,
    restart_pause=2.0,
    steady_after=3.0,
    repeat=1,
    memory_repeat=1,
)


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Everything a run was asked for."""

    quick: bool
    sizes: Sizes
    tools: tuple[str, ...]
    scenarios: tuple[str, ...]
    tool_args: tuple[str, ...] = ()
    output: str = ""  # results name; "" = latest (full) or quick


SCENARIOS = ("latency", "latency-debounce", "fanout", "memory")


def _int_env(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    value = int(text)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _list_env(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    text = os.environ.get(name, "").strip()
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else default


def from_env() -> BenchConfig:
    """BENCH_QUICK=1, BENCH_REPEAT=N, BENCH_MEMORY_REPEAT=N, BENCH_TOOLS, BENCH_SCENARIOS,
    BENCH_TOOL_ARGS (extra flags for the tool, e.g. ``--write-qps 1000``), BENCH_OUTPUT."""
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    sizes = QUICK if quick else Sizes()
    repeat = _int_env("BENCH_REPEAT")
    if repeat is not None:
        sizes = replace(sizes, repeat=repeat, memory_repeat=repeat)
    memory_repeat = _int_env("BENCH_MEMORY_REPEAT")
    if memory_repeat is not None:
        sizes = replace(sizes, memory_repeat=memory_repeat)
    scenarios = _list_env("BENCH_SCENARIOS", SCENARIOS)
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise ValueError(f"BENCH_SCENARIOS: unknown {sorted(unknown)}; known: {SCENARIOS}")
    tools = _list_env("BENCH_TOOLS", ("kube-nudge",))
    tool_args = tuple(shlex.split(os.environ.get("BENCH_TOOL_ARGS", "")))
    output = os.environ.get("BENCH_OUTPUT", "").strip()
    if output and not output.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"BENCH_OUTPUT must be a plain name, got {output!r}")
    return BenchConfig(quick, sizes, tools, scenarios, tool_args, output)
