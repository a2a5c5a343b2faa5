"""The per-writer quiet windows, derived from the committed ``writers`` benchmark run (the
rule: model/pacing.py's docstring), so a window can't drift from the figures it rests on."""

from __future__ import annotations

import json
import math
from pathlib import Path

from kube_nudge.model.pacing import ASSUMED_RTT, DEFAULT_QUIET_WINDOW, WRITER_QUIET_WINDOWS

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "latest.json"
#: Per field manager: the command whose local gap stands for it in the committed run, and
#: the requests it makes per object (its round trips).
MEASURED_BY = {
    "helm": ("helm", 1),
    "kubectl-client-side-apply": ("kubectl", 2),
    "kubectl": ("kubectl", 1),
    "kubectl-replace": ("kubectl", 1),
    "kubectl-create": ("kubectl", 1),
}


def largest_gap(writer: str) -> float:
    """The largest gap (seconds) between one command's writes in the committed run, over
    its repetitions: ``kubectl`` (client-side apply) or ``helm``."""
    results = json.loads(RESULTS.read_text())
    assert results["tree"]["dirty"] == [], "the writers figures must come from a clean tree"
    summary = results["results"]["kube-nudge"]["writers"]["summary"]
    return float(summary[f"{writer}_gap_max_ms"]["max"]) / 1000


def derived(round_trips: int, gap: float) -> float:
    """Three times the gap against an API server ASSUMED_RTT away, up to half a second."""
    return math.ceil(3 * (gap + round_trips * ASSUMED_RTT) * 2) / 2


def test_the_writers_windows_are_derived_from_the_committed_writers_run() -> None:
    windows = dict(WRITER_QUIET_WINDOWS)
    assert {manager: windows[manager] for manager in MEASURED_BY} == {
        manager: derived(trips, largest_gap(command))
        for manager, (command, trips) in MEASURED_BY.items()
    }


def test_every_writers_window_is_longer_than_the_default() -> None:
    # A window at or below the default would never apply (quiet_window_for takes the longer).
    assert all(window > DEFAULT_QUIET_WINDOW for _, window in WRITER_QUIET_WINDOWS)
