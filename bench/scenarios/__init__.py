"""Benchmark scenarios: each runs once in a fresh cluster and returns flat metrics.

Raw samples a plot needs (latencies, rollout times, RSS over time) go to ``Context.series``.
A ``LocalScenario`` (the reload agent's) needs no cluster: it gets a ``LocalContext``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.audit import AuditLog
from bench.config import Sizes
from bench.profile import Sampler
from bench.tools import Tool, ToolSettings, ensure_namespace
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster

Metrics = dict[str, float]
NAMESPACE = "bench"


@dataclass
class Context:
    """What a scenario gets: a fresh cluster, an admin client, and a way to make the tool."""

    cluster: LocalCluster
    kube: AdminClient
    sizes: Sizes
    make_tool: Callable[[ToolSettings], Tool]
    profile: bool = False
    """BENCH_PROFILE=1: scenarios that measure a tool's CPU also sample it (``sampler``)."""
    audit: AuditLog = field(init=False)
    started: list[Tool] = field(default_factory=list)
    series: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.audit = AuditLog(self.cluster.audit_log)

    async def tool(self, settings: ToolSettings) -> Tool:
        """A prepared (not yet started) tool; it is stopped when the scenario ends."""
        tool = self.make_tool(settings)
        await tool.prepare(self.kube)
        self.started.append(tool)
        return tool

    def sampler(self) -> Sampler:
        """py-spy for the window whose CPU is measured, when this run profiles."""
        return Sampler(self.profile)

    async def namespace(self, name: str = NAMESPACE) -> str:
        """Create a namespace for the scenario's objects."""
        await ensure_namespace(self.kube, name)
        return name


Scenario = Callable[[Context], Awaitable[Metrics]]


@dataclass
class LocalContext:
    """What a scenario without a cluster gets: the sizes, where its logs go, a label for
    their names (tool, scenario, repetition), and the series for the plots."""

    sizes: Sizes
    logs: Path
    label: str
    series: dict[str, Any] = field(default_factory=dict)


LocalScenario = Callable[[LocalContext], Metrics]
