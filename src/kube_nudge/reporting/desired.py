"""The sources a workload consumes, read straight from the API with no cache.

What the read-only commands (`status`, `wait`, `migrate`) build a workload's desired hash
from: every source read afresh, then the same model functions as the reconciler
(projection, then `assess`), so a report never disagrees with what the controller does.
The tests' and benchmarks' independent check is `kube_nudge_dev.confighash`, which follows
the documents and none of this code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import mount_resource, source_resource
from kube_nudge.model import (
    SourceRef,
    SourceView,
    WorkloadView,
    project_source,
)
from kube_nudge.model.mounts import advance, project_pod_status

JSON = dict[str, Any]


async def read_source(client: KubeClient, ref: SourceRef) -> JSON | None:
    """The source ``ref`` (a ConfigMap, a Secret), or None if it doesn't exist; for a kind
    known once mounted (a Secrets Store CSI class), the list of its namespace's mount
    statuses (SecretProviderClassPodStatuses; None: not served)."""
    mounts = mount_resource(ref.kind)
    if mounts is not None:
        path = mounts.path(ref.namespace)
    else:
        path = source_resource(ref.kind).path(ref.namespace, ref.name)
    try:
        return await client.get(path)
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def read_allowed(
    client: KubeClient, refs: Iterable[SourceRef], cache: dict[SourceRef, JSON | None]
) -> list[SourceRef]:
    """Read each of ``refs`` not yet in ``cache`` into it (``read_source``), in order; the
    ones this user may not get (403) are returned instead, uncached."""
    forbidden = []
    for ref in sorted(refs):
        if ref in cache:
            continue
        try:
            cache[ref] = await read_source(client, ref)
        except ApiError as exc:
            if exc.status != 403:
                raise
            forbidden.append(ref)
    return forbidden


def project_read(ref: SourceRef, obj: JSON, *, compat: bool = True) -> SourceView | None:
    """What ``read_source`` read, as the controller's caches keep it. A kind known once
    mounted (a CSI class) is its newest mounted status's versions (None: none mounted), as
    ``model/mounts.py`` folds them; unlike the caches, which keep a class's versions once a
    status went away, this sees only the statuses there are now."""
    if mount_resource(ref.kind) is None:
        return project_source(obj, compat=compat)
    view = None
    for item in obj.get("items") or ():
        status = project_pod_status(item, ref.kind)
        if status is not None and status.ref == ref:
            view = advance(view, None, status) or view
    return view


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
        views[ref] = project_read(ref, obj, compat=compat) if obj is not None else None
    return views
