"""A workload's own events never shorten or restart its debounce window: an unrelated edit
of a Deployment's annotations (and the status update its new generation brings), then two
config changes 1.5 s apart inside a 3 s window, roll it exactly once, as they roll a control
Deployment that nobody edited."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.model import BASELINE_HASH
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_objects
from tests.integration.controller_support import expected_hash, running_controller
from tests.integration.rollout_timeline import DEPLOYMENT, Timeline, watching

pytestmark = pytest.mark.cluster

NAMES = ("edited", "control")
DEBOUNCE = 3.0
#: The scenario's spacing: the first change 2.25 s after the unrelated edit, so that a window
#: the edit opened (ending at 3 s) would close between the two changes (2.25 s and 3.75 s).
FIRST_CHANGE_AFTER_EDIT = 2.25
BETWEEN_CHANGES = 1.5


def observed(obj: dict[str, Any]) -> bool:
    """Adopted, and the Deployment's status is about its latest generation (no status
    update of the adoption's write still to come)."""
    metadata, status = obj["metadata"], obj.get("status") or {}
    return BASELINE_HASH in (metadata.get("annotations") or {}) and status.get(
        "observedGeneration"
    ) == metadata.get("generation")


def templates(timeline: Timeline, start: int) -> dict[str, int]:
    """Template changes (rollouts) per Deployment since ``start``."""
    counts = dict.fromkeys(NAMES, 0)
    for _, name, what in timeline.entries[start:]:
        if what == "template":
            counts[name] += 1
    return counts


async def test_an_unrelated_edit_then_two_changes_inside_the_window_roll_once(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    for name in NAMES:
        body = manifests.deployment(name, spec=manifests.env_consumer(), annotations=ENABLED)
        await kube.create(DEPLOYMENTS.path(namespace), body)
    async with (
        watching(kube, namespace) as timeline,
        running_controller(cluster, namespace, debounce=DEBOUNCE) as running,
    ):
        await wait_for_objects(
            kube, DEPLOYMENTS.path(namespace),
            lambda found: len(found) == len(NAMES) and all(map(observed, found.values())),
            timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        start = len(timeline.entries)

        # The scenario (sleeps space its writes; nothing is asserted on time).
        note = {"metadata": {"annotations": {"example.com/note": "unrelated"}}}
        await kube.merge_patch(DEPLOYMENTS.path(namespace, "edited"), note)
        await asyncio.sleep(FIRST_CHANGE_AFTER_EDIT)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        await asyncio.sleep(BETWEEN_CHANGES)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "warn"}})

        final = {}
        for name in NAMES:
            obj = await kube.get(DEPLOYMENTS.path(namespace, name))
            final[name] = await expected_hash(kube, DEPLOYMENT, obj, running.hmac_key)
        await timeline.until(
            lambda: all(timeline.seen[n].template == final[n] for n in NAMES), timeout=30
        )
        await running.controller.settled(timeout=30)  # nothing left queued that could roll
        assert templates(timeline, start) == {"edited": 1, "control": 1}
