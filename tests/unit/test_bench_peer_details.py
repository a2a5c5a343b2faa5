"""The results and the page record no build details of the peers: no path, no source commit,
no build flags."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench.config import note_env
from bench.peers.given import parse_peers, redacted

REPO = Path(__file__).resolve().parents[2]
COMMITTED = sorted((REPO / "bench" / "results").glob("*.json"))
OWN_KINDS = ("kube-nudge", "minimal")


def test_a_peer_is_given_by_path_and_version_and_a_commit_is_ignored(tmp_path: Path) -> None:
    binary = tmp_path / "reloader"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (plain,) = parse_peers(f"reloader={binary}@v1.4.21", ("reloader",))
    (with_commit,) = parse_peers(f"reloader={binary}@v1.4.21+655a2b3", ("reloader",))
    assert plain == with_commit and plain.version == "v1.4.21"


def test_the_recorded_command_shows_no_path_and_no_commit() -> None:
    given = "reloader=/tmp/peers/bin/reloader@v1.4.21+655a2b3,wave=/opt/wave@v0.11.0"
    assert redacted(given) == "reloader=PATH@v1.4.21,wave=PATH@v0.11.0"


@pytest.mark.parametrize(
    "note", ["built with go build -trimpath", "binaries in /tmp/peers/bin", "-ldflags '-s -w'"]
)
def test_a_note_telling_how_a_peer_was_built_is_refused(
    monkeypatch: pytest.MonkeyPatch, note: str
) -> None:
    monkeypatch.setenv("BENCH_NOTE", note)
    with pytest.raises(ValueError, match="BENCH_NOTE"):
        note_env()


def test_a_plain_note_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_NOTE", "Three repetitions and a 60 s roll limit (1006fed+dirty).")
    assert note_env().startswith("Three repetitions")


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_results_carry_no_peer_build_details(path: Path) -> None:
    document = json.loads(path.read_text())
    # (make bench-http's results name HTTP libraries, not tools: no "tools" there.)
    tools = document.get("tools", {})
    peers = [info for info in tools.values() if info["kind"] not in OWN_KINDS]
    assert all("commit" not in info for info in peers)
    given = re.search(r"BENCH_PEERS=(\S+)", document["command"])
    assert given is None or redacted(given[1]) == given[1]
    assert not re.search(r"/[\w.-]+/|go build|-ldflags", document.get("note", ""))
