"""The plan itself, once its inputs are read: for every workload a change reaches, what
kube-nudge does with it (``model.preview.predict``, the controller's rules), its rollout
wave, and the pods a ``pod-selector`` evicts. Reading the inputs is ``plan.py``'s (live)
and ``offline.py``'s (manifests only); this is the same for both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model import SourceRef, SourceView, WorkloadView, assess
from kube_nudge.model.extensions import StrategyModel
from kube_nudge.model.gates import Sibling, display_workload
from kube_nudge.model.preview import ACTING, Prediction, Verb, predict
from kube_nudge.model.tracking import track
from kube_nudge.reporting.hmackey import THROWAWAY_KEY

__all__ = [
    "ORDER",
    "SCHEMA",
    "Candidate",
    "Change",
    "Consumer",
    "Eviction",
    "Plan",
    "PlanRow",
    "SourceChange",
    "plan_rows",
]

#: The version of the ``-o json`` document (docs/schemas/plan-v2.json).
SCHEMA = "kube-nudge.io/plan/v2"
#: The order of the rows: what acts first, then what is held or can't be told, the
#: unaffected last.
ORDER = (Verb.ROLL, Verb.RELOAD, Verb.EVICT, Verb.NOTIFY, Verb.HOLD, Verb.UNKNOWN, Verb.NONE)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A workload the change may reach, as it will be once the input is applied."""

    kind: WorkloadKind
    name: str
    view: WorkloadView
    """Its view once the input is applied (its own manifest in the input wins)."""
    live: WorkloadView | None = None
    """Its view before the input is applied: in the cluster now, or (offline) in the base
    manifests; None: the input creates it."""
    template_changes: bool = False
    """Its own pod template changes in the input: it rolls whatever kube-nudge does."""
    unreadable: tuple[str, ...] = ()
    """Permissions the reader lacks to tell its sources (``get on secret ns/name``)."""

    @property
    def display(self) -> str:
        """As the CLI takes it: ``-n NS kind/name``."""
        return display_workload(self.kind.resource.kind, self.view.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Eviction:
    """The pods a changed source's ``kube-nudge.io/pod-selector`` names."""

    source: SourceRef
    selector: str
    pods: int | None
    """How many match now; None when not known (offline, or not allowed to list pods)."""


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One workload's (or one pod-selector's) line of the plan: names and keys only."""

    namespace: str
    kind: str
    name: str
    action: Verb
    reason: str
    sources: tuple[str, ...] = ()
    """``configmap/app [KEY, ...]``: each source whose change reaches it, with the keys."""
    strategy: str | None = None
    hold: str | None = None
    until: float | None = None
    wave: int | None = None
    template_changes: bool = False

    def as_json(self) -> dict[str, Any]:
        """The row as ``workloads[]`` of the JSON document (docs/schemas/plan-v2.json)."""
        return {
            "namespace": self.namespace, "kind": self.kind, "name": self.name,
            "action": str(self.action), "reason": self.reason, "sources": list(self.sources),
            "strategy": self.strategy, "hold": self.hold, "until": self.until,
            "wave": self.wave, "templateChanges": self.template_changes,
        }  # fmt: skip


class Change(StrEnum):
    """How the input changes a source."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    UNREADABLE = "unreadable"
    """Live: this user may not get it, so what changes is not known."""


@dataclass(frozen=True, slots=True)
class Consumer:
    """A row of the plan that reads a changed source: a workload, or a pod-selector's pods."""

    namespace: str
    kind: str
    name: str
    action: Verb
    stranded: bool = False
    """The input deletes config of the source it requires (the source, or a key a reference
    needs): its new pods can't start until that config is back, whatever kube-nudge does
    (an opted-in workload holds)."""

    def as_json(self) -> dict[str, Any]:
        """As ``sources[].consumers[]`` of the JSON document."""
        return {
            "namespace": self.namespace, "kind": self.kind, "name": self.name,
            "action": str(self.action), "stranded": self.stranded,
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class SourceChange:
    """One source the input changes: key names (never values nor digests), its consumers."""

    ref: SourceRef
    change: Change
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    """Keys in it before and after whose data differs."""
    unread: tuple[str, ...] = ()
    """The added, removed and changed keys no consumer's pod template reads."""
    annotations: bool = False
    """Its kube-nudge annotations change (share-with, ignore, pod-selector, ...)."""
    consumers: tuple[Consumer, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """As ``sources[]`` of the JSON document."""
        return {
            "kind": str(self.ref.kind), "namespace": self.ref.namespace, "name": self.ref.name,
            "change": str(self.change), "added": list(self.added),
            "removed": list(self.removed), "changed": list(self.changed),
            "unread": list(self.unread), "annotationsChange": self.annotations,
            "consumers": [c.as_json() for c in self.consumers],
        }  # fmt: skip


@dataclass
class Plan:
    """Every row, the changed sources, and what the plan could not know."""

    rows: list[PlanRow]
    live: bool
    notes: list[str] = field(default_factory=list)
    sources: list[SourceChange] = field(default_factory=list)

    @property
    def acting(self) -> bool:
        """Whether anything rolls, reloads or is evicted."""
        return any(row.action in ACTING for row in self.rows)

    @property
    def stranded(self) -> list[Consumer]:
        """The consumers the input leaves without config they require, once each."""
        found = {(c.namespace, c.kind, c.name): c for s in self.sources for c in s.consumers
                 if c.stranded}  # fmt: skip
        return [found[k] for k in sorted(found)]

    def counts(self) -> dict[Verb, int]:
        """Rows by action."""
        found: dict[Verb, int] = defaultdict(int)
        for row in self.rows:
            found[row.action] += 1
        return dict(found)

    def summary(self) -> str:
        """One line: ``3 workloads roll, 1 reloads, 12 unaffected``."""
        counts = self.counts()
        parts = []
        for verb, singular, plural in _SUMMARY:
            n = counts.get(verb, 0)
            if not n:
                continue
            words = singular if n == 1 else plural
            if verb is Verb.EVICT:
                parts.append(f"{n} pod-selector{'' if n == 1 else 's'} {words}")
            elif not parts:
                parts.append(f"{n} workload{'' if n == 1 else 's'} {words}")
            else:
                parts.append(f"{n} {words}")
        if parts:
            return ", ".join(parts)
        if len(self.sources) == 1:
            return "1 source changes, no workload reads it"
        if self.sources:
            return f"{len(self.sources)} sources change, no workload reads them"
        return "nothing this change reaches"

    def document(self) -> dict[str, Any]:
        """The ``-o json`` document (docs/schemas/plan-v2.json)."""
        return {
            "schema": SCHEMA,
            "live": self.live,
            "summary": self.summary(),
            "acting": self.acting,
            "stranded": bool(self.stranded),
            "notes": list(self.notes),
            "sources": [source.as_json() for source in self.sources],
            "workloads": [row.as_json() for row in self.rows],
        }


_SUMMARY = (
    (Verb.ROLL, "rolls", "roll"),
    (Verb.RELOAD, "reloads", "reload"),
    (Verb.EVICT, "evicts pods", "evict pods"),
    (Verb.NOTIFY, "notifies", "notify"),
    (Verb.HOLD, "held", "held"),
    (Verb.UNKNOWN, "unknown", "unknown"),
    (Verb.NONE, "unaffected", "unaffected"),
)


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the plan is made from, read by ``plan.py`` (live) or ``offline.py``."""

    candidates: list[Candidate]
    before: Mapping[SourceRef, SourceView | None]
    """Every source a candidate reads, as it is now (or in the base manifests)."""
    after: Mapping[SourceRef, SourceView | None]
    """The same once the input is applied."""
    changed: frozenset[SourceRef]
    """The sources whose data (or settings) the input changes, creates or deletes."""
    evictions: tuple[Eviction, ...] = ()
    hmac_key: bytes | None = None
    """The installation key (live, when the reader may get it): the recorded hashes can be
    compared. None: the pods are taken to run the config as it is now."""
    live: bool = True
    unreadable: frozenset[SourceRef] = frozenset()
    """Changed sources this user may not get (live): what changes in them is not known."""


def plan_rows(
    inputs: Inputs,
    *,
    now: float,
    models: Mapping[str, StrategyModel],
    capped: Mapping[str, bool],
    records: Mapping[str, bool],
) -> list[PlanRow]:
    """Every candidate's row (and each pod-selector's) with rollout waves, in ``ORDER`` of
    their actions, then by name.
    ``capped``: whether each strategy restarts pods; ``records``: whether it records what
    it adopted on the workload."""
    predictions = {
        (c.view.namespace, c.kind.resource.kind, c.name): _predict(
            c, inputs, now, models, capped, records
        )
        for c in inputs.candidates
    }
    rows = [
        _row(c, predictions[(c.view.namespace, c.kind.resource.kind, c.name)])
        for c in inputs.candidates
    ]
    rows = _waves(rows, inputs.candidates)
    rows += [_eviction_row(e, inputs.live) for e in inputs.evictions]
    return sorted(rows, key=lambda r: (ORDER.index(r.action), r.namespace, r.kind, r.name))


def _predict(
    c: Candidate,
    inputs: Inputs,
    now: float,
    models: Mapping[str, StrategyModel],
    capped: Mapping[str, bool],
    records: Mapping[str, bool],
) -> Prediction:
    if c.unreadable:
        needs = ", ".join(c.unreadable)
        return Prediction(Verb.UNKNOWN, f"cannot tell: this user may not {needs}")
    if c.live is None:
        if not c.view.settings.enabled:
            return Prediction(
                Verb.NONE, "created by the input; not opted in (kube-nudge.io/enabled)"
            )
        return Prediction(
            Verb.NONE, "created by the input: kube-nudge adopts it as its pods start, "
            "restarting nothing",
        )  # fmt: skip
    key = inputs.hmac_key or THROWAWAY_KEY
    view = c.view
    before = assess(c.live, inputs.before.get, key)
    after = assess(view, inputs.after.get, key)
    strategy = view.settings.strategy
    siblings = _siblings(c, inputs, now, key) if inputs.live else None
    # With the key the recorded hash decides; a strategy that records nothing on the
    # workload (notify: the controller remembers it in memory) is taken to run the config
    # as it is, as a running controller adopted it.
    known = inputs.hmac_key is not None and (
        c.live.applied_hash is not None or records.get(strategy, True)
    )
    return predict(
        view, before, after, now=now, capped=capped.get(strategy, True),
        strategy=models.get(strategy), applied_known=known, changed=inputs.changed,
        siblings=siblings, display=c.display,
    )  # fmt: skip


def _siblings(c: Candidate, inputs: Inputs, now: float, key: bytes) -> list[Sibling]:
    """The other candidates reading a changed source ``c`` reads: what a stopped line is
    made of. Their order is left out: the waves are told apart (``_waves``), not held."""
    mine = {ref for ref in inputs.changed if ref in c.view.consumed}
    found = []
    for other in inputs.candidates:
        if other is c or other.live is None or not mine & other.view.consumed.keys():
            continue
        desired = assess(other.view, inputs.after.get, key).desired
        found.append(Sibling(
            name=f"{other.kind.resource.kind} {other.view.namespace}/{other.name}",
            order=None, tracking=track(other.live, now),
            pending=desired != other.view.applied_hash, released_at=other.live.released_at,
        ))  # fmt: skip
    return found


def _row(c: Candidate, p: Prediction) -> PlanRow:
    sources = tuple(
        f"{ref.display(c.view.namespace)} [{', '.join(keys)}]" if keys
        else f"{ref.display(c.view.namespace)} (appears or goes)"
        for ref, keys in sorted(p.changes.items())
    )  # fmt: skip
    row = PlanRow(
        namespace=c.view.namespace, kind=c.kind.resource.kind, name=c.name, action=p.verb,
        reason=p.reason, sources=sources,
        strategy=c.view.settings.strategy if c.view.settings.enabled else None,
        hold=p.hold, until=p.until, template_changes=c.template_changes,
    )  # fmt: skip
    if c.template_changes:
        return _own_rollout(row)
    return row


def _own_rollout(row: PlanRow) -> PlanRow:
    """A workload whose own template changes rolls anyway; what kube-nudge adds to it."""
    joined = {
        Verb.ROLL: "kube-nudge writes the new hash on it too: one rollout brings both",
        Verb.RELOAD: "kube-nudge reloads the pods still running meanwhile; the new pods "
                     "start with the new config",
        Verb.NOTIFY: "kube-nudge only announces the config change; the new pods start with "
                     "the new config",
        Verb.HOLD: f"kube-nudge holds its own write ({row.reason}), but the new pods start "
                   "with the new config anyway",
    }.get(row.action, f"kube-nudge adds nothing ({row.reason})")  # fmt: skip
    return replace(
        row, action=Verb.ROLL, reason=f"its own pod template changes in the input: {joined}"
    )


def _waves(rows: list[PlanRow], candidates: Iterable[Candidate]) -> list[PlanRow]:
    """Rows that roll or reload in a ``kube-nudge.io/rollout-order`` get their wave: 1 +
    how many lower orders acting on a source they share go first; a rollout judged by an
    analysis (``kube-nudge.io/analysis``) says which template gates what comes after it."""
    by_name = {(c.view.namespace, c.kind.resource.kind, c.name): c for c in candidates}
    acting = [r for r in rows if r.action in (Verb.ROLL, Verb.RELOAD)]
    out = []
    for row in rows:
        c = by_name[(row.namespace, row.kind, row.name)]
        order = c.view.settings.rollout_order
        waved = row in acting
        if row.action is Verb.ROLL and (analysis := c.view.settings.analysis) is not None:
            row = replace(row, reason=row.reason + (
                f"; then analysis {analysis} judges it: it counts as complete only once that "
                "passes, and as failed when it fails"
            ))  # fmt: skip
        if not waved or order is None:
            out.append(row)
            continue
        lower: dict[int, list[str]] = defaultdict(list)
        for other in acting:
            oc = by_name[(other.namespace, other.kind, other.name)]
            o_order = oc.view.settings.rollout_order
            if o_order is not None and o_order < order and set(row.sources) & set(other.sources):
                lower[o_order].append(other.name)
        wave = len(lower) + 1
        after = "; ".join(f"order {o}: {', '.join(sorted(n))}" for o, n in sorted(lower.items()))
        reason = row.reason + (f"; wave {wave}, after {after} completes" if lower else "; wave 1")
        out.append(replace(row, wave=wave, reason=reason))
    return out


def _eviction_row(e: Eviction, live: bool) -> PlanRow:
    selector = f"kube-nudge.io/pod-selector {e.selector} of {e.source.display(e.source.namespace)}"
    if e.pods is None:
        known = "not known offline" if not live else "this user may not list pods"
        return PlanRow(e.source.namespace, "Pod", e.selector, Verb.EVICT,
                       f"the pods matching {selector} are evicted (how many: {known})")  # fmt: skip
    if e.pods == 0:
        return PlanRow(e.source.namespace, "Pod", e.selector, Verb.NONE,
                       f"no pod matches {selector}")  # fmt: skip
    return PlanRow(
        e.source.namespace, "Pod", e.selector, Verb.EVICT,
        f"{e.pods} pod(s) matching {selector} are evicted through the Eviction API (their "
        "PodDisruptionBudgets pace it)",
    )  # fmt: skip
