"""Whether a workload's own controller has finished rolling out its current template: what
``kubectl rollout status`` waits for, read from the object's status. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["rollout_complete"]


def rollout_complete(kind: str, obj: Mapping[str, Any]) -> bool | None:
    """True when the latest template runs on every replica and they are ready; None for
    kinds without a rollout to follow (CronJob, custom kinds)."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if status.get("observedGeneration") != metadata.get("generation"):
        return False if kind in ("Deployment", "StatefulSet", "DaemonSet") else None
    if kind == "Deployment":
        replicas = spec.get("replicas", 1)
        return all(
            status.get(field) == replicas
            for field in ("updatedReplicas", "readyReplicas", "availableReplicas", "replicas")
        )
    if kind == "StatefulSet":
        replicas = spec.get("replicas", 1)
        return bool(
            status.get("updateRevision")
            and status.get("currentRevision") == status.get("updateRevision")
            and status.get("readyReplicas") == replicas
            and status.get("updatedReplicas", replicas) == replicas
        )
    if kind == "DaemonSet":
        wanted = status.get("desiredNumberScheduled")
        return bool(
            wanted is not None
            and status.get("updatedNumberScheduled") == wanted
            and status.get("numberAvailable", 0) == wanted
        )
    return None
