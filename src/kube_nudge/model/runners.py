"""Workloads that run another workload's pod template (pure, no I/O).

An Argo Rollout with ``spec.workloadRef`` has no template of its own: it runs the template
of the Deployment it names (usually scaled to zero). So the user opts in the Deployment,
and kube-nudge writes the hash there; but the rollout that follows is the Rollout's, and
only its status says how it goes. The Deployment's own status (0 of 0 updated) would call
every such rollout done at once, and stop the line, rollback and ``wait`` would never see
it fail.

So a workload whose template another runs takes that runner's progress (``run_by``),
judged only once the runner has seen the template's latest generation: Argo copies the
Deployment's ``metadata.generation`` to the Rollout's
``rollout.argoproj.io/workload-generation`` when it sees it (``model.argorollout``).

Each kind that can run another's template is one entry of ``_ELSEWHERE``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from kube_nudge.model.argorollout import workload_generation, workload_ref, workload_ref_key
from kube_nudge.model.progress import Progress, progress_of

__all__ = ["Runner", "project_runner", "run_by", "runs_elsewhere", "template_elsewhere"]

_Read = Callable[[Mapping[str, Any]], Any]


class _Elsewhere(NamedTuple):
    """How a kind that may run another's template names it and says what it saw of it."""

    shown: _Read
    """The template's owner for messages: ``Deployment/web`` (None: it runs its own)."""
    owner: _Read
    """The owner by group-kind: ``Deployment.apps/web``."""
    seen_generation: _Read
    """The owner's ``metadata.generation`` it last saw (an int, or None)."""


#: Kinds (by group-kind) whose pod template may live in another object.
_ELSEWHERE: dict[str, _Elsewhere] = {
    "Rollout.argoproj.io": _Elsewhere(workload_ref, workload_ref_key, workload_generation),
}


@dataclass(frozen=True, slots=True)
class Runner:
    """A workload running another's pod template, and how far its rollout got."""

    kind: str
    """Its Kind (``Rollout``)."""
    name: str
    runs: str
    """The template's owner, ``KIND/NAME`` in the runner's namespace (``Deployment/web``)."""
    owner: str
    """The same by group-kind (``Deployment.apps/web``): what the caches join on."""
    progress: Progress
    seen_generation: int | None
    """The owner's ``metadata.generation`` the runner last saw; None if it never said."""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


def runs_elsewhere(kind: str) -> bool:
    """Whether workloads of group-kind ``kind`` (``Rollout.argoproj.io``) may run another's
    template."""
    return kind in _ELSEWHERE


def template_elsewhere(kind: str, obj: Mapping[str, Any]) -> str | None:
    """``KIND/NAME`` of the workload whose template ``obj`` runs, or None if it runs its own
    (or its kind never runs another's)."""
    reading = _ELSEWHERE.get(kind)
    shown = reading.shown(obj) if reading is not None else None
    return shown if isinstance(shown, str) else None


def project_runner(kind: str, obj: Mapping[str, Any]) -> Runner | None:
    """``obj`` as a runner of another's template, or None if it runs its own (or kube-nudge
    can't follow its kind's rollouts)."""
    reading = _ELSEWHERE.get(kind)
    runs = template_elsewhere(kind, obj)
    progress = progress_of(kind, obj)
    if reading is None or runs is None or progress is None:
        return None
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return Runner(
        kind=kind.partition(".")[0],
        name=str(name or ""),
        runs=runs,
        owner=str(reading.owner(obj)),
        progress=progress,
        seen_generation=reading.seen_generation(obj),
    )


def run_by(runner: Runner, generation: int) -> Progress:
    """The progress of a template at ``generation`` that ``runner`` runs: the runner's own,
    once it has seen that generation; until then, not yet observed (what its status says is
    about an earlier template). A runner that never saw any (its controller refused the
    reference: Argo's ``InvalidSpec``) and says it failed has failed."""
    progress = replace(runner.progress, detail=f"{runner}: {runner.progress.detail}")
    if runner.seen_generation is None and progress.deadline_exceeded:
        return progress
    if runner.seen_generation is None or runner.seen_generation < generation:
        return Progress(
            False, False, f"waiting for {runner} to see the change", progress.own_deadline,
            observed=False, timed_by_controller=progress.timed_by_controller,
        )  # fmt: skip
    return progress
