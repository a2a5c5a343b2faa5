"""With --compat, each form of Reloader's and Wave's annotations rolls its workload: a change
to a source the annotation makes count rolls it exactly once, and a change to a source it
leaves out (Reloader's named lists count only the named sources) rolls nothing."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge.model import BASELINE_HASH
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import wait_for_objects
from tests.integration.controller_support import expected_hash, running_controller
from tests.integration.rollout_timeline import DEPLOYMENT, Timeline, watching

pytestmark = pytest.mark.cluster

#: Workload -> its peer annotation. Each reads ConfigMap "app"; the named ones also read the
#: source they name.
FORMS = {
    "reloader-auto": {"reloader.stakater.com/auto": "true"},
    "reloader-configmap": {"configmap.reloader.stakater.com/reload": "named"},
    "reloader-secret": {"secret.reloader.stakater.com/reload": "named-secret"},
    "wave": {"wave.pusher.com/update-on-config-change": "true"},
}


def spec(name: str) -> dict[str, Any]:
    """Env from ConfigMap "app" (key LEVEL), and from the source the workload names."""
    env: list[dict[str, Any]] = [
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}}
    ]
    if name == "reloader-configmap":
        ref = {"configMapKeyRef": {"name": "named", "key": "K"}}
        env.append({"name": "K", "valueFrom": ref})
    if name == "reloader-secret":
        ref = {"secretKeyRef": {"name": "named-secret", "key": "p"}}
        env.append({"name": "P", "valueFrom": ref})
    return manifests.pod_spec(
        containers=[{"name": "app", "image": "registry.invalid/app:1", "env": env}]
    )


def rolled(timeline: Timeline, start: int) -> collections.Counter[str]:
    """Template changes per workload since ``start``."""
    return collections.Counter(n for _, n, w in timeline.entries[start:] if w == "template")


async def test_each_compat_form_rolls_on_a_change_of_what_it_names_exactly_once(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "1"}))
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("named", {"K": "1"}))
    await kube.create(SECRETS.path(namespace), manifests.secret("named-secret", {"p": "1"}))
    for name, peer in FORMS.items():
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(name, spec=spec(name), annotations=peer),
        )
    async with (
        watching(kube, namespace) as timeline,
        running_controller(cluster, namespace, compat=True) as running,
    ):
        await wait_for_objects(
            kube, DEPLOYMENTS.path(namespace),
            lambda found: len(found) == len(FORMS) and all(
                BASELINE_HASH in (o["metadata"].get("annotations") or {})
                for o in found.values()),
            timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        assert rolled(timeline, 0) == {}  # adoption restarts nothing

        changes = (
            (CONFIGMAPS.path(namespace, "named"), {"data": {"K": "2"}}, {"reloader-configmap"}),
            (SECRETS.path(namespace, "named-secret"), {"stringData": {"p": "2"}},
             {"reloader-secret"}),
            # Counted by the opt-ins that take every consumed source, not by the named lists.
            (CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "2"}},
             {"reloader-auto", "wave"}),
        )  # fmt: skip
        for path, patch, expected in changes:
            start = len(timeline.entries)
            await kube.merge_patch(path, patch)
            await timeline.until(lambda: rolled(timeline, start).keys() >= expected, 30)  # noqa: B023
            await running.controller.settled(timeout=30)
            assert rolled(timeline, start) == dict.fromkeys(expected, 1), (path, timeline.entries)

        # The opt-ins that take every consumed source carry the hash of all of them.
        for obj in (await kube.get(DEPLOYMENTS.path(namespace)))["items"]:
            if obj["metadata"]["name"] in ("reloader-auto", "wave"):
                want = await expected_hash(kube, DEPLOYMENT, obj, running.hmac_key)
                assert timeline.seen[obj["metadata"]["name"]].template == want
