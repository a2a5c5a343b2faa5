"""Which tools a run compares: kube-nudge, each peer given, a peer's knob-raised variant, and
the minimal client (the fan-out's and burst's physical limit)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench import minimal
from bench.config import KNOWN_SCENARIOS, BenchConfig
from bench.peers import PEERS
from bench.peers.given import PeerBinary
from bench.procfs import git_commit
from bench.tools import KubeNudge, KubeNudgeSnapshot, Tool, ToolSettings

NO_DEBOUNCE = "no debounce window (reacts to each change at once)"
SNAPSHOT_ONLY = "strategy snapshot runs where its extra work per change shows: latency, fan-out"
NOT_APPLICABLE = "not applicable (it only sends the fan-out's and the burst's patches)"
NO_AGENT = "no in-pod reload agent (the scenario measures kube-nudge's `agent` sidecar)"
KUBE_NUDGE_ONLY = "kube-nudge alone: its own scale target (see the scenario)"
NO_ANALYSIS = "no release gated on metrics (it rolls whatever the config is)"


@dataclass(frozen=True, slots=True)
class Entry:
    """One column of the results: a tool, its version, and the flags it runs with."""

    label: str
    kind: str
    version: str
    commit: str  # this repository's commit for its own tools; "" for a peer (never recorded)
    args: tuple[str, ...]
    make: Callable[[Path, ToolSettings], Tool]
    marker: str  # what a rollout by it shows as
    only: frozenset[str] | None = None  # the scenarios it runs in (None: every one)
    skip: dict[str, str] = field(default_factory=dict)  # scenario -> why it does not run
    note: str = ""

    def tool(self, log_path: Path, settings: ToolSettings) -> Tool:
        """A tool instance with the scenario's settings and this entry's flags."""
        return self.make(log_path, replace(settings, extra_args=settings.extra_args + self.args))

    def why_not(self, scenario: str) -> str | None:
        """Why this entry does not run ``scenario`` (None: it does)."""
        if scenario in self.skip:
            return self.skip[scenario]
        if self.only is not None and scenario not in self.only:
            return "this variant runs only where the default throttle dominates"
        return None

    def describe(self) -> dict[str, object]:
        """What the page and the JSON say about it."""
        described: dict[str, object] = {
            "kind": self.kind, "version": self.version, "commit": self.commit,
            "args": list(self.args), "note": self.note, "marker": self.marker,
        }  # fmt: skip
        if not self.commit:
            del described["commit"]  # a peer: how it was built is not ours to record
        return described


def _peer(binary: PeerBinary) -> Callable[[Path, ToolSettings], Tool]:
    cls = PEERS[binary.name]
    return lambda log_path, settings: cls(log_path, settings, binary)


def lineup(config: BenchConfig) -> list[Entry]:
    """kube-nudge first, then the peers in the order given, then the minimal client;
    ``BENCH_TOOLS`` filters labels."""
    from kube_nudge import __version__

    entries = [
        Entry(
            "kube-nudge",
            "kube-nudge",
            __version__,
            git_commit(Path(__file__).parent.parent),
            config.tool_args,
            KubeNudge,
            KubeNudge.marker_text,
        )
    ]
    entries.append(Entry(
        "kube-nudge (snapshot)", "kube-nudge", __version__, entries[0].commit, config.tool_args,
        KubeNudgeSnapshot, KubeNudgeSnapshot.marker_text,
        skip={s: SNAPSHOT_ONLY for s in KNOWN_SCENARIOS if s not in ("latency", "fanout")},
        note="strategy snapshot: each change also copies the sources and renames references",
    ))  # fmt: skip
    for binary in config.peers:
        make, marker = _peer(binary), PEERS[binary.name].marker_text
        skip = {"latency-debounce": NO_DEBOUNCE, "agent": NO_AGENT, "agent-node": NO_AGENT,
                "scale": KUBE_NUDGE_ONLY, "analysis": NO_ANALYSIS}  # fmt: skip
        entries.append(Entry(binary.name, binary.name, binary.version, "", (), make,
                             marker, skip=skip))  # fmt: skip
        for variant in PEERS[binary.name].variants:
            entries.append(Entry(
                variant.label, binary.name, binary.version, "", variant.args, make,
                marker, only=variant.scenarios, skip=skip, note=variant.note,
            ))  # fmt: skip
    entries.append(Entry(
        minimal.MinimalClient.name, minimal.KIND, "bench", entries[0].commit,
        ("--concurrency", str(minimal.CONCURRENCY)), minimal.MinimalClient,
        minimal.MinimalClient.marker_text,
        skip={s: NOT_APPLICABLE for s in KNOWN_SCENARIOS if s not in ("fanout", "burst")},
        note=minimal.NOTE,
    ))  # fmt: skip
    wanted = [t.strip() for t in os.environ.get("BENCH_TOOLS", "").split(",") if t.strip()]
    if wanted:
        unknown = sorted(set(wanted) - {e.label for e in entries})
        if unknown:
            raise ValueError(f"BENCH_TOOLS: unknown {unknown}; this run has "
                             f"{', '.join(e.label for e in entries)}")  # fmt: skip
        entries = [e for e in entries if e.label in wanted]
    return entries
