"""How far a workload's own rollout has got, read from its status (pure, no I/O).

The rules are those of ``kubectl rollout status``: a rollout is done when the workload's
controller has observed the current generation and every replica runs the current
template and is available (Deployment), ready (StatefulSet) or available on every node
(DaemonSet). A Deployment whose ``Progressing`` condition says ``ProgressDeadlineExceeded``
has failed. Kinds whose rollout can't be followed (CronJob, custom kinds, ``OnDelete``
updates) have no progress: kube-nudge treats their rollout as done once written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_PROGRESS_DEADLINE", "Progress", "progress_of", "rollout_complete"]

DEFAULT_PROGRESS_DEADLINE = 600.0
"""Seconds a rollout may take when neither the workload nor kube-nudge's annotation says
(the Deployment controller's own default)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The state of a workload's current rollout, as its controller reports it."""

    done: bool
    deadline_exceeded: bool
    """The workload's controller gave up (Deployment ``ProgressDeadlineExceeded``)."""
    detail: str
    """e.g. ``3 of 4 updated, 2 available``: for Events and status, never values."""
    own_deadline: float | None = None
    """The workload's own progress deadline (``spec.progressDeadlineSeconds``), seconds."""
    observed: bool = True
    """False while its controller has not seen the latest generation: the status says
    nothing yet. (A Deployment's generation also moves with its annotations, so this
    happens on every metadata write, not only with a new template.)"""


def progress_of(kind: str, obj: Mapping[str, Any]) -> Progress | None:
    """The rollout progress of ``obj``, a workload of ``kind`` (``Deployment`` ...), or
    None when kube-nudge can't follow rollouts of that kind."""
    read = _READERS.get(kind)
    if read is None:
        return None
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    progress = read(spec, status)
    generation = _int((obj.get("metadata") or {}).get("generation"))
    if progress is not None and _int(status.get("observedGeneration")) < generation:
        # What the status says is about an earlier template.
        return Progress(
            False,
            False,
            "waiting for its controller to see the change",
            progress.own_deadline,
            observed=False,
        )
    return progress


def rollout_complete(kind: str, obj: Mapping[str, Any]) -> bool | None:
    """Whether ``obj``'s current template runs everywhere (what ``kubectl rollout status``
    waits for); None for kinds whose rollout can't be followed."""
    progress = progress_of(kind, obj)
    return None if progress is None else progress.done


def _deployment(spec: Mapping[str, Any], status: Mapping[str, Any]) -> Progress | None:
    deadline = _own_deadline("Deployment", spec)
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


_READERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Progress | None]] = {
    "Deployment": _deployment,
    "StatefulSet": _statefulset,
    "DaemonSet": _daemonset,
}


def _own_deadline(kind: str, spec: Mapping[str, Any]) -> float | None:
    if kind != "Deployment":
        return None
    seconds = spec.get("progressDeadlineSeconds")
    return float(seconds) if isinstance(seconds, int) and seconds > 0 else None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
