"""The pure decision behind `kube-nudge.io/pod-selector`: which of a source's matching pods
to evict now, if any. No I/O; the clock is an argument.

A pod is stale when it last read its config before the source's data last changed (both in
the API's whole seconds: a pod started in the same second counts as fresh, as adoption
has it). Nothing is remembered between passes but a short-lived floor, so a restart or a
new leader recomputes the same plan. Each pass:

- no stale pod with a controller left: done (stale pods without one are only reported:
  evicting them would delete them for good);
- a matching pod terminating, not Ready, or fewer live pods than before the last
  evictions (replacements not created yet): wait;
- else evict stale owned pods, oldest first: all of them when a PodDisruptionBudget covers
  each (the caller stops at the API's first refusal, so one budget's worth goes per pass),
  else only the oldest (no budget says how many may go at once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kube_nudge.model.projection import SourceView
from kube_nudge.model.selectors import selector_matches

__all__ = [
    "REPLACEMENT_WAIT",
    "STALL_AFTER",
    "Floor",
    "PodRecord",
    "Replacement",
    "plan_replacement",
    "replacement_selector",
    "stale",
]

REPLACEMENT_WAIT = 60.0
"""Seconds a floor holds: how long to wait for evicted pods' replacements to be created.
After that the lower count is taken as the new normal (the workload was scaled down)."""

STALL_AFTER = 300.0
"""Seconds a replacement may wait (pods not Ready or terminating, replacements not created)
before a Warning says it is stuck: a rollout's default progress deadline is 10 minutes, a
pod that is not Ready after 5 is worth a look."""


@dataclass(frozen=True, slots=True)
class PodRecord:
    """What the decision needs of one pod matching the selector."""

    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    started: float | None = None
    """When it last read its config (Unix seconds, whole); None: not started."""
    ready: bool = False
    terminating: bool = False
    owned: bool = True
    """It has a controller (an ownerReference with `controller: true`) that replaces it."""
    finished: bool = False
    """Phase Succeeded or Failed (a Job's pod): ignored, it serves nothing and holds no config."""


@dataclass(frozen=True, slots=True)
class Floor:
    """Live (not terminating) matching pods counted before the last evictions, and when."""

    pods: int
    since: float


@dataclass(frozen=True, slots=True)
class Replacement:
    """What to do now for one source's pods."""

    evict: tuple[PodRecord, ...] = ()
    """Stale owned pods to evict now, oldest first; stop at the first refusal."""
    waiting: str = ""
    """Why nothing is evicted yet (names pods, never values); empty when not waiting."""
    unowned: tuple[str, ...] = ()
    """Stale pods without a controller: never evicted, reported."""
    live: int = 0
    """Live matching pods now: the floor to keep once `evict` is carried out."""

    @property
    def done(self) -> bool:
        """Nothing left to evict for this change of the data."""
        return not self.evict and not self.waiting


def replacement_selector(source: SourceView | None) -> str | None:
    """The pod selector of a source that asks for its pods to be replaced (an ignored
    source asks for nothing)."""
    if source is None or source.settings.ignore:
        return None
    return source.settings.pod_selector


def stale(pod: PodRecord, changed_at: float | None) -> bool:
    """Whether `pod` read its config before the data last changed (and still serves)."""
    return (
        not pod.finished
        and not pod.terminating
        and pod.started is not None
        and changed_at is not None
        and pod.started < changed_at  # the same whole second counts as fresh
    )


def plan_replacement(
    pods: Sequence[PodRecord],
    changed_at: float | None,
    budgets: Sequence[object],
    floor: Floor | None,
    now: float,
) -> Replacement:
    """One pass over the pods matching a source's selector. `changed_at`: when its data
    last changed; `budgets`: the `spec.selector` of each PodDisruptionBudget of the
    namespace; `floor`: live pods before this source's last evictions, if any."""
    current = [pod for pod in pods if not pod.finished]
    old = sorted(
        (pod for pod in current if stale(pod, changed_at)),
        key=lambda pod: (pod.started or 0.0, pod.name),
    )
    unowned = tuple(sorted(pod.name for pod in old if not pod.owned))
    owned = tuple(pod for pod in old if pod.owned)
    live = [pod for pod in current if not pod.terminating]
    if not owned:
        return Replacement(unowned=unowned, live=len(live))
    waiting = _waiting(current, live, floor, now)
    if waiting:
        return Replacement(waiting=waiting, unowned=unowned, live=len(live))
    if all(_covered(pod, budgets) for pod in owned):
        return Replacement(evict=owned, unowned=unowned, live=len(live))
    return Replacement(evict=owned[:1], unowned=unowned, live=len(live))


def _waiting(
    current: Sequence[PodRecord], live: Sequence[PodRecord], floor: Floor | None, now: float
) -> str:
    terminating = sorted(pod.name for pod in current if pod.terminating)
    if terminating:
        return "pods terminating: " + _names(terminating)
    not_ready = sorted(pod.name for pod in live if not pod.ready)
    if not_ready:
        return "pods not Ready: " + _names(not_ready)
    if floor is not None and len(live) < floor.pods and now - floor.since < REPLACEMENT_WAIT:
        return f"replacements not created yet ({len(live)} of {floor.pods} pods)"
    return ""


def _covered(pod: PodRecord, budgets: Sequence[object]) -> bool:
    return any(selector_matches(selector, pod.labels) for selector in budgets)


def _names(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
