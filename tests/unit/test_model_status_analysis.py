"""What `kube-nudge status` (and so `wait`) says of a workload whose rollouts are judged by
an analysis: rolling until it passes, failed when it failed, held for a person after an
Error or Inconclusive until `kube-nudge release`, current once it passed."""

from __future__ import annotations

import dataclasses

import pytest

from kube_nudge.model.analysis import (
    AnalysisPhase,
    AnalysisRecord,
    AnalysisRef,
    Measurement,
)
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.status import DRIFT_STATES, PodFacts, classify
from tests.unit.fakes import workload

HASH = "v1-new"
PODS = PodFacts({HASH: 2})


def judged(record: AnalysisRecord | None, released_at: float = 0.0) -> WorkloadView:
    view = workload(template_hash=HASH, rolled_at=(1000.0,))
    settings = dataclasses.replace(view.settings, analysis=AnalysisRef(
        "AnalysisTemplate.kube-nudge.io", "errors"))  # fmt: skip
    return dataclasses.replace(view, settings=settings, analysis_run=record,
                               released_at=released_at)  # fmt: skip


def run(phase: AnalysisPhase | None, started: float | None = 1500.0) -> AnalysisRecord:
    record = AnalysisRecord(HASH, started)
    if started is not None:
        record = record.measured("error-ratio", Measurement(AnalysisPhase.FAILED, 1510.0, "[0.5]"))
    return record if phase is None else record.ended(phase, "metric error-ratio measured [0.5]")


@pytest.mark.parametrize(
    ("record", "released_at", "state", "says"),
    [
        (run(None, started=None), 0.0, "rolling", "its analysis starts once its rollout"),
        (
            run(None),
            0.0,
            "rolling",
            "its analysis is running: error-ratio last measured [0.5] (1 measured)",
        ),
        (run(AnalysisPhase.SUCCESSFUL), 0.0, "current", "pods run the config"),
        (run(AnalysisPhase.FAILED), 0.0, "failed", "its analysis failed: metric error-ratio"),
        (run(AnalysisPhase.ERROR), 0.0, "held", "its analysis ended Error"),
        (run(AnalysisPhase.INCONCLUSIVE), 0.0, "held", "kube-nudge release lets it go on"),
        (run(AnalysisPhase.ERROR), 1600.0, "current", "pods run the config"),
        (None, 0.0, "current", "pods run the config"),  # rolled before it asked: not judged
    ],
)
def test_the_analysis_decides_the_state(
    record: AnalysisRecord | None, released_at: float, state: str, says: str
) -> None:
    found, detail = classify(judged(record, released_at), HASH, (), PODS, now=2000.0)
    assert (found, says in detail) == (state, True), detail


def test_held_and_failed_analyses_make_status_exit_1() -> None:
    assert {"held", "failed"} <= DRIFT_STATES
