"""What an Argo Rollout's status says about its current rollout (pure, no I/O).

Read as the Argo Rollouts controller writes it (``argoproj.io/v1alpha1``, v1.0 and later
computes ``status.phase`` itself), never guessed from pods:

- ``status.observedGeneration`` is a *string* (``"7"``); a value that is not a number is
  the spec hash of a v0.9 controller and counts as observed (as ``kubectl argo rollouts``
  does). With ``spec.workloadRef``, the annotation ``rollout.argoproj.io/workload-generation``
  (the referenced Deployment's generation, copied by Argo) must equal
  ``status.workloadObservedGeneration`` too.
- failed: ``status.abort`` (aborted, by a user or a failed analysis), an ``InvalidSpec``
  condition, ``status.phase: Degraded`` (Argo's own progress deadline, which leaves pauses
  out) or a ``Progressing`` condition with reason ``ProgressDeadlineExceeded`` or
  ``RolloutAborted``.
- paused: ``spec.paused``, ``status.pauseConditions`` (``CanaryPauseStep``,
  ``BlueGreenPause``: waiting for promotion; ``AnalysisRunInconclusive``,
  ``InconclusiveExperiment``: an analysis needs a decision) or ``status.phase: Paused``.
- done: ``status.phase: Healthy`` with ``status.currentPodHash == status.stableRS`` (fully
  promoted: the stable ReplicaSet runs the current template).
- anything else: progressing, in Argo's words (``status.message``) or its replica counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "ARGO_DEFAULT_PROGRESS_DEADLINE",
    "WORKLOAD_GENERATION",
    "RolloutState",
    "Verdict",
    "read_rollout",
    "rollout_observed",
    "workload_generation",
    "workload_ref",
    "workload_ref_key",
]

WORKLOAD_GENERATION = "rollout.argoproj.io/workload-generation"
"""Argo's copy of the referenced workload's ``metadata.generation`` (workloadRef only)."""

ARGO_DEFAULT_PROGRESS_DEADLINE = 600.0
"""``spec.progressDeadlineSeconds`` when a Rollout doesn't say (Argo's default)."""

#: Why a Rollout is paused, in words for Events and ``status`` (Argo's PauseReason values).
_PAUSE_WORDS = {
    "CanaryPauseStep": "paused at a canary step, waiting for promotion",
    "BlueGreenPause": "paused before switching the active service, waiting for promotion",
    "AnalysisRunInconclusive": "paused: an analysis was inconclusive",
    "InconclusiveExperiment": "paused: an experiment was inconclusive",
}
_FAILED_REASONS = frozenset({"ProgressDeadlineExceeded", "RolloutAborted"})


class Verdict(StrEnum):
    """Where a Rollout's current rollout is, as Argo reports it."""

    PROGRESSING = "progressing"
    PAUSED = "paused"
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    ABORTED = "aborted"


@dataclass(frozen=True, slots=True)
class RolloutState:
    """A Rollout's verdict and Argo's words for it (counts and reasons, never values)."""

    verdict: Verdict
    detail: str
    own_deadline: float


def workload_ref(obj: Mapping[str, Any]) -> str | None:
    """``Deployment/NAME`` when a Rollout takes its pod template from a Deployment
    (``spec.workloadRef``; Argo refuses a template of the Rollout's own then), else None."""
    ref = _mapping(_mapping(obj.get("spec")).get("workloadRef"))
    name, kind = ref.get("name"), ref.get("kind")
    if isinstance(name, str) and name and isinstance(kind, str) and kind:
        return f"{kind}/{name}"
    return None


def workload_ref_key(obj: Mapping[str, Any]) -> str | None:
    """``Deployment.apps/NAME``: the referenced workload by group-kind (from the reference's
    ``apiVersion``), so that only that kind's workload of that name is meant."""
    shown = workload_ref(obj)
    if shown is None:
        return None
    api_version = _mapping(_mapping(obj.get("spec")).get("workloadRef")).get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    kind, _, name = shown.partition("/")
    return f"{kind}.{group}/{name}" if group else shown


def workload_generation(obj: Mapping[str, Any]) -> int | None:
    """The referenced workload's ``metadata.generation`` Argo last saw (its copy in
    ``rollout.argoproj.io/workload-generation``; ``workloadRef`` only), or None."""
    annotations = _mapping(_mapping(obj.get("metadata")).get("annotations"))
    return _number(annotations.get(WORKLOAD_GENERATION))


def rollout_observed(obj: Mapping[str, Any]) -> bool:
    """Whether Argo has seen the Rollout's latest spec (and, with ``workloadRef``, the
    referenced workload's latest template)."""
    metadata = _mapping(obj.get("metadata"))
    status = _mapping(obj.get("status"))
    generation = metadata.get("generation")
    observed = _number(status.get("observedGeneration"))
    if isinstance(generation, int) and observed is not None and observed < generation:
        return False
    copied = workload_generation(obj)
    seen = _number(status.get("workloadObservedGeneration"))
    return copied is None or seen is None or seen >= copied


def read_rollout(spec: Mapping[str, Any], status: Mapping[str, Any]) -> RolloutState:
    """The verdict on a Rollout's current rollout from its ``spec`` and ``status``."""
    seconds = spec.get("progressDeadlineSeconds")
    deadline = (
        float(seconds)
        if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0
        else ARGO_DEFAULT_PROGRESS_DEADLINE
    )
    message = text if isinstance(text := status.get("message"), str) else ""
    conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
    if status.get("abort") is True:
        return RolloutState(Verdict.ABORTED, _words("aborted", message), deadline)
    for condition in conditions:
        if condition.get("type") == "InvalidSpec" and condition.get("status") == "True":
            return RolloutState(Verdict.DEGRADED, "invalid spec", deadline)
        if condition.get("type") == "Progressing" and condition.get("reason") in _FAILED_REASONS:
            return RolloutState(Verdict.DEGRADED, _words("degraded", message), deadline)
    phase = status.get("phase")
    if phase == "Degraded":
        return RolloutState(Verdict.DEGRADED, _words("degraded", message), deadline)
    pauses = [
        str(p.get("reason")) for p in status.get("pauseConditions") or () if isinstance(p, Mapping)
    ]
    if spec.get("paused") is True:
        return RolloutState(Verdict.PAUSED, "paused by hand (spec.paused)", deadline)
    if pauses:
        words = [_PAUSE_WORDS.get(reason, f"paused: {reason}") for reason in pauses]
        return RolloutState(Verdict.PAUSED, "; ".join(dict.fromkeys(words)), deadline)
    if phase == "Paused":
        return RolloutState(Verdict.PAUSED, _words("paused", message), deadline)
    promoted = bool(status.get("stableRS")) and status.get("stableRS") == status.get(
        "currentPodHash"
    )
    if phase == "Healthy" and promoted:
        return RolloutState(Verdict.HEALTHY, _counts(spec, status), deadline)
    return RolloutState(Verdict.PROGRESSING, message or _counts(spec, status), deadline)


def _counts(spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    want = _int(spec.get("replicas"), default=1)
    updated = _int(status.get("updatedReplicas"))
    available = _int(status.get("availableReplicas"))
    return f"{updated} of {want} updated, {available} available"


def _words(verdict: str, message: str) -> str:
    return f"{verdict}: {message}" if message else verdict


def _number(value: object) -> int | None:
    """Argo writes generations as decimal strings; a JSON number is read too."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
