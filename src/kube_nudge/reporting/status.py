"""Which pods run which config: the report behind ``kube-nudge status``.

Read straight from the API (no controller needs to run): every workload of the built-in
kinds in scope, what it consumes, the hash it should run (with the installation key), the
hash recorded on it, and its pods counted by the config they run: the hash on their own
template annotation, or the hash of a change a strategy delivered in place, as that
strategy reads it on the pod (its ``PodConfig`` hook).
With ``include_opted_out``, workloads that never opted in are audited too: pods that
started before the data they consume last changed run stale config (env and `subPath`
consumers certainly so: those never refresh in a running pod).

Without the key (a user who may not get the key Secret) no hash can be compared, so a
workload is `current` only on facts that need no key: every pod was created in a later
second than its sources' data last changed (an agent's reload proves no data), and its own
rollout completed. A pod older than that change may run old config, or the change touched only keys
it doesn't read: no reader without the key can tell, so the workload is `unverified` (never
`current`, never `drift`). The same holds for a workload whose sources or pods the reader may
not see.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.pods import matching_pods, pod_started
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import (
    CONFIG_HASH,
    SourceRef,
    WorkloadView,
    assess,
    project_workload,
)
from kube_nudge.model.progress import rollout_complete
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.model.runners import Runner, project_runner, run_by, runs_elsewhere
from kube_nudge.model.status import DRIFT_STATES, UNVERIFIED, PodFacts, classify
from kube_nudge.reporting.desired import JSON, read_allowed, source_views
from kube_nudge.reporting.hmackey import THROWAWAY_KEY
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.strategies.registry import (
    delivers,
    model_extensions,
    pod_config,
    pod_reloaded_at,
    product_defaults,
)

__all__ = [
    "DRIFT_STATES",
    "SCHEMA",
    "UNVERIFIED",
    "WorkloadStatus",
    "collect",
    "status_document",
]

SCHEMA = "kube-nudge.io/status/v1"
NO_HASH = "-"  # pods (or templates) that carry no config hash


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    """One workload's row of the report (names and hashes only, never values)."""

    namespace: str
    kind: str
    name: str
    opted_in: bool
    strategy: str | None
    state: str
    """current | rolling | reloading | drift | held | stale | rolled-back | failed |
    not-adopted | notify-only | unverified"""
    detail: str
    desired_hash: str | None
    applied_hash: str | None
    pods: Mapping[str, int] = field(default_factory=dict)
    """Pod count by the config hash the pod runs ("-": none known)."""
    stale_pods: int = 0
    """Pods that started before the data they consume last changed."""
    sources: tuple[str, ...] = ()
    """``kind/[namespace/]name [keys]`` for each source that counts."""
    rolled_out: bool | None = None
    """Whether its own controller finished rolling out the current template (None: the
    kind has no rollout to follow, e.g. CronJob)."""
    waiting_helps: bool = True
    """False for an `unverified` row that no wait can settle: a source or its pods can't be
    read, or it has no pod whose start could tell (not in the JSON document)."""

    @property
    def drift(self) -> bool:
        """True when the pods do not run (and are not rolling to) the config they should."""
        return self.state in DRIFT_STATES

    @property
    def unverified(self) -> bool:
        """True when the reader can't tell whether the pods run the config in the cluster."""
        return self.state == UNVERIFIED

    def as_json(self) -> dict[str, Any]:
        """The row as the JSON document's ``workloads[]`` entry (docs/schemas/status-v1.json)."""
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "name": self.name,
            "optedIn": self.opted_in,
            "strategy": self.strategy,
            "state": self.state,
            "detail": self.detail,
            "desiredHash": self.desired_hash,
            "appliedHash": self.applied_hash,
            "pods": dict(self.pods),
            "stalePods": self.stale_pods,
            "sources": list(self.sources),
            "rolledOut": self.rolled_out,
        }


def status_document(rows: Iterable[WorkloadStatus], *, desired_known: bool) -> dict[str, Any]:
    """The ``-o json`` document; its JSON Schema is docs/schemas/status-v1.json."""
    rows = list(rows)
    return {
        "schema": SCHEMA,
        "drift": any(row.drift for row in rows),
        "desiredKnown": desired_known,
        "workloads": [row.as_json() for row in rows],
    }


async def collect(
    client: KubeClient,
    *,
    namespaces: Iterable[str | None],
    hmac_key: bytes | None,
    include_opted_out: bool = False,
    kinds: Iterable[WorkloadKind] = BUILTIN_KINDS,
    compat: bool = False,
    key_location: str = "the installation key's Secret",
    clock: Clock = SYSTEM_CLOCK,
    csi_secrets: bool = False,
) -> list[WorkloadStatus]:
    """Every opted-in workload in ``namespaces`` (None: all), and with
    ``include_opted_out`` every other one that runs stale pods, sorted. Without
    ``hmac_key``, rows say what needs no key; ``key_location`` (``namespace/name`` of the key
    Secret) is named in the detail of those that can't be verified. ``clock`` tells whether
    a rollout window is open; ``csi_secrets``: as the controller's ``--csi-secrets``."""
    # Every registered strategy is valid.
    defaults = product_defaults(compat=compat, csi_secrets=csi_secrets)
    cache: dict[SourceRef, JSON | None] = {}
    rows = []
    kinds = tuple(kinds)
    for namespace in namespaces:
        runners = await _runners(client, namespace, kinds)
        for kind in kinds:
            async for page, _ in client.list_pages(kind.resource.path(namespace)):
                for obj in page:
                    view = project_workload(
                        obj,
                        kind.template_path,
                        defaults,
                        opted_out_too=True,
                        kind=kind.resource.group_kind,
                    )
                    if view is None or (not view.settings.enabled and not include_opted_out):
                        continue
                    name = str((obj.get("metadata") or {}).get("name") or "")
                    row = await _status(
                        client, kind, name, view, hmac_key, cache, compat, key_location, clock
                    )
                    row = replace(row, rolled_out=_rolled_out(kind, obj, view, runners))
                    if row.state == "current" and row.rolled_out is False and row.opted_in:
                        row = replace(row, state="rolling", detail="its rollout is in progress")
                    if view.settings.enabled or row.state == "stale":
                        rows.append(row)
    return sorted(rows, key=lambda r: (r.namespace, r.kind, r.name))


async def _runners(
    client: KubeClient, namespace: str | None, kinds: Iterable[WorkloadKind]
) -> dict[tuple[str, str], Runner]:
    """The workloads in ``namespace`` (None: all) running another's template (an Argo
    Rollout with ``workloadRef``), by (namespace, the owner as ``Kind.group/NAME``)."""
    found: dict[tuple[str, str], Runner] = {}
    for kind in kinds:
        if not runs_elsewhere(kind.resource.group_kind):
            continue
        async for page, _ in client.list_pages(kind.resource.path(namespace)):
            for obj in page:
                if (runner := project_runner(kind.resource.group_kind, obj)) is not None:
                    own = str((obj.get("metadata") or {}).get("namespace") or "")
                    found[(own, runner.owner)] = runner
    return found


def _rolled_out(
    kind: WorkloadKind,
    obj: Mapping[str, Any],
    view: WorkloadView,
    runners: Mapping[tuple[str, str], Runner],
) -> bool | None:
    """Whether ``obj``'s current template runs everywhere: as the workload running it says
    (``model/runners.py``), else as its own status does."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    runner = runners.get((view.namespace, f"{kind.resource.group_kind}/{name}"))
    if runner is not None:
        return run_by(runner, view.generation).done
    return rollout_complete(kind.resource.group_kind, obj)


async def _status(
    client: KubeClient,
    kind: WorkloadKind,
    name: str,
    view: WorkloadView,
    hmac_key: bytes | None,
    cache: dict[SourceRef, JSON | None],
    compat: bool,
    key_location: str,
    clock: Clock,
) -> WorkloadStatus:
    """One workload's row: its sources read (or found forbidden), its pods counted, its
    state classified (``model.status``)."""
    forbidden = await _forbidden_sources(client, view, cache)
    if forbidden:
        return await _unreadable(client, kind, name, view, forbidden)
    views = await source_views(client, view, cache, compat=compat)
    assessment = assess(view, views.__getitem__, hmac_key or THROWAWAY_KEY)
    desired = assessment.desired if hmac_key is not None else None
    pods, stale, unproven = await _pods(client, view, assessment.changed_at)
    sources = tuple(
        f"{ref.display(view.namespace)} "
        f"[{', '.join(sorted(use.keys)) if use.keys is not None else '*'}]"
        for ref, use in sorted(assessment.visible.items())
    )
    certainly = [
        ref.display(view.namespace)
        for ref, use in assessment.visible.items()
        if use.never_refreshed
    ]
    unkeyed = None if hmac_key is not None else f"get on secret {key_location}"
    facts = PodFacts(pods, stale, unproven, never_refreshed=certainly)
    state, detail = classify(
        view,
        desired,
        assessment.missing,
        facts,
        now=clock.now(),
        delivers=delivers(view.settings.strategy),
        without=unkeyed,
        extensions=model_extensions(),
    )
    waiting_helps = state != UNVERIFIED or (pods is not None and bool(pods))
    return WorkloadStatus(
        namespace=view.namespace,
        kind=kind.resource.kind,
        name=name,
        opted_in=view.settings.enabled,
        strategy=view.settings.strategy if view.settings.enabled else None,
        state=state,
        detail=detail,
        desired_hash=desired,
        applied_hash=view.applied_hash,
        pods=pods or {},
        stale_pods=stale,
        sources=sources,
        waiting_helps=waiting_helps,
    )


async def _forbidden_sources(
    client: KubeClient, view: WorkloadView, cache: dict[SourceRef, JSON | None]
) -> list[SourceRef]:
    """The sources ``view`` consumes that the reader may not get (the others are cached)."""
    return await read_allowed(client, view.consumed, cache)


async def _unreadable(
    client: KubeClient, kind: WorkloadKind, name: str, view: WorkloadView, refs: list[SourceRef]
) -> WorkloadStatus:
    """The row of a workload that consumes a source the reader may not get: nothing about
    its config can be told (not even whether its pods are stale), only its pods counted."""
    pods, _, _ = await _pods(client, view, None)
    needs = ", ".join(f"get on {ref.kind} {ref.namespace}/{ref.name}" for ref in refs)
    return WorkloadStatus(
        namespace=view.namespace,
        kind=kind.resource.kind,
        name=name,
        opted_in=view.settings.enabled,
        strategy=view.settings.strategy if view.settings.enabled else None,
        state=UNVERIFIED,
        detail=f"cannot verify: it reads what this user may not ({needs} is forbidden)",
        desired_hash=None,
        applied_hash=view.applied_hash,
        pods=pods or {},
        sources=tuple(f"{ref.display(view.namespace)} [?]" for ref in sorted(view.consumed)),
        waiting_helps=False,
    )


async def _pods(
    client: KubeClient, view: WorkloadView, changed_at: float | None
) -> tuple[dict[str, int] | None, int, int]:
    """Pod count by the config each runs (None when the pods may not be listed), how many
    are stale, and how many others don't prove they read the config after its last change.
    The proof is the pod's creation in a later second than the change: both times are the
    API server's (a start time is the node's clock, which may run ahead), cut to the second.
    A reload by its agent proves nothing without the key: it may have read the old files,
    or other data."""
    if not view.pod_selector:
        return {}, 0, 0
    counts: Counter[str] = Counter()
    stale = unproven = 0
    try:
        for pod in await matching_pods(client, view.namespace, view.pod_selector):
            metadata = pod.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                continue
            annotations = metadata.get("annotations") or {}
            counts[_running_hash(annotations)] += 1
            # Its config was last read at start, or when it last re-read it in place (as a
            # strategy that delivers in place reads its annotations: ``PodReloads``).
            loaded_at = pod_reloaded_at(annotations) or 0.0
            read_at = max(pod_started(pod) or 0.0, loaded_at)
            if changed_at is not None and read_at and changed_at > read_at:
                stale += 1
            elif changed_at is not None:
                created = parse_timestamp(metadata.get("creationTimestamp"))
                if created is None or created < changed_at + 1:  # times are cut to the second
                    unproven += 1
    except ApiError as exc:
        if exc.status != 403:
            raise
        return None, 0, 0
    return dict(counts), stale, unproven


def _running_hash(annotations: Mapping[str, Any]) -> str:
    """The config a pod runs: one a strategy delivered to it in place (``PodConfig``), else
    its template's."""
    return pod_config(annotations) or str(annotations.get(CONFIG_HASH) or NO_HASH)
