"""Following the rollouts kube-nudge starts (pure: the clock is an argument).

The phase of a workload's rollout is derived from what is on the workload, never from
memory: when kube-nudge last rolled it (`kube-nudge.io/rolled-at`), the hash it rolled to,
its own controller's status (`model.progress`) and a recorded failure
(`kube-nudge.io/failed`). So a restarted controller or a new leader sees exactly what
the previous one saw, and only a failure needs a write of its own (once).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from kube_nudge.model.analysis import AnalysisPhase
from kube_nudge.model.progress import DEFAULT_PROGRESS_DEADLINE
from kube_nudge.model.projection import WorkloadView

__all__ = [
    "Phase",
    "RolloutNews",
    "Tracking",
    "failure_recorded",
    "progress_deadline",
    "rollout_news",
    "track",
]


class Phase(StrEnum):
    """Where the workload's latest kube-nudge rollout is."""

    IDLE = "idle"
    """Nothing rolled by kube-nudge to follow (adopted, or never rolled)."""
    ROLLING = "rolling"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Tracking:
    """The phase of a workload's latest rollout and what it is known by."""

    phase: Phase
    config_hash: str | None = None
    """The config the rollout brings the pods to."""
    started: float | None = None
    deadline_at: float | None = None
    """When a rollout still going is called failed (Unix seconds)."""
    detail: str = ""
    """The workload controller's words for how far it got (counts, never values)."""
    recorded: bool = False
    """A failure already recorded on the workload (its Event and notification went out)."""
    failed_at: float | None = None
    analysis: AnalysisPhase | None = None
    """With ``kube-nudge.io/analysis``, once the workload's own rollout completed: where
    its analysis is (Pending until it starts). Until Successful the phase stays rolling;
    Failed is failed; Error and Inconclusive hold (rolling, with no deadline) for a person."""


RolloutNews = Literal[Phase.FAILED, Phase.COMPLETE]
"""What a rollout did that a pass acts on (``rollout_news``)."""


def rollout_news(before: Phase | None, tracking: Tracking) -> RolloutNews | None:
    """What a rollout did that a pass acts on (``before``: the phase it was last followed
    in): FAILED for as long as its failure stands (recorded once, rolled back until it
    is), COMPLETE at the first pass that sees it complete after rolling; None when there
    is nothing to announce, record or roll back."""
    if tracking.phase is Phase.FAILED:
        return Phase.FAILED
    if tracking.phase is Phase.COMPLETE and before is Phase.ROLLING:
        return Phase.COMPLETE
    return None


def progress_deadline(view: WorkloadView) -> float:
    """Seconds a rollout of ``view`` may take: its annotation, else its own controller's
    deadline (``progressDeadlineSeconds``), else 10 minutes."""
    own = view.progress.own_deadline if view.progress is not None else None
    return view.settings.progress_deadline or own or DEFAULT_PROGRESS_DEADLINE


def failure_recorded(view: WorkloadView) -> bool:
    """Whether ``view`` records (``kube-nudge.io/failed``) that its current rollout failed:
    the failed hash is the one its template was rolled to. A rollout since, to another
    hash, leaves the record behind."""
    return view.failed is not None and view.failed[0] == (view.rolled_to or view.template_hash)


def track(view: WorkloadView, now: float, last: Phase | None = None) -> Tracking:
    """The phase of ``view``'s latest kube-nudge rollout at ``now`` (Unix seconds).
    ``last`` is the phase seen before, kept while the workload's controller has not yet
    observed a change of the workload (a metadata write moves a Deployment's generation
    too: a rollout that completed long ago must not look unfinished, or even failed)."""
    rolled_to = view.rolled_to or view.template_hash
    if view.baseline_hash or not view.rolled_at or rolled_to is None:
        return Tracking(Phase.IDLE)
    started = view.rolled_at[-1]
    if view.failed is not None and failure_recorded(view):
        return Tracking(
            Phase.FAILED,
            rolled_to,
            started,
            detail="recorded on the workload",
            recorded=True,
            failed_at=view.failed[1],
        )
    progress = view.progress
    if progress is None:
        # Nothing to follow (CronJob, custom kinds): done once the template is written.
        return _judged(view, Tracking(Phase.COMPLETE, rolled_to, started))
    if progress.done:
        return _judged(view, Tracking(Phase.COMPLETE, rolled_to, started, detail=progress.detail))
    deadline_at: float | None = started + progress_deadline(view)
    if progress.timed_by_controller and not view.settings.progress_deadline:
        deadline_at = None  # its controller's verdict (deadline_exceeded) is the deadline
    if not progress.observed:
        if last is Phase.COMPLETE or _analysis_begun(view, rolled_to):
            # Its analysis started, so the rollout completed: the write of the analysis's
            # record moved the generation, which says nothing about the rollout.
            return _judged(view, Tracking(Phase.COMPLETE, rolled_to, started))
        # Judged once observed (its controller catches up within moments).
        return Tracking(Phase.ROLLING, rolled_to, started, deadline_at, progress.detail)
    if progress.deadline_exceeded or (deadline_at is not None and now >= deadline_at):
        return Tracking(Phase.FAILED, rolled_to, started, deadline_at, progress.detail)
    return Tracking(Phase.ROLLING, rolled_to, started, deadline_at, progress.detail)


def _judged(view: WorkloadView, complete: Tracking) -> Tracking:
    """A completed rollout of a workload with ``kube-nudge.io/analysis``, as its analysis of
    the same config (``kube-nudge.io/analysis-run``) says: complete only once Successful (or,
    after an Error or Inconclusive, let go on by ``kube-nudge release``), failed when Failed,
    else still rolling (with no deadline: Error and Inconclusive hold for a person)."""
    if view.settings.analysis is None:
        return complete
    record = view.analysis_run
    if record is None or record.config_hash != complete.config_hash:
        return complete  # rolled before it asked for analysis: that rollout isn't judged
    if record.started is None:
        return replace(complete, phase=Phase.ROLLING, analysis=AnalysisPhase.PENDING,
                       detail="rollout complete; analysis starting")  # fmt: skip
    phase = record.phase
    if phase is not None and record.lets_line_go_on(view.released_at):
        how = "successful" if phase is AnalysisPhase.SUCCESSFUL else (
            f"{phase.value.lower()}, let go on by kube-nudge release"
        )  # fmt: skip
        detail = "; ".join(d for d in (complete.detail, f"analysis {how}") if d)
        return replace(complete, analysis=phase, detail=detail)
    if phase is AnalysisPhase.FAILED:
        return replace(complete, phase=Phase.FAILED, analysis=phase, failed_at=record.last_at,
                       detail=f"analysis failed: {record.verdict}")  # fmt: skip
    if phase is not None:
        held = f"analysis {phase.value.lower()}, held: {record.verdict}"
        return replace(complete, phase=Phase.ROLLING, analysis=phase, detail=held)
    return replace(complete, phase=Phase.ROLLING, analysis=AnalysisPhase.RUNNING,
                   detail="analysing")  # fmt: skip


def _analysis_begun(view: WorkloadView, rolled_to: str) -> bool:
    """Whether the workload records an analysis of ``rolled_to`` that has started: begun
    only once its rollout completed (a restarted controller has no ``last`` phase)."""
    record = view.analysis_run
    return record is not None and record.config_hash == rolled_to and record.started is not None
