"""What switching from Reloader or Wave to kube-nudge (``--compat``) will do, workload by
workload, before the switch: the report behind ``kube-nudge migrate``.

For every workload carrying a Reloader or Wave annotation: whether kube-nudge opts it in
under ``--compat`` and which sources count for it, which of its peer annotations (and what
the peer left on its pod template) have no meaning here and what replaces them, and what
kube-nudge does at first sight, by the controller's own rule (``model.decide`` with the
pods' start): adopt what runs (nothing restarts), roll once (its pods already run stale
config), or hold (its config is missing). Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.pods import oldest_container_start
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import (
    Adopt,
    Apply,
    Hold,
    SourceRef,
    WorkloadDefaults,
    WorkloadMemory,
    WorkloadSettings,
    assess,
    decide,
)
from kube_nudge.model.compat import (
    AUTO,
    CM_AUTO,
    CM_RELOAD,
    SEARCH,
    SECRET_AUTO,
    SECRET_RELOAD,
    WAVE_CONFIGMAPS,
    WAVE_ON,
    WAVE_SECRETS,
)
from kube_nudge.model.projection import project_workload
from kube_nudge.reporting.desired import source_views
from kube_nudge.reporting.hmackey import THROWAWAY_KEY
from kube_nudge.strategies.registry import product_defaults

__all__ = ["REPLACED", "SCHEMA", "Migration", "MigrationRow", "collect_migration"]

SCHEMA = "kube-nudge.io/migrate/v1"
#: Peer annotations and markers with no meaning here, and what replaces each.
REPLACED: Mapping[str, str] = {
    "configmaps.exclude.reloader.stakater.com/reload": "kube-nudge.io/exclude: configmap/NAME,...",
    "secrets.exclude.reloader.stakater.com/reload": "kube-nudge.io/exclude: secret/NAME,...",
    "reloader.stakater.com/rollout-strategy": "kube-nudge.io/strategy (rollout writes the "
    "hash on the template; Argo Rollouts through --workload)",
    "deployment.reloader.stakater.com/pause-period": "kube-nudge.io/debounce (several changes, "
    "one rollout) and kube-nudge.io/max-rollouts (a cap per window)",
    "reloader.stakater.com/last-reloaded-from": "kube-nudge.io/config-hash, which kube-nudge "
    "writes; Reloader's stays on the template, harmless",
    "wave.pusher.com/config-hash": "kube-nudge.io/config-hash, which kube-nudge writes; Wave's "
    "stays on the template, harmless",
}
_PEER_PREFIXES = ("reloader.stakater.com/", "configmap.reloader.stakater.com/",
                  "secret.reloader.stakater.com/", "wave.pusher.com/")  # fmt: skip
#: What --compat maps (model/compat.py's table).
_MAPPED = frozenset({AUTO, CM_AUTO, SECRET_AUTO, CM_RELOAD, SECRET_RELOAD, SEARCH, WAVE_ON,
                     WAVE_CONFIGMAPS, WAVE_SECRETS})  # fmt: skip


@dataclass(frozen=True, slots=True)
class MigrationRow:
    """One workload's line: names only, never values."""

    namespace: str
    kind: str
    name: str
    peers: tuple[str, ...]
    """reloader, wave."""
    opted_in: bool
    counts: str
    """Which sources count for it under --compat, in words."""
    at_switch: str
    """none (adopted as it runs), roll (stale pods: rolled once), hold, unknown."""
    reason: str
    unmapped: tuple[str, ...] = ()
    """``annotation → what replaces it`` for each peer setting with no meaning here."""

    def as_json(self) -> dict[str, Any]:
        """The row of ``-o json`` (docs/schemas/migrate-v1.json)."""
        return {
            "namespace": self.namespace, "kind": self.kind, "name": self.name,
            "peers": list(self.peers), "optedIn": self.opted_in, "counts": self.counts,
            "atSwitch": self.at_switch, "reason": self.reason, "unmapped": list(self.unmapped),
        }  # fmt: skip


@dataclass
class Migration:
    """Every row; ``rolls`` when the switch would restart something."""

    rows: list[MigrationRow] = field(default_factory=list)

    @property
    def rolls(self) -> bool:
        """Whether some workload rolls at the switch."""
        return any(row.at_switch == "roll" for row in self.rows)

    def summary(self) -> str:
        """One line: how many, and what happens at the switch."""
        rolls = sum(r.at_switch == "roll" for r in self.rows)
        unmapped = sum(bool(r.unmapped) for r in self.rows)
        return (
            f"{len(self.rows)} workload(s) with Reloader or Wave annotations: {rolls} roll at "
            f"the switch, {unmapped} with settings that have no meaning here"
        )

    def document(self) -> dict[str, Any]:
        """The ``-o json`` document."""
        return {
            "schema": SCHEMA, "summary": self.summary(), "rolls": self.rolls,
            "workloads": [row.as_json() for row in self.rows],
        }  # fmt: skip


async def collect_migration(
    client: KubeClient,
    *,
    namespaces: Iterable[str | None],
    now: float,
    kinds: Sequence[WorkloadKind] = BUILTIN_KINDS,
) -> Migration:
    """Every workload in ``namespaces`` (None: all) that carries a peer annotation."""
    defaults = product_defaults(compat=True)
    cache: dict[SourceRef, Any] = {}
    found = Migration()
    for namespace in namespaces:
        for kind in kinds:
            async for page, _ in client.list_pages(kind.resource.path(namespace)):
                for obj in page:
                    if _peers(obj):
                        found.rows.append(await _row(client, kind, obj, defaults, cache, now))
    found.rows.sort(key=lambda r: (r.namespace, r.kind, r.name))
    return found


def _peers(obj: Mapping[str, Any]) -> tuple[str, ...]:
    names = list((obj.get("metadata") or {}).get("annotations") or {})
    found = []
    if any("reloader.stakater.com/" in n for n in names):
        found.append("reloader")
    if any(n.startswith("wave.pusher.com/") for n in names):
        found.append("wave")
    return tuple(found)


async def _row(
    client: KubeClient, kind: WorkloadKind, obj: Mapping[str, Any], defaults: WorkloadDefaults,
    cache: dict[SourceRef, Any], now: float,
) -> MigrationRow:  # fmt: skip
    meta = obj.get("metadata") or {}
    view = project_workload(obj, kind.template_path, defaults, opted_out_too=True,
                            kind=kind.resource.group_kind)  # fmt: skip
    assert view is not None  # nosec B101 # opted_out_too always projects
    row = MigrationRow(
        namespace=view.namespace, kind=kind.resource.kind, name=str(meta.get("name")),
        peers=_peers(obj), opted_in=view.settings.enabled, counts=_counts(view.settings),
        at_switch="none", reason="not opted in under --compat", unmapped=_unmapped(obj),
    )  # fmt: skip
    if not view.settings.enabled:
        return row
    try:
        views = await source_views(client, view, cache)
        oldest = (
            await oldest_container_start(client, view.namespace, view.pod_selector)
            if view.pod_selector
            else None
        )
    except ApiError as exc:
        if exc.status != 403:
            raise
        return replace(row, at_switch="unknown",
                       reason=f"cannot tell: this user may not read {exc.path}")  # fmt: skip
    assessment = assess(view, views.get, THROWAWAY_KEY)
    decision = decide(view, assessment, WorkloadMemory(), now, oldest_pod_start=oldest)
    at, reason = _at_switch(decision)
    return replace(row, at_switch=at, reason=reason)


def _at_switch(decision: object) -> tuple[str, str]:
    if isinstance(decision, Adopt):
        return "none", "adopted as it runs: its hash is recorded, nothing restarts"
    if isinstance(decision, Apply) and decision.stale_pods:
        return "roll", (
            "rolled once: its pods started before their config last changed "
            "(kube-nudge.io/adopt: never-roll adopts it as it runs instead)"
        )
    if isinstance(decision, Hold):
        return "hold", decision.message
    return "none", "nothing to do"


def _counts(settings: WorkloadSettings) -> str:
    if settings.only_named is not None:
        return "only the sources named in its reload lists"
    if settings.only_matched:
        return "only sources annotated reloader.stakater.com/match (search)"
    if settings.only_kinds is not None:
        return "only its " + " and ".join(sorted(f"{k}s" for k in settings.only_kinds))
    return "every ConfigMap and Secret its pod template reads"


def _unmapped(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """Each peer setting (on the workload, its pod template or its containers' env) with no
    meaning here, and what replaces it."""
    template = (obj.get("spec") or {}).get("template") or {}
    names = set((obj.get("metadata") or {}).get("annotations") or {})
    names |= set((template.get("metadata") or {}).get("annotations") or {})
    found = [f"{name} → {REPLACED[name]}" for name in sorted(names) if name in REPLACED]
    found += [
        f"{name} → no equivalent (ignored)"
        for name in sorted(names)
        if name.startswith(_PEER_PREFIXES) and name not in REPLACED and name not in _MAPPED
    ]
    containers = (template.get("spec") or {}).get("containers") or []
    found += [
        f"env {var['name']} (Reloader's env-vars strategy) → kube-nudge.io/config-hash; the "
        "variable stays, harmless (removing it restarts the pods once)"
        for c in containers for var in c.get("env") or []
        if str(var.get("name", "")).startswith("STAKATER_")
    ]  # fmt: skip
    return tuple(found)
