"""A workload's desired config hash computed straight from the API, with no cache.

This is the independent check of what the controller converges to: tests and benchmarks
compare it with the hash on each pod template, and it is the basis for drift reports.
It reads every source afresh, then applies the same model functions as the reconciler
(projection, then `assess`: visibility and hashing), so the two can never disagree on the rules.
"""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, SECRETS
from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadView,
    assess,
    project_source,
    project_workload,
)
from kube_nudge.strategies.registry import product_defaults

JSON = dict[str, Any]


async def read_source(client: KubeClient, ref: SourceRef) -> JSON | None:
    """The ConfigMap or Secret ``ref``, or None if it doesn't exist."""
    resource = CONFIGMAPS if ref.kind is SourceKind.CONFIGMAP else SECRETS
    try:
        return await client.get(resource.path(ref.namespace, ref.name))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def desired_hash(
    client: KubeClient,
    kind: WorkloadKind,
    workload: JSON,
    hmac_key: bytes,
    *,
    cache: dict[SourceRef, JSON | None] | None = None,
) -> str:
    """The hash ``workload``'s pod template should carry given the sources as they are now.

    ``cache`` (optional) lets a caller checking many workloads read each source once.
    """
    # Every registered strategy's: a template may name one's stand-ins, whose sources count.
    defaults = product_defaults(compat=True)
    view = project_workload(workload, kind.template_path, defaults, opted_out_too=True)
    if view is None:  # pragma: no cover - opted_out_too always projects
        raise AssertionError("projection refused a workload")
    views = await source_views(client, view, cache if cache is not None else {})
    return assess(view, views.__getitem__, hmac_key).desired


async def source_views(
    client: KubeClient,
    view: WorkloadView,
    cache: dict[SourceRef, JSON | None],
    *,
    compat: bool = True,
) -> dict[SourceRef, SourceView | None]:
    """The projection of every source ``view`` consumes, read from the API (each source
    once per ``cache``); None for a source that doesn't exist."""
    views: dict[SourceRef, SourceView | None] = {}
    for ref in view.consumed:
        if ref not in cache:
            cache[ref] = await read_source(client, ref)
        obj = cache[ref]
        views[ref] = project_source(obj, compat=compat) if obj is not None else None
    return views
