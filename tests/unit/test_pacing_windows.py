"""The per-writer quiet windows, derived from the committed ``writers`` benchmark run (the
rule: model/pacing.py's docstring), so a window can't drift from the figures it rests on."""

from __future__ import annotations

import json
import math
from pathlib import Path

from kube_nudge.model.pacing import ASSUMED_RTT, DEFAULT_QUIET_WINDOW, WRITER_QUIET_WINDOWS

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "latest.json"
#: Requests each writer makes per object (its round trips), and whose local gap stands for it.
ROUND_TRIPS = {"kubectl-client-side-apply": 2, "kubectl-replace": 1, "kubectl-create": 1}


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


def test_kubectls_windows_are_derived_from_the_committed_writers_run() -> None:
    gap = largest_gap("kubectl")
    windows = dict(WRITER_QUIET_WINDOWS)
    assert {m: windows[m] for m in ROUND_TRIPS} == {
        manager: derived(trips, gap) for manager, trips in ROUND_TRIPS.items()
    }


def test_the_default_window_holds_helms_local_gaps_three_times_over() -> None:
    assert 3 * largest_gap("helm") <= DEFAULT_QUIET_WINDOW
