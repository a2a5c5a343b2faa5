"""Peer controllers run beside kube-nudge, given as binaries in ``BENCH_PEERS`` (never built
here)."""

from __future__ import annotations

from bench.peers.reloader import Reloader
from bench.peers.wave import Wave

#: Peers by the name used in ``BENCH_PEERS``.
PEERS: dict[str, type[Reloader] | type[Wave]] = {"reloader": Reloader, "wave": Wave}
