"""Strategy `hot`, decided purely: which changes can reach running pods without a restart,
and whether the pods' reload agents confirmed one (the clock is an argument).

A key consumed through a volume mounted whole (no `subPath`) by app containers reaches
running pods: the kubelet rewrites the files, and the `kube-nudge agent` sidecar reloads
the app. A key consumed through an env var, `envFrom`, a `subPath` mount, a volume an init
container mounts, or a source named only by annotation never does: such a change rolls.

Confirmation goes by time, not by hash: the agent hashes the files it sees, which the
controller can't reproduce (it keeps digests of keys, never values, and doesn't know the
files' layout). A pod has the change once its agent reports a successful reload at or after
the change (`kube-nudge.io/loaded-at`), or once it started after the change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from kube_nudge.model.decide import Apply
from kube_nudge.model.hashing import ABSENT, SourceState
from kube_nudge.model.references import INIT_SUFFIX, SUBPATH_SUFFIX, Consumption, SourceRef

__all__ = [
    "POLL_SECONDS",
    "PodReport",
    "Verdict",
    "VerdictKind",
    "judge",
    "reported_at",
    "restart_reasons",
]

POLL_SECONDS = 2.0
"""How often the pods' reports are read while a hot change waits for them."""


def restart_reasons(
    plan: Apply,
    visible: Mapping[SourceRef, Consumption],
    states: Mapping[SourceRef, SourceState],
    namespace: str,
) -> list[str]:
    """Why ``plan`` can't be delivered to running pods (empty: it can), naming sources, keys
    and references, never values."""
    if plan.stale_pods:
        return ["the pods started before their config last changed"]
    if plan.changes is None:
        return ["what changed while kube-nudge was not watching is not known key by key"]
    reasons = []
    for ref, keys in plan.changes.items():
        label = ref.display(namespace)
        use = visible.get(ref)
        if not keys:
            went = "appeared" if states.get(ref, ABSENT).present else "was removed"
            reasons.append(f"{label} {went} (only a restart mounts or unmounts it)")
        elif use is None:
            reasons.append(f"{label} no longer counts for the workload")
        elif frozen := use.needs_restart(keys):
            through = ", ".join(_frozen_via(use)) or "a reference read at start"
            reasons.append(f"{label} keys [{', '.join(frozen)}] are read only at start ({through})")
    return reasons


def _frozen_via(use: Consumption) -> list[str]:
    return [
        via for via in use.via
        if via.startswith(("env", "annotation")) or via.endswith((SUBPATH_SUFFIX, INIT_SUFFIX))
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class PodReport:
    """What one pod says about its config (from its own annotations and status)."""

    name: str
    started: float | None
    """When its containers read their config at start (Unix seconds), if started."""
    loaded_at: float | None = None
    """Its agent's last successful reload (`kube-nudge.io/loaded-at`)."""
    failed_at: float | None = None
    """Its agent's last failed reload (`kube-nudge.io/reload-failed-at`)."""
    terminating: bool = False


class VerdictKind(StrEnum):
    """Where a hot change stands."""

    RELOADED = "reloaded"
    WAITING = "waiting"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a hot change went; ``pods`` names the pods that failed or have not reported."""

    kind: VerdictKind
    pods: tuple[str, ...] = ()
    retry_after: float | None = None


def judge(
    pods: Iterable[PodReport], *, since: float, delivered_at: float, deadline: float, now: float
) -> Verdict:
    """Whether every live pod has the change made at ``since`` (Unix seconds), delivered at
    ``delivered_at``; pods that reported a failed reload since then fail it, pods silent
    ``deadline`` seconds after delivery time it out."""
    live = sorted((pod for pod in pods if not pod.terminating), key=lambda pod: pod.name)
    failed = tuple(
        pod.name for pod in live
        if pod.failed_at is not None and pod.failed_at >= since
        and (pod.loaded_at is None or pod.failed_at > pod.loaded_at)
    )  # fmt: skip
    if failed:
        return Verdict(VerdictKind.FAILED, failed)
    silent = tuple(pod.name for pod in live if not _has_change(pod, since))
    if not silent:
        return Verdict(VerdictKind.RELOADED)
    remaining = delivered_at + deadline - now
    if remaining <= 0:
        return Verdict(VerdictKind.TIMED_OUT, silent)
    return Verdict(VerdictKind.WAITING, silent, min(POLL_SECONDS, remaining))


def _has_change(pod: PodReport, since: float) -> bool:
    # Start times have whole seconds: a pod started in the same second as the change counts
    # as having read it (as at adoption).
    return (pod.loaded_at is not None and pod.loaded_at >= since) or (
        pod.started is not None and pod.started >= int(since)
    )


def reported_at(value: object) -> float | None:
    """A time the reload agent wrote on its pod (Unix seconds); None if absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) else None
