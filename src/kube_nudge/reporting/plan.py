"""The inputs of ``kube-nudge plan``: the manifests to apply, read against the live cluster
(read-only, what ``status`` needs), or against base manifests with no cluster at all.

Applying is taken to be what ``kubectl apply`` (client- or server-side), Helm and the GitOps
tools do: a field the input sets wins, a field it doesn't set stays (kube-nudge's own
annotations among them). The plan itself is ``planning.py``'s.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.pods import matching_pods
from kube_nudge.kube.resources import source_resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import (
    SourceRef,
    SourceView,
    WorkloadDefaults,
    WorkloadView,
    project_source,
    project_workload,
)
from kube_nudge.model.annotation_values import SHARE_ALL
from kube_nudge.model.podtemplate import get_template
from kube_nudge.model.source_kinds import source_kind_rows, source_row_of
from kube_nudge.reporting.desired import project_read, read_allowed
from kube_nudge.reporting.planning import Candidate, Eviction, Inputs

__all__ = ["Objects", "api_object", "live_inputs", "offline_inputs", "sort_objects"]

JSON = dict[str, Any]
#: What ``kubectl apply`` (client-side) records of what it applied last.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass
class Objects:
    """The manifests that matter to a plan, as the API would store them."""

    sources: dict[SourceRef, JSON] = field(default_factory=dict)
    workloads: dict[tuple[WorkloadKind, str, str], JSON] = field(default_factory=dict)


def api_object(obj: Mapping[str, Any], namespace: str) -> JSON:
    """``obj`` as the API server stores it: in ``namespace`` unless it names one, a
    source's write-only text data (its row's ``string_data``: a Secret's ``stringData``)
    folded into its data (base64), as the server does on write."""
    stored: JSON = copy.deepcopy(dict(obj))
    metadata = stored.setdefault("metadata", {})
    metadata.setdefault("namespace", namespace)
    row = source_row_of(str(stored.get("apiVersion")), str(stored.get("kind")))
    written = row.string_data if row is not None and row.data else None
    if row is not None and written is not None and stored.get(written):
        into = row.data[0].name
        data = dict(stored.get(into) or {})
        for key, value in (stored.pop(written) or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        stored[into] = data
    return stored


def sort_objects(
    objects: Iterable[Mapping[str, Any]], namespace: str, kinds: Sequence[WorkloadKind]
) -> Objects:
    """The ConfigMaps, Secrets and workloads of ``objects`` (anything else is not config)."""
    found = Objects()
    by_kind = {(k.resource.api_version, k.resource.kind): k for k in kinds}
    sources = {(source_resource(row.kind).api_version, row.api_kind): row.kind
               for row in source_kind_rows() if row.holds_data}  # fmt: skip
    for obj in objects:
        stored = api_object(obj, namespace)
        key = (str(stored.get("apiVersion")), str(stored.get("kind")))
        name, ns = stored["metadata"]["name"], stored["metadata"]["namespace"]
        if key in sources:
            found.sources[SourceRef(sources[key], ns, name)] = stored
        elif key in by_kind:
            found.workloads[(by_kind[key], ns, name)] = stored
    return found


def applied(live: Mapping[str, Any], given: Mapping[str, Any]) -> JSON:
    """``live`` once ``given`` is applied as ``kubectl apply`` does: what ``given`` sets wins;
    what it doesn't set stays, unless the last apply set it (its
    ``kubectl.kubernetes.io/last-applied-configuration``): then it goes. Maps are merged key
    by key, lists replaced."""
    last = _last_applied(live)
    return _merged(live, given, last)


def _last_applied(live: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    try:
        last = json.loads(annotations.get(LAST_APPLIED) or "{}")
    except ValueError:
        return {}
    return last if isinstance(last, Mapping) else {}


def _merged(live: Mapping[str, Any], given: Mapping[str, Any], last: Mapping[str, Any]) -> JSON:
    merged: JSON = copy.deepcopy(dict(live))
    for key in last.keys() - given.keys():
        merged.pop(key, None)  # set by the last apply, not by this one: deleted
    for key, value in given.items():
        was = last.get(key)
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value, was if isinstance(was, Mapping) else {})
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def changes_template(
    live: Mapping[str, Any], given: Mapping[str, Any], path: Sequence[str]
) -> bool:
    """Whether applying ``given`` changes ``live``'s pod template: some field it sets
    differs (fields it doesn't set, defaulted by the API server or written by kube-nudge,
    don't count)."""
    mine, theirs = get_template(given, tuple(path)), get_template(live, tuple(path))
    return mine is not None and not _within(mine, theirs)


def _within(given: object, live: object) -> bool:
    """Every field of ``given`` is in ``live`` with the same value (lists item by item)."""
    if isinstance(given, Mapping):
        return isinstance(live, Mapping) and all(_within(v, live.get(k)) for k, v in given.items())
    if isinstance(given, list):
        return (
            isinstance(live, list)
            and len(given) == len(live)
            and all(_within(a, b) for a, b in zip(given, live, strict=True))
        )
    return given == live


def _project(
    obj: Mapping[str, Any], kind: WorkloadKind, defaults: WorkloadDefaults
) -> WorkloadView:
    view = project_workload(obj, kind.template_path, defaults, opted_out_too=True,
                            kind=kind.resource.group_kind)  # fmt: skip
    if view is None:  # pragma: no cover - opted_out_too always projects
        raise AssertionError("the projection refused a workload")
    return view


def _changed(
    before: Mapping[SourceRef, JSON | None], after: Mapping[SourceRef, JSON], compat: bool
) -> frozenset[SourceRef]:
    """The sources whose data or settings ``after`` changes (or creates)."""
    changed = set()
    for ref, obj in after.items():
        old = before.get(ref)
        new_view = project_source(obj, compat=compat)
        if old is None:
            changed.add(ref)
            continue
        old_view = project_source(old, compat=compat)
        if (old_view.state, old_view.settings) != (new_view.state, new_view.settings):
            changed.add(ref)
    return frozenset(changed)


def _views(
    objects: Mapping[SourceRef, JSON | None], compat: bool
) -> dict[SourceRef, SourceView | None]:
    return {
        ref: project_read(ref, obj, compat=compat) if obj is not None else None
        for ref, obj in objects.items()
    }


async def live_inputs(
    client: KubeClient,
    given: Objects,
    *,
    defaults: WorkloadDefaults,
    hmac_key: bytes | None,
    kinds: Sequence[WorkloadKind] = BUILTIN_KINDS,
) -> Inputs:
    """The plan's inputs against the cluster: every source of the input as it is now, every
    workload that reads a changed one (or is in the input), and the pods a changed source's
    ``pod-selector`` names. Reads only; a source this user may not get makes its readers
    ``unknown``."""
    compat = defaults.compat
    now_objects, forbidden = await _read_sources(client, given.sources)
    readable = {
        ref: applied(live, obj) if (live := now_objects.get(ref)) is not None else obj
        for ref, obj in given.sources.items()
        if ref not in forbidden
    }
    changed = _changed(now_objects, readable, compat) | forbidden
    after_views = _views(readable, compat)
    candidates = await _live_candidates(client, given, changed, after_views, defaults, kinds)
    wanted = {ref for c in candidates for v in (c.view, c.live) if v for ref in v.consumed}
    more, more_forbidden = await _read_sources(client, wanted - now_objects.keys() - forbidden)
    now_objects |= more
    forbidden |= more_forbidden
    before = _views(now_objects, compat)
    evictions = [await _eviction(client, ref, after_views[ref]) for ref in sorted(changed)
                 if ref in after_views]  # fmt: skip
    return Inputs(
        candidates=[_unreadable(c, forbidden) for c in candidates],
        before=before, after=before | after_views, changed=changed,
        evictions=tuple(e for e in evictions if e is not None), hmac_key=hmac_key,
        unreadable=changed & forbidden,
    )  # fmt: skip


async def _read_sources(
    client: KubeClient, refs: Iterable[SourceRef]
) -> tuple[dict[SourceRef, JSON | None], frozenset[SourceRef]]:
    """Each source as it is now (None: absent), and those this user may not get."""
    found: dict[SourceRef, JSON | None] = {}
    forbidden = await read_allowed(client, refs, found)
    return found, frozenset(forbidden)


async def _live_candidates(
    client: KubeClient,
    given: Objects,
    changed: frozenset[SourceRef],
    after_views: Mapping[SourceRef, SourceView | None],
    defaults: WorkloadDefaults,
    kinds: Sequence[WorkloadKind],
) -> list[Candidate]:
    """The workloads in scope that read a changed source or are in the input, as they are
    and as they will be; those the input creates."""
    pending = dict(given.workloads)
    candidates = []
    for namespace in _namespaces(changed, after_views, given):
        for kind in kinds:
            async for page, _ in client.list_pages(kind.resource.path(namespace)):
                for obj in page:
                    meta = obj.get("metadata") or {}
                    mine = pending.pop(
                        (kind, str(meta.get("namespace")), str(meta.get("name"))), None
                    )
                    c = _live_candidate(kind, obj, mine, defaults)
                    if mine is not None or _reads(c.view, changed):
                        candidates.append(c)
    for (kind, _, name), obj in pending.items():
        candidates.append(Candidate(kind, name, _project(obj, kind, defaults)))
    return candidates


def _reads(view: WorkloadView, changed: frozenset[SourceRef]) -> bool:
    """Whether ``view`` names a changed source (counted or excluded: a plan says which)."""
    return bool(changed & (view.consumed.keys() | view.settings.exclude))


def _live_candidate(
    kind: WorkloadKind, live: JSON, mine: JSON | None, defaults: WorkloadDefaults
) -> Candidate:
    name = str(live["metadata"]["name"])
    now = _project(live, kind, defaults)
    if mine is None:
        return Candidate(kind, name, now, live=now)
    path = kind.template_path
    return Candidate(kind, name, _project(applied(live, mine), kind, defaults), live=now,
                     template_changes=changes_template(live, mine, path))  # fmt: skip


def _namespaces(
    changed: frozenset[SourceRef],
    after_views: Mapping[SourceRef, SourceView | None],
    given: Objects,
) -> list[str | None]:
    """Where readers of the changed sources may be: their namespaces, those they are shared
    with (``share-with``; ``*``: every namespace, None), and the input workloads'."""
    found: set[str] = {ref.namespace for ref in changed} | {ns for _, ns, _ in given.workloads}
    for ref in changed:
        view = after_views.get(ref)
        if view is not None and SHARE_ALL in view.settings.share_with:
            return [None]
        if view is not None:
            found |= view.settings.share_with
    return [*sorted(found)]


def _unreadable(c: Candidate, forbidden: frozenset[SourceRef]) -> Candidate:
    reads = set(c.view.consumed) | (set(c.live.consumed) if c.live else set())
    needs = tuple(
        f"get on {ref.kind} {ref.namespace}/{ref.name}" for ref in sorted(reads & forbidden)
    )
    return Candidate(c.kind, c.name, c.view, c.live, c.template_changes, needs) if needs else c


async def _eviction(client: KubeClient, ref: SourceRef, view: SourceView | None) -> Eviction | None:
    """The pods ``ref``'s ``pod-selector`` names now, if it has one."""
    if view is None or not view.settings.pod_selector:
        return None
    selector = view.settings.pod_selector
    try:
        pods = [p for p in await matching_pods(client, ref.namespace, selector)
                if not (p.get("metadata") or {}).get("deletionTimestamp")]  # fmt: skip
    except ApiError as exc:
        if exc.status != 403:
            raise
        return Eviction(ref, selector, None)
    return Eviction(ref, selector, len(pods))


def offline_inputs(base: Objects, head: Objects, *, defaults: WorkloadDefaults) -> Inputs:
    """The plan's inputs from manifests alone: ``base`` before, ``head`` after. A source
    neither names is taken to exist unchanged; what needs the live state (the recorded
    hashes, the flap cap, a stopped line, how many pods a selector names) is not known."""
    compat = defaults.compat
    after_objects: dict[SourceRef, JSON | None] = dict(head.sources)
    after_objects |= {ref: None for ref in base.sources.keys() - head.sources.keys()}
    changed = _changed(base.sources, head.sources, compat) | (
        base.sources.keys() - head.sources.keys()
    )
    candidates = []
    for (kind, _, name), obj in head.workloads.items():
        old = base.workloads.get((kind, obj["metadata"]["namespace"], name))
        view = _project(obj, kind, defaults)
        was = _project(old, kind, defaults) if old is not None else None
        moved = old is not None and get_template(old, kind.template_path) != get_template(
            obj, kind.template_path
        )
        if was is None or moved or _reads(view, changed):
            candidates.append(Candidate(kind, name, view, live=was, template_changes=moved))
    unknown = _unnamed(candidates, base.sources.keys() | head.sources.keys())
    before = _views({**unknown, **base.sources}, compat)
    after = _views({**unknown, **after_objects}, compat)
    evictions = tuple(
        Eviction(ref, source.settings.pod_selector, None)
        for ref in sorted(changed)
        if (source := after.get(ref)) is not None and source.settings.pod_selector
    )
    return Inputs(candidates, before, after, frozenset(changed), evictions, None, live=False)


def _unnamed(candidates: Iterable[Candidate], named: Iterable[SourceRef]) -> dict[SourceRef, JSON]:
    """A stand-in for each source a candidate reads that no manifest names: present, with
    every key read from it, the same before and after (so it never changes, nor is missing)."""
    keys: dict[SourceRef, set[str]] = {}
    for c in candidates:
        for view in (c.view, c.live):
            for ref, use in view.consumed.items() if view is not None else ():
                # Every key read and every key required (a subPath mount of an items volume
                # reads fewer keys than the volume needs to exist).
                keys.setdefault(ref, set()).update((use.keys or frozenset()) | use.required_keys)
    known = set(named)
    return {
        ref: {"apiVersion": "v1", "kind": ref.kind.title(),
              "metadata": {"name": ref.name, "namespace": ref.namespace},
              "data": dict.fromkeys(sorted(ks), "")}
        for ref, ks in keys.items() if ref not in known
    }  # fmt: skip
