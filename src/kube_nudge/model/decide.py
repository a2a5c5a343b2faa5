"""The pure decision of what to do for one workload: no I/O, the clock is an argument.

`assess` computes the desired hash and what is missing from the sources that count;
`decide` compares it with what the pods run (as recorded on the workload, or remembered)
and returns one of `Noop`, `Adopt`, `Hold` or `Apply`. The reconciler carries the decision
out through the workload's strategy and then remembers the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from kube_nudge.model.hashing import (
    ABSENT,
    SourceState,
    changed_keys,
    config_hash,
    key_id,
    missing_requirements,
)
from kube_nudge.model.memory import WorkloadMemory, recent_rollouts
from kube_nudge.model.projection import SourceView, WorkloadView
from kube_nudge.model.references import Consumption, SourceRef
from kube_nudge.model.source_kinds import known_once_mounted
from kube_nudge.model.visibility import visible_sources

__all__ = [
    "HOLD_REASONS",
    "MAX_RECORDED_ROLLOUTS",
    "Adopt",
    "Apply",
    "Assessment",
    "Decision",
    "Hold",
    "Noop",
    "StrategyHold",
    "assess",
    "changes_field",
    "decide",
    "describe_apply",
    "describe_changes",
    "describe_versions",
    "input_warnings",
]

MAX_RECORDED_ROLLOUTS = 10
"""Rollout times kept on the workload; caps above this are enforced in memory only. The
cap needs only the last N times, and recording more would grow the workload object (and
every watch event of it) with each rollout."""
MIN_RETRY = 0.05

SourceLookup = Callable[[SourceRef], SourceView | None]


@dataclass(frozen=True, slots=True)
class Assessment:
    """The config a workload should run now, from the sources that count for it."""

    visible: Mapping[SourceRef, Consumption]
    refused: tuple[SourceRef, ...]
    states: Mapping[SourceRef, SourceState]
    desired: str
    key_id: str
    """The key the desired hash is made under (`hashing.key_id`)."""
    missing: tuple[str, ...]
    """Required sources or keys that don't exist (names only, never values)."""
    changed_at: float | None = None
    """The latest change of the data of any source that counts (Unix seconds), if known."""
    versions: Mapping[SourceRef, int] = field(default_factory=dict)
    """resourceVersion of each source that counts and exists."""
    unmounted: str | None = None
    """When a Secrets Store CSI class counts and its versions are known: the hash as it was
    while none was known (every CSI class left out). A workload recorded at it has since
    had its pods mount the classes: it adopts ``desired`` (model/mounts.py)."""


def assess(view: WorkloadView, source_of: SourceLookup, hmac_key: bytes) -> Assessment:
    """Visibility, states, desired hash and missing requirements of `view`; each source
    is looked up once (``source_of`` may be the caches' read: the release gates assess
    their siblings with it)."""
    read: dict[SourceRef, SourceView | None] = {}

    def source_of_once(ref: SourceRef) -> SourceView | None:
        if ref not in read:
            read[ref] = source_of(ref)
        return read[ref]

    visibility = visible_sources(
        view.consumed,
        view.namespace,
        view.settings.exclude,
        lambda ref: s.settings if (s := source_of_once(ref)) is not None else None,
        only_matched=view.settings.only_matched,
    )
    states: dict[SourceRef, SourceState] = {}
    for ref in visibility.visible:
        source = read[ref]
        states[ref] = source.state if source is not None else ABSENT
    # A source known once mounted (a CSI class) no pod mounted yet has unknown versions,
    # not absent ones: left out.
    hashed = {
        ref: use
        for ref, use in visibility.visible.items()
        if not known_once_mounted(ref.kind) or states[ref].present
    }
    held_in_objects = {ref: use for ref, use in hashed.items() if not known_once_mounted(ref.kind)}
    missing = missing_requirements(visibility.visible, states, namespace=view.namespace)
    changes = [
        source.data_changed_at
        for ref in visibility.visible
        if (source := read[ref]) is not None and source.data_changed_at is not None
    ]
    return Assessment(
        visible=visibility.visible,
        refused=visibility.refused,
        states=states,
        desired=config_hash(hmac_key, hashed, states),
        key_id=key_id(hmac_key),
        missing=tuple(missing),
        changed_at=max(changes, default=None),
        versions={
            ref: source.resource_version
            for ref in visibility.visible
            if (source := read[ref]) is not None and source.resource_version
        },
        unmounted=(
            config_hash(hmac_key, held_in_objects, states)
            if len(held_in_objects) < len(hashed)
            else None
        ),
    )


def input_warnings(view: WorkloadView, assessment: Assessment) -> list[tuple[str, str]]:
    """The Warning Events (reason, message) a pass posts about what it read: annotations
    that don't parse, and sources it may not read (not shared with the workload's
    namespace, or absent). Empty for a workload read cleanly."""
    warnings = [("InvalidAnnotation", "; ".join(view.errors))] if view.errors else []
    for ref in assessment.refused:
        warnings.append((
            "SourceNotShared",
            f"ignoring {ref}: it does not list namespace {view.namespace!r} in "
            "kube-nudge.io/share-with (or does not exist)",
        ))  # fmt: skip
    return warnings


@dataclass(frozen=True, slots=True)
class Noop:
    """The pods run the desired config."""


@dataclass(frozen=True, slots=True)
class Adopt:
    """Record `config_hash` as what the pods run, restarting nothing: at first sight, or
    (`new_key`) when the recorded hashes were made under another installation key."""

    config_hash: str
    new_key: bool = False
    mounted: bool = False
    """The pods just mounted Secrets Store CSI classes whose versions were unknown when
    the workload's hash was recorded: they run the versions they mounted."""


#: Every reason the model's own rules hold a rollout for (``Hold.reason``: the ``reason``
#: label of ``kube_nudge_holds_total`` and the state ``held-<reason>``); a strategy declares
#: its own in ``StrategyModel.hold_reasons``. The metrics export each at 0 from the start.
HOLD_REASONS: Final = (
    "invalid", "missing", "flapping", "line-stopped", "window", "approval", "order", "turn",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Hold:
    """Not now. `reason` is the metric label, `event_reason` the Event's reason."""

    reason: str  # one of HOLD_REASONS, or of the strategy's StrategyModel.hold_reasons
    event_reason: str
    message: str
    retry_after: float | None = None
    """Seconds until the workload is looked at again (may be sooner than the hold ends)."""
    until: float | None = None
    """When the hold ends (Unix seconds), when that is known and later than the next look:
    the time shown (``kube-nudge plan``'s until); else ``retry_after`` tells it."""


@dataclass(frozen=True, slots=True)
class Apply:
    """Bring the pods to `config_hash`."""

    config_hash: str
    changes: Mapping[SourceRef, list[str]] | None
    """Changed keys per source (empty list: the source appeared or went); None when the
    previous state is unknown (changed while kube-nudge was not watching)."""
    rolled_at: tuple[float, ...]
    """Recent rollout times to record on the workload, this one (`now`) last."""
    had_baseline: bool
    """The workload carries an adoption baseline that this apply supersedes."""
    stale_pods: bool = False
    """First sight of a workload whose pods started before their config last changed."""
    uncopied: tuple[SourceRef, ...] = ()
    """With a strategy that uses stand-ins: sources the template names directly again (a
    re-applied manifest), to point back at their stand-ins."""


Decision = Noop | Adopt | Hold | Apply


class StrategyHold(Protocol):
    """What ``decide`` asks of the workload's strategy (its ``model.extensions.StrategyModel``,
    which is made of this module's types: it is not imported here)."""

    @property
    def hold(self) -> Callable[[WorkloadView, Assessment, WorkloadMemory], Hold | None] | None:
        """A hold of its own for a workload whose config is complete, or None."""
        ...


def _no_template(view: WorkloadView) -> Hold:
    """The hold of a workload with no pod template where its kind keeps one; one that runs
    another object's template (an Argo Rollout's ``spec.workloadRef``) is told which."""
    path = ".".join(view.template_path)
    ref = view.template_elsewhere
    if ref is None:
        return Hold("invalid", "NoPodTemplate", f"no pod template at {path}")
    return Hold(
        "invalid", "NoPodTemplate",
        f"no pod template at {path}: it runs the template of {ref} (spec.workloadRef); opt "
        f"in {ref} instead (kube-nudge.io/enabled), whose template kube-nudge annotates and "
        "Argo Rollouts rolls out",
    )  # fmt: skip


def decide(
    view: WorkloadView,
    assessment: Assessment,
    memory: WorkloadMemory,
    now: float,
    *,
    capped: bool = True,
    oldest_pod_start: float | None = None,
    strategy: StrategyHold | None = None,
) -> Decision:
    """What to do for `view` at wall-clock time `now` (Unix seconds). `capped` applies the
    flap cap (strategies that restart nothing may not need it). `oldest_pod_start` is when
    the longest-running container of the workload's pods started, if the caller looked
    (only needed at first sight). `strategy`: what the workload's strategy adds to the
    model, asked for a hold of its own once the config is complete."""
    if not view.has_template:
        return _no_template(view)
    applied = memory.applied or view.applied_hash
    if applied is None:
        if _stale_at_first_sight(view, assessment, oldest_pod_start):
            # Opting in is how a team fixes stale pods: baselining them would keep them so.
            return Apply(assessment.desired, None, (now,), had_baseline=False, stale_pods=True)
        return Adopt(assessment.desired)
    if memory.applied is None and view.key_id not in (None, assessment.key_id):
        # The key Secret was lost or replaced: every hash changed, the config did not.
        return Adopt(assessment.desired, new_key=True)
    if assessment.missing:
        return Hold("missing", "ConfigMissing", "not rolling: " + "; ".join(assessment.missing))
    if (held := _own_hold(strategy, view, assessment, memory)) is not None:
        return held
    uncopied = _uncopied(view, assessment)
    if (current := _current(assessment, applied, uncopied)) is not None:
        return current
    settings = view.settings
    recent = recent_rollouts(memory.rollouts, view.rolled_at, now, settings.rollout_window)
    recent = [t for t in recent if t > view.released_at]  # an operator released the cap
    if capped and len(recent) >= settings.max_rollouts:
        wait = recent[0] + settings.rollout_window - now
        # No countdown in the message: the Event recorder folds repeats of one message into
        # one Event's count, and a workload can be held for hours.
        return Hold(
            "flapping",
            "RolloutsCapped",
            f"held: already rolled {settings.max_rollouts} times within "
            f"{settings.rollout_window:g} s (kube-nudge.io/max-rollouts); the latest config "
            "rolls as soon as the window allows",
            retry_after=max(wait, MIN_RETRY),
        )
    keep = min(settings.max_rollouts, MAX_RECORDED_ROLLOUTS) - 1
    changes = None
    if memory.rolled_with is not None:
        changes = changed_keys(assessment.visible, memory.rolled_with, assessment.states)
    return Apply(
        config_hash=assessment.desired,
        changes=changes,
        rolled_at=(*recent[max(len(recent) - keep, 0) :], now),
        had_baseline=bool(view.baseline_hash),
        uncopied=uncopied if assessment.desired == applied else (),
    )


def _current(
    assessment: Assessment, applied: str, uncopied: tuple[SourceRef, ...]
) -> Decision | None:
    """Noop when the pods run the desired config; Adopt when they do but its hash was
    recorded while the Secrets Store CSI classes they mount were unknown (model/mounts.py)."""
    if uncopied:
        return None
    if assessment.desired == applied:
        return Noop()
    if applied == assessment.unmounted:
        return Adopt(assessment.desired, mounted=True)
    return None


def _own_hold(
    strategy: StrategyHold | None,
    view: WorkloadView,
    assessment: Assessment,
    memory: WorkloadMemory,
) -> Hold | None:
    """The hold the workload's strategy asks for, if it has a say."""
    if strategy is None or strategy.hold is None:
        return None
    return strategy.hold(view, assessment, memory)


def _uncopied(view: WorkloadView, assessment: Assessment) -> tuple[SourceRef, ...]:
    """With a strategy that uses stand-ins, once it has rolled: the sources that the
    template names directly although they could stand in (present, counted, in its own
    namespace)."""
    if view.rolled_to is None:
        return ()
    return tuple(
        ref
        for ref in sorted(view.direct_sources)
        if ref in assessment.visible
        and ref.namespace == view.namespace
        and assessment.states.get(ref, ABSENT).present
    )


def _stale_at_first_sight(
    view: WorkloadView, assessment: Assessment, oldest_pod_start: float | None
) -> bool:
    return (
        view.settings.roll_stale_on_adoption
        and not assessment.missing
        and oldest_pod_start is not None
        and assessment.changed_at is not None
        # Timestamps have whole seconds: a change in the same second as the start counts as
        # seen (a GitOps apply creates both at once), so only a strictly later one is stale.
        and assessment.changed_at > oldest_pod_start
    )


def describe_changes(
    changes: Mapping[SourceRef, list[str]] | None,
    states: Mapping[SourceRef, SourceState],
    namespace: str,
) -> str:
    """Human wording of `Apply.changes`, naming sources and keys, never values."""
    if changes is None:
        return "config changed while kube-nudge was not watching"
    parts = []
    for ref, keys in changes.items():
        label = ref.display(namespace)
        if keys:
            parts.append(f"{label} keys [{', '.join(keys)}] changed")
        else:
            parts.append(
                f"{label} appeared" if states.get(ref, ABSENT).present else f"{label} removed"
            )
    return "; ".join(parts) if parts else "consumed sources changed"


def describe_apply(plan: Apply, states: Mapping[SourceRef, SourceState], namespace: str) -> str:
    """Human wording of why `plan` applies (sources and keys, never values)."""
    if plan.stale_pods:
        return "opted in with pods that started before their config last changed"
    if plan.uncopied:
        names = ", ".join(ref.display(namespace) for ref in plan.uncopied)
        return f"the template names {names} directly again (a re-applied manifest?)"
    return describe_changes(plan.changes, states, namespace)


def changes_field(plan: Apply) -> dict[str, list[str]] | None:
    """``plan.changes`` as a JSON log field: changed keys (names only) by source."""
    if plan.changes is None:
        return None
    return {str(ref): keys for ref, keys in plan.changes.items()}


def describe_versions(plan: Apply, assessment: Assessment, namespace: str) -> str:
    """`configmap/app@12345, ...`: the versions of the changed sources, for Events."""
    refs = sorted(plan.changes) if plan.changes is not None else sorted(assessment.visible)
    return ", ".join(
        f"{ref.display(namespace)}@{assessment.versions[ref]}"
        for ref in refs
        if ref in assessment.versions
    )
