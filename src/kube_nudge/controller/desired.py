"""A workload's desired config hash computed straight from the API, with no cache.

This is the independent check of what the controller converges to: tests and benchmarks
compare it with the hash on each pod template, and it is the basis for drift reports.
It applies the same contract as the reconciler (exclusions, ignored sources, cross-namespace
grants) through the pure model, but reads every source afresh.
"""

from __future__ import annotations

from typing import Any

from kube_nudge.controller.views import WorkloadKind
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, SECRETS
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    SourceState,
    config_hash,
    consume_all,
    cross_namespace_allowed,
    discover,
    get_pod_spec,
    merge,
    parse_source,
    parse_workload,
    source_state,
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
    metadata = workload.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    settings, _ = parse_workload(metadata.get("annotations"), namespace, compat=True)
    consumed = discover(get_pod_spec(workload, kind.template_path) or {}, namespace)
    consumed = merge(consumed, consume_all(settings.extra, "annotation"))
    sources = cache if cache is not None else {}
    visible = {}
    states: dict[SourceRef, SourceState] = {}
    for ref, use in consumed.items():
        if ref in settings.exclude:
            continue
        if ref not in sources:
            sources[ref] = await read_source(client, ref)
        obj = sources[ref]
        source_settings, _ = parse_source(((obj or {}).get("metadata") or {}).get("annotations"))
        if ref.namespace != namespace and (
            obj is None or not cross_namespace_allowed(namespace, ref.namespace, source_settings)
        ):
            continue
        if obj is not None and source_settings.ignore:
            continue
        visible[ref] = use
        states[ref] = source_state(obj)
    return config_hash(hmac_key, visible, states)
