"""What kube-nudge will do with a workload once some config is applied: the decision of
``kube-nudge plan``, made by the controller's own rules (pure, the clock an argument).

``predict`` runs exactly what a reconcile runs on the workload after the change: the
assessment of its sources (``assess``: which count, which keys, the keyed hash), ``decide``
(adopt, hold for missing config or the flap cap, the strategy's own hold), the release gates
(``model.gates``: a stopped line, the window, approval), and the strategy's way of
delivering (``StrategyModel.delivery``: roll, reload in place, or only announce). Nothing
here is a second copy of a rule: a plan and a reconcile can't disagree on one.

The caller says what the workload's pods run as far as kube-nudge knows (``applied``) and
what the sources held before (``before``: the states a running controller delivered last,
so the changed keys are named); without the live state (offline, or without the
installation key) it assumes the pods run the config as it was.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from kube_nudge.model.decide import Adopt, Apply, Assessment, Hold, Noop, decide
from kube_nudge.model.extensions import Delivery, StrategyModel
from kube_nudge.model.gates import Sibling, gate
from kube_nudge.model.hashing import changed_keys
from kube_nudge.model.memory import WorkloadMemory
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.references import SourceRef

__all__ = ["ACTING", "Prediction", "Verb", "predict"]


class Verb(StrEnum):
    """What kube-nudge does with a workload when the change is applied."""

    ROLL = "roll"
    RELOAD = "reload"
    EVICT = "evict"
    NOTIFY = "notify"
    HOLD = "hold"
    NONE = "none"
    UNKNOWN = "unknown"


#: What restarts or reloads something (``kube-nudge plan`` exits 1 when any is planned).
ACTING = frozenset({Verb.ROLL, Verb.RELOAD, Verb.EVICT})


@dataclass(frozen=True, slots=True)
class Prediction:
    """One workload's planned outcome, in words (names and keys, never values)."""

    verb: Verb
    reason: str
    changes: Mapping[SourceRef, tuple[str, ...]] = field(default_factory=dict)
    """The sources that count whose data changes, with the keys it reads that change
    (empty: the source appears or goes)."""
    hold: str | None = None
    """A hold's reason (``Hold.reason``: missing, flapping, window, approval, ...)."""
    until: float | None = None
    """When a hold ends at the latest (Unix seconds), when that is known: for a rollout
    window, its real next opening."""


def predict(
    view: WorkloadView,
    before: Assessment,
    after: Assessment,
    *,
    now: float,
    capped: bool,
    strategy: StrategyModel | None,
    applied_known: bool,
    changed: Collection[SourceRef],
    siblings: Sequence[Sibling] | None,
    display: str,
) -> Prediction:
    """What a reconcile of ``view`` does at ``now`` once the sources are as in ``after``.

    ``applied_known``: the hash recorded on the workload can be compared (the installation
    key is known); else the pods are taken to run ``before``. ``changed``: the sources the
    change touches. ``siblings``: the other workloads of the changed sources (the gates'
    input), or None when the live state is not known (offline): then only the gates that
    need none are applied. ``display``: the workload as the CLI takes it (``-n NS
    kind/name``), for messages."""
    if not view.settings.enabled:
        return Prediction(Verb.NONE, "not opted in (kube-nudge.io/enabled)")
    memory = WorkloadMemory(
        applied=None if applied_known else before.desired, rolled_with=before.states
    )
    decision = decide(view, after, memory, now, capped=capped, strategy=strategy)
    if isinstance(decision, Hold):
        return _held(decision, now, _changes(before, after))
    if isinstance(decision, Adopt):
        return _adopted(decision)
    if isinstance(decision, Noop):
        return Prediction(Verb.NONE, _why_nothing(view, before, after, changed))
    hold = gate(
        view, now=now, changed_at=now, siblings=siblings or (), window=view.settings.window,
        workload_name=display,
    )  # fmt: skip
    changes = {ref: tuple(keys) for ref, keys in (decision.changes or {}).items()}
    if hold is not None:
        return _held(hold, now, changes)
    delivery = _delivery(view, decision, after, strategy)
    verb = Verb(delivery.verb)
    return Prediction(verb, delivery.detail or _delivered(verb), changes)


def _delivery(
    view: WorkloadView, plan: Apply, after: Assessment, strategy: StrategyModel | None
) -> Delivery:
    if strategy is None or strategy.delivery is None:
        return Delivery("roll")
    return strategy.delivery(view, plan, after)


def _delivered(verb: Verb) -> str:
    if verb is Verb.ROLL:
        return "its pod template gets the new hash: it rolls"
    if verb is Verb.RELOAD:
        return "reloaded in place by each pod's agent, no restart"
    return "announced (Event ConfigChanged), never restarted"


def _held(hold: Hold, now: float, changes: Mapping[SourceRef, tuple[str, ...]]) -> Prediction:
    """A hold, until when it ends: its own time (a window's real next opening, however far),
    else the next look, which for the other holds is their end."""
    until = hold.until
    if until is None and hold.retry_after is not None:
        until = now + hold.retry_after
    return Prediction(Verb.HOLD, hold.message, changes, hold=hold.reason, until=until)


def _adopted(decision: Adopt) -> Prediction:
    if decision.new_key:
        return Prediction(Verb.NONE, "adopted again under the current installation key")
    if decision.mounted:
        return Prediction(Verb.NONE, "adopts the Secrets Store CSI versions its pods mounted")
    return Prediction(
        Verb.NONE, "not adopted yet: kube-nudge first records what its pods run, restarting nothing"
    )


def _changes(before: Assessment, after: Assessment) -> dict[SourceRef, tuple[str, ...]]:
    """The changed keys of the sources that count (as ``decide`` names them)."""
    return {
        ref: tuple(keys)
        for ref, keys in changed_keys(after.visible, before.states, after.states).items()
    }


def _why_nothing(
    view: WorkloadView, before: Assessment, after: Assessment, changed: Collection[SourceRef]
) -> str:
    """Why a workload that reads a changed source does nothing: what it reads does not
    change (other keys), or the source doesn't count for it (excluded, ignored, not shared)."""
    mine = sorted(ref for ref in changed if ref in view.consumed or ref in view.settings.exclude)
    if not mine:
        return "reads none of the changed sources"
    why = []
    for ref in mine:
        shown = ref.display(view.namespace)
        if ref in view.settings.exclude:
            why.append(f"{shown} is excluded (kube-nudge.io/exclude)")
        elif ref in after.refused:
            why.append(f"{shown} is not shared with namespace {view.namespace} (share-with)")
        elif ref not in after.visible:
            why.append(f"{shown} is ignored (kube-nudge.io/ignore, or not matched)")
        else:
            why.append(f"{shown}: no key it reads changes")
    return "; ".join(why)
