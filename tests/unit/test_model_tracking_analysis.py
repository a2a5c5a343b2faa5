"""A completed rollout of a workload with ``kube-nudge.io/analysis`` as its analysis says:
still rolling until Successful, failed when Failed, held (rolling, no deadline) on Error
and Inconclusive until ``kube-nudge release`` lets it go on."""

from __future__ import annotations

import dataclasses

from kube_nudge.model.analysis import (
    AnalysisPhase,
    AnalysisRecord,
    AnalysisRef,
    Measurement,
)
from kube_nudge.model.progress import Progress
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.tracking import Phase, track
from tests.unit.fakes import workload

HASH = "v1-new"
NOW = 2000.0


def done(record: AnalysisRecord | None, *, released_at: float = 0.0) -> WorkloadView:
    view = workload(template_hash=HASH, rolled_at=(1000.0,))
    settings = dataclasses.replace(view.settings, analysis=AnalysisRef(
        "AnalysisTemplate.kube-nudge.io", "errors"))  # fmt: skip
    progress = Progress(done=True, deadline_exceeded=False, detail="2 of 2 updated")
    return dataclasses.replace(view, settings=settings, analysis_run=record, progress=progress,
                               released_at=released_at)  # fmt: skip


def measured(phase: AnalysisPhase | None, config_hash: str = HASH) -> AnalysisRecord:
    record = AnalysisRecord(config_hash, 1500.0).measured(
        "error-ratio", Measurement(AnalysisPhase.SUCCESSFUL, 1510.0, "[0.01]")
    )
    return record if phase is None else record.ended(phase, "metric error-ratio measured [0.5]")


def test_without_analysis_a_done_rollout_is_complete() -> None:
    view = dataclasses.replace(done(None), settings=workload().settings)
    assert track(view, NOW).phase is Phase.COMPLETE


def test_until_its_analysis_passes_a_done_rollout_is_still_rolling_with_no_deadline() -> None:
    pending = AnalysisRecord(HASH, None)  # what the rollout recorded, in the same write
    for record, analysis in ((pending, AnalysisPhase.PENDING),
                             (measured(None), AnalysisPhase.RUNNING)):  # fmt: skip
        tracking = track(done(record), NOW)
        assert (tracking.phase, tracking.analysis, tracking.deadline_at) == (
            Phase.ROLLING,
            analysis,
            None,
        )


def test_a_rollout_that_recorded_no_analysis_of_its_config_is_not_judged() -> None:
    """It rolled before the workload asked for analysis: no later opt-in judges it."""
    for record in (None, measured(AnalysisPhase.FAILED, "v1-old")):
        assert track(done(record), NOW).phase is Phase.COMPLETE


def test_the_verdict_decides() -> None:
    passed = track(done(measured(AnalysisPhase.SUCCESSFUL)), NOW)
    assert passed.phase is Phase.COMPLETE and passed.detail.endswith("analysis successful")
    failed = track(done(measured(AnalysisPhase.FAILED)), NOW)
    assert (failed.phase, failed.failed_at) == (Phase.FAILED, 1510.0)
    assert failed.detail == "analysis failed: metric error-ratio measured [0.5]"
    for phase in (AnalysisPhase.ERROR, AnalysisPhase.INCONCLUSIVE):
        held = track(done(measured(phase)), NOW)
        assert (held.phase, held.analysis, held.deadline_at) == (Phase.ROLLING, phase, None)
        assert held.detail.startswith(f"analysis {phase.value.lower()}, held: ")


def test_kube_nudge_release_lets_a_held_analysis_go_on_but_not_a_failed_one() -> None:
    held = done(measured(AnalysisPhase.ERROR), released_at=1600.0)
    assert track(held, NOW).phase is Phase.COMPLETE
    before = done(measured(AnalysisPhase.ERROR), released_at=1505.0)  # released before it ended
    assert track(before, NOW).phase is Phase.ROLLING
    failed = done(measured(AnalysisPhase.FAILED), released_at=1600.0)
    assert track(failed, NOW).phase is Phase.FAILED


def test_a_record_write_that_moves_the_generation_keeps_the_analysis_running() -> None:
    """Each measurement is written on the workload, which moves a Deployment's generation:
    until its controller observes it, the status says nothing of the rollout, which did
    complete, since its analysis started. With no phase remembered (a restart), too."""
    unobserved = Progress(done=False, deadline_exceeded=False, detail="", observed=False)
    running = dataclasses.replace(done(measured(None)), progress=unobserved)
    tracking = track(running, NOW)
    assert (tracking.phase, tracking.analysis) == (Phase.ROLLING, AnalysisPhase.RUNNING)
    pending = dataclasses.replace(done(AnalysisRecord(HASH, None)), progress=unobserved)
    assert track(pending, NOW).analysis is None  # not started: the rollout may be going on
