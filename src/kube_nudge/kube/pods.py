"""A workload's or a source's pods by label selector, when they started (what tells stale
pods from fresh ones), and the record of a pod the pod-selector replacement decides on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import PODS
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.model.replacement import PodRecord

__all__ = ["matching_pods", "oldest_container_start", "pod_record", "pod_started"]


async def matching_pods(client: KubeClient, namespace: str, selector: str) -> list[JSON]:
    """The pods of ``namespace`` matching the label ``selector`` (server-side, paginated)."""
    pages = client.list_pages(PODS.path(namespace), {"labelSelector": selector})
    return [pod async for page, _ in pages for pod in page]


def pod_started(pod: Mapping[str, Any]) -> float | None:
    """When the pod's config was last read: its earliest running container's start (a
    restarted container re-reads env vars), else the pod's start; None if not started."""
    status = pod.get("status") or {}
    running = (
        ((container.get("state") or {}).get("running") or {}).get("startedAt")
        for container in status.get("containerStatuses") or ()
    )
    starts = [stamp for stamp in map(parse_timestamp, running) if stamp is not None]
    return min(starts) if starts else parse_timestamp(status.get("startTime"))


def pod_record(pod: Mapping[str, Any]) -> PodRecord:
    """What `model.replacement` needs of a pod: names, labels and status, nothing else."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    labels = metadata.get("labels") or {}
    return PodRecord(
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {},
        started=pod_started(pod),
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or ()
        ),
        terminating=bool(metadata.get("deletionTimestamp")),
        owned=any(o.get("controller") is True for o in metadata.get("ownerReferences") or ()),
        finished=status.get("phase") in ("Succeeded", "Failed"),
    )


async def oldest_container_start(client: KubeClient, namespace: str, selector: str) -> float | None:
    """The earliest config read of any live pod matching ``selector`` (one paginated list,
    done once per workload: at adoption). None when no pod has started."""
    starts = [
        started
        for pod in await matching_pods(client, namespace, selector)
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
        and (started := pod_started(pod)) is not None
    ]
    return min(starts, default=None)
