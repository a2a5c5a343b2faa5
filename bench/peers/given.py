"""``BENCH_PEERS``: which peer binaries to run, and which version each is.

``BENCH_PEERS=reloader=/path/to/reloader@v1.4.21,wave=/path/to/wave@v0.11.0``

Each entry is ``NAME=PATH@VERSION`` (a ``+COMMIT`` after the version is accepted and ignored).
The binaries are inputs from outside this repository, so the benchmark cannot know which
version a binary is: the entry says it, and BENCHMARKS.md prints it beside the figures. How a
binary was built (its path, its source's commit, build flags) is never recorded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True, slots=True)
class PeerBinary:
    """One peer binary given to the benchmark."""

    name: str
    path: Path
    version: str


def _entry(text: str, known: tuple[str, ...]) -> PeerBinary:
    def bad(why: str) -> ValueError:
        return ValueError(f"BENCH_PEERS: entry {text!r}: {why}")

    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not rest.strip():
        raise bad("expected NAME=PATH@VERSION")
    if name not in known:
        raise bad(f"unknown peer {name!r}; known: {', '.join(known)}")
    path_text, at, build = rest.strip().rpartition("@")
    if not at or "/" in build:
        raise bad(f"give the version it is: {name}={rest}@VERSION")
    version, plus, commit = build.partition("+")
    if not _VERSION.fullmatch(version):
        raise bad(f"version {version!r} is not a version (e.g. v1.4.21)")
    if plus and not _COMMIT.fullmatch(commit):
        raise bad(f"commit {commit!r} is not 7-40 lowercase hex digits (after '+')")
    path = Path(path_text).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise bad(f"{path} is not an executable file")
    return PeerBinary(name, path.resolve(), version)


def parse_peers(text: str, known: tuple[str, ...]) -> tuple[PeerBinary, ...]:
    """Parse a ``BENCH_PEERS`` value; ValueError (one line, naming the entry) if bad."""
    peers: list[PeerBinary] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        peer = _entry(raw.strip(), known)
        if any(p.name == peer.name for p in peers):
            raise ValueError(f"BENCH_PEERS: entry {raw.strip()!r}: {peer.name} is given twice")
        peers.append(peer)
    return tuple(peers)


def redacted(text: str) -> str:
    """A ``BENCH_PEERS`` value as the results may show it: ``NAME=PATH@VERSION``, no path, no
    commit."""
    entries = []
    for raw in text.split(","):
        name, _, rest = raw.strip().partition("=")
        version = rest.rpartition("@")[2].partition("+")[0]
        if name:
            entries.append(f"{name}=PATH@{version}")
    return ",".join(entries)
