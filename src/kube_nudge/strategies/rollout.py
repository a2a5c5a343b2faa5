"""The ``rollout`` strategy: write the config hash on the pod template, so the workload's own
controller performs its normal rolling update (new ReplicaSet, controller revision, or the
next Job of a CronJob).

Writes are JSON merge patches that touch one annotation, carry the workload's uid as a
precondition (a deleted-and-recreated workload answers 409 instead of being patched) and
name kube-nudge as field manager. They cannot clobber a concurrent edit of anything else,
and unlike server-side apply a patch never creates an object that was deleted meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kube_nudge.controller.views import BASELINE_HASH, ROLLED_AT, WorkloadKind
from kube_nudge.kube.client import KubeClient
from kube_nudge.model import CONFIG_HASH, annotation_patch

FIELD_MANAGER = "kube-nudge"


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    merged = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def rollout_patch(
    kind: WorkloadKind,
    uid: str,
    config_hash: str,
    *,
    had_baseline: bool,
    rolled_at: Sequence[float],
) -> dict[str, Any]:
    """The merge patch that rolls the workload to ``config_hash`` and records the recent
    rollouts (``rolled_at``, this one included) for the flap cap."""
    annotations: dict[str, Any] = {ROLLED_AT: ",".join(f"{t:.3f}" for t in rolled_at)}
    if had_baseline:
        annotations[BASELINE_HASH] = None  # the template now carries the hash
    metadata: dict[str, Any] = {"uid": uid, "annotations": annotations}
    return _deep_merge(
        {"metadata": metadata}, annotation_patch(kind.template_path, CONFIG_HASH, config_hash)
    )


def adopt_patch(uid: str, config_hash: str) -> dict[str, Any]:
    """The merge patch that records the running config's hash without rolling."""
    return {"metadata": {"uid": uid, "annotations": {BASELINE_HASH: config_hash}}}


async def write(
    client: KubeClient, kind: WorkloadKind, namespace: str, name: str, patch: dict[str, Any]
) -> None:
    """Send one patch to the workload (raises ApiError)."""
    await client.request(
        "PATCH",
        kind.resource.path(namespace, name),
        params={"fieldManager": FIELD_MANAGER},
        body=patch,
        content_type="application/merge-patch+json",
    )
