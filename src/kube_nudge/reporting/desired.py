"""The sources a workload consumes, read straight from the API with no cache.

What the read-only commands (`status`, `wait`, `migrate`) build a workload's desired hash
from: every source read afresh, then the same model functions as the reconciler
(projection, then `assess`), so a report never disagrees with what the controller does.
The tests' and benchmarks' independent check is `kube_nudge_dev.confighash`, which follows
the documents and none of this code.
"""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, SECRETS
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadView,
    project_source,
)

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
