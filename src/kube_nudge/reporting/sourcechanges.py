"""The "changed sources" of ``kube-nudge plan``: each ConfigMap and Secret the input
changes, the names of its added, removed and changed keys (never a value, nor a digest of
one), and the rows of the plan that read it (its consumers), or none: so a change of a key
no pod reads, or of a source no workload of the input or the cluster reads, is shown too.

A consumer is ``stranded`` when the input deletes config it requires (the source, or a key
a reference needs), as the model's own ``missing_requirements`` tells: a new pod of it can't
start until that config is back, whatever kube-nudge does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kube_nudge.model import SourceRef, SourceView, assess, missing_requirements
from kube_nudge.model.digests import Digest
from kube_nudge.model.sourcestate import ABSENT, SourceState
from kube_nudge.reporting.hmackey import THROWAWAY_KEY
from kube_nudge.reporting.planning import (
    Candidate,
    Change,
    Consumer,
    Inputs,
    PlanRow,
    SourceChange,
)

__all__ = ["source_changes"]

Rows = Mapping[tuple[str, str, str], PlanRow]


def source_changes(inputs: Inputs, rows: Sequence[PlanRow]) -> list[SourceChange]:
    """Every source the input changes, by kind, namespace and name."""
    by_name = {(r.namespace, r.kind, r.name): r for r in rows}
    return [_source_change(ref, inputs, by_name) for ref in sorted(inputs.changed)]


def _source_change(ref: SourceRef, inputs: Inputs, rows: Rows) -> SourceChange:
    change, added, removed, changed = _keys(ref, inputs)
    readers = [c for c in inputs.candidates if _reads(c, ref)]
    consumers = [_consumer(c, ref, inputs, rows) for c in readers]
    pods = [(ref.namespace, "Pod", e.selector) for e in inputs.evictions if e.source == ref]
    selectors = [rows[key] for key in pods if key in rows]
    consumers += [Consumer(r.namespace, r.kind, r.name, r.action) for r in selectors]
    keys = sorted({*added, *removed, *changed})
    before, after = inputs.before.get(ref), inputs.after.get(ref)
    annotations = None not in (before, after) and _settings(before) != _settings(after)
    return SourceChange(
        ref, change, added, removed, changed,
        unread=() if selectors else _unread(keys, readers, ref), annotations=annotations,
        consumers=tuple(sorted(consumers, key=lambda c: (c.namespace, c.kind, c.name))),
    )  # fmt: skip


def _keys(
    ref: SourceRef, inputs: Inputs
) -> tuple[Change, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """How ``ref`` changes, and the names of its added, removed and changed keys."""
    old, new = _digests(inputs.before.get(ref)), _digests(inputs.after.get(ref))
    if ref in inputs.unreadable or (old is None and new is None):
        return Change.UNREADABLE, (), (), ()
    if old is None:
        return Change.CREATED, tuple(sorted(new or {})), (), ()
    if new is None:
        return Change.DELETED, (), tuple(sorted(old)), ()
    added = tuple(sorted(new.keys() - old.keys()))
    removed = tuple(sorted(old.keys() - new.keys()))
    changed = tuple(sorted(k for k in old.keys() & new.keys() if old[k] != new[k]))
    return Change.CHANGED, added, removed, changed


def _digests(view: SourceView | None) -> Mapping[str, Digest] | None:
    """Compared here only, never shown: a digest of a low-entropy value could be reversed."""
    return view.state.digests if view is not None and view.state.present else None


def _settings(view: SourceView | None) -> object:
    return view.settings if view is not None else None


def _reads(c: Candidate, ref: SourceRef) -> bool:
    """Whether ``c`` names ``ref``, now or once the input is applied (excluded too)."""
    views = (c.view, c.live) if c.live is not None else (c.view,)
    return any(ref in v.consumed or ref in v.settings.exclude for v in views)


def _consumer(c: Candidate, ref: SourceRef, inputs: Inputs, rows: Rows) -> Consumer:
    row = rows[(c.view.namespace, c.kind.resource.kind, c.name)]
    return Consumer(row.namespace, row.kind, row.name, row.action, _strands(c, ref, inputs))


def _strands(c: Candidate, ref: SourceRef, inputs: Inputs) -> bool:
    """Whether the input makes ``ref`` miss what ``c`` requires of it, and only then: the
    model's own missing requirements, among those that count for ``c``."""
    use = c.view.consumed.get(ref)
    if use is None:
        return False
    state = _state(inputs.after.get(ref))
    mine = missing_requirements({ref: use}, {ref: state}, namespace=c.view.namespace)
    if not mine:
        return False
    now = set(assess(c.view, inputs.after.get, THROWAWAY_KEY).missing)
    was = set(assess(c.live, inputs.before.get, THROWAWAY_KEY).missing) if c.live else set()
    return bool(set(mine) & (now - was))


def _state(view: SourceView | None) -> SourceState:
    return view.state if view is not None else ABSENT


def _unread(keys: Sequence[str], readers: Sequence[Candidate], ref: SourceRef) -> tuple[str, ...]:
    """Of ``keys``, those no reader's pod template reads, before or after the input."""
    read: set[str] = set()
    for c in readers:
        for view in (c.view, c.live):
            use = view.consumed.get(ref) if view is not None else None
            if use is None:
                continue
            if use.keys is None:  # every key: envFrom, a whole volume
                return ()
            read |= use.keys
    return tuple(k for k in keys if k not in read)
