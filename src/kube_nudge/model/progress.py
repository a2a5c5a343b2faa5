"""How far a workload's own rollout has got, read from its status (pure, no I/O).

The rules are those of ``kubectl rollout status``: a rollout is done when the workload's
controller has observed the current generation and every replica runs the current
template and is available (Deployment), ready (StatefulSet) or available on every node
(DaemonSet). A Deployment whose ``Progressing`` condition says ``ProgressDeadlineExceeded``
has failed. An Argo Rollout is read as its own controller reports it (``model.argorollout``:
healthy, progressing, paused, degraded or aborted). Kinds whose rollout can't be followed
(CronJob, other custom kinds, ``OnDelete`` updates) have no progress: kube-nudge treats
their rollout as done once written.

Each kind's reading is one entry of ``_READERS``: how its status says how far it got, and
how it says its controller saw the latest generation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kube_nudge.model.argorollout import Verdict, read_rollout, rollout_observed

__all__ = ["DEFAULT_PROGRESS_DEADLINE", "Progress", "progress_of", "rollout_complete"]

DEFAULT_PROGRESS_DEADLINE = 600.0
"""Seconds a rollout may take when neither the workload nor kube-nudge's annotation says
(the Deployment controller's own default)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The state of a workload's current rollout, as its controller reports it."""

    done: bool
    deadline_exceeded: bool
    """The workload's controller gave up (Deployment ``ProgressDeadlineExceeded``; an Argo
    Rollout degraded or aborted)."""
    detail: str
    """e.g. ``3 of 4 updated, 2 available``: for Events and status, never values."""
    own_deadline: float | None = None
    """The workload's own progress deadline (``spec.progressDeadlineSeconds``), seconds."""
    observed: bool = True
    """False while its controller has not seen the latest generation: the status says
    nothing yet. (A Deployment's generation also moves with its annotations, so this
    happens on every metadata write, not only with a new template.)"""
    timed_by_controller: bool = False
    """Its controller calls the rollout failed at its own deadline (an Argo Rollout: its
    deadline leaves pauses for promotion or analysis out), so kube-nudge sets none of its
    own unless ``kube-nudge.io/progress-deadline`` asks."""


def progress_of(kind: str, obj: Mapping[str, Any]) -> Progress | None:
    """The rollout progress of ``obj``, a workload of group-kind ``kind``
    (``Deployment.apps`` ...), or None when kube-nudge can't follow rollouts of that kind."""
    reader = _READERS.get(kind)
    if reader is None:
        return None
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    progress = reader.read(spec, status)
    if progress is not None and not reader.observed(obj):
        # What the status says is about an earlier template.
        return Progress(
            False,
            False,
            "waiting for its controller to see the change",
            progress.own_deadline,
            observed=False,
            timed_by_controller=progress.timed_by_controller,
        )
    return progress


def rollout_complete(kind: str, obj: Mapping[str, Any]) -> bool | None:
    """Whether ``obj``'s current template runs everywhere (what ``kubectl rollout status``
    waits for); None for kinds whose rollout can't be followed."""
    progress = progress_of(kind, obj)
    return None if progress is None else progress.done


def _deployment(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress | None:
    deadline = _own_deadline(spec)
    progressing = next(
        (
            c.get("reason")
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == "Progressing"
        ),
        None,
    )
    if progressing == "ProgressDeadlineExceeded":
        return Progress(False, True, "progress deadline exceeded", deadline)
    want = _int(spec.get("replicas"), default=1)
    updated = _int(status.get("updatedReplicas"))
    total = _int(status.get("replicas"))
    available = _int(status.get("availableReplicas"))
    detail = f"{updated} of {want} updated, {available} available"
    if total > updated:
        detail += f", {total - updated} old pending termination"
    done = updated >= want and total <= updated and available >= updated
    # The condition stays once the new ReplicaSet was available, even if pods fail later
    # (a node lost): that rollout finished; what happens next is not its failure.
    return Progress(done or progressing == "NewReplicaSetAvailable", False, detail, deadline)


def _statefulset(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress | None:
    strategy = _mapping(spec.get("updateStrategy"))
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None  # OnDelete: pods change only when someone deletes them
    want = _int(spec.get("replicas"), default=1)
    partition = _int(_mapping(strategy.get("rollingUpdate")).get("partition"))
    ready = _int(status.get("readyReplicas"))
    updated = _int(status.get("updatedReplicas"))
    detail = f"{updated} of {want} updated, {ready} ready"
    done = ready >= want and updated >= want - partition
    if partition == 0:
        done = done and status.get("updateRevision") == status.get("currentRevision")
    return Progress(done, False, detail)


def _daemonset(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress | None:
    strategy = _mapping(spec.get("updateStrategy"))
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    want = _int(status.get("desiredNumberScheduled"))
    updated = _int(status.get("updatedNumberScheduled"))
    available = _int(status.get("numberAvailable"))
    detail = f"{updated} of {want} nodes updated, {available} available"
    return Progress(updated >= want and available >= want, False, detail)


def _rollout(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress | None:
    state = read_rollout(spec, status)
    failed = state.verdict in (Verdict.DEGRADED, Verdict.ABORTED)
    done = state.verdict is Verdict.HEALTHY
    return Progress(done, failed, state.detail, state.own_deadline, timed_by_controller=True)


def _generation_observed(obj: Mapping[str, Any]) -> bool:
    """The built-in kinds' rule: ``status.observedGeneration`` (a number) has caught up."""
    generation = _int(_mapping(obj.get("metadata")).get("generation"))
    return _int(_mapping(obj.get("status")).get("observedGeneration")) >= generation


class _Reader(NamedTuple):
    read: Callable[[Mapping[str, Any], Mapping[str, Any]], Progress | None]
    observed: Callable[[Mapping[str, Any]], bool] = _generation_observed


#: By group-kind (``Resource.group_kind``): a custom kind that shares a Kind name is not read.
_READERS: dict[str, _Reader] = {
    "Deployment.apps": _Reader(_deployment),
    "StatefulSet.apps": _Reader(_statefulset),
    "DaemonSet.apps": _Reader(_daemonset),
    "Rollout.argoproj.io": _Reader(_rollout, rollout_observed),  # model/argorollout.py
}


def _own_deadline(spec: Mapping[str, Any]) -> float | None:
    """A Deployment's ``spec.progressDeadlineSeconds``."""
    seconds = spec.get("progressDeadlineSeconds")
    return float(seconds) if isinstance(seconds, int) and seconds > 0 else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
