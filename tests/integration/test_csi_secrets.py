"""Secrets mounted by the Secrets Store CSI driver (``--csi-secrets``), unit-level cases with
the driver's writes acted out: the real API server with the driver's own CRDs installed, no
driver running, its writes made by the test as the driver makes them (``csi_support``), to
pin one case at a time: pods mounting a class adopt its versions, a rotation rolls once
however many pods' statuses record it (and the new pods mounting the same versions roll
nothing), a class synced to a Secret that the pods also read rolls once, and strategy hot
reloads in place once each pod's status and agent say so. The real driver on the real node:
test_csi_driver_real_node.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

import pytest

from kube_nudge.agent.watch import claim
from kube_nudge.agentwire import LOADED_AT, LOADED_HASH, key_id
from kube_nudge.app.run import csi_served
from kube_nudge.controller.options import ControllerOptions
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import (
    DEPLOYMENTS,
    PODS,
    SECRETPROVIDERCLASSPODSTATUSES,
    SECRETS,
    Resource,
)
from kube_nudge.model import BASELINE_HASH, ROLLED_AT, SourceKind, SourceRef
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge.strategies.registry import product_defaults
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object
from tests.agent_support import KEY
from tests.integration.controller_support import (
    Running,
    eventually,
    expected_hash,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.csi_support import (
    GROUP,
    MOUNT,
    SECRETPROVIDERCLASSES,
    csi_consumer,
    install_driver_crds,
    mounted,
    rotated,
    running_pods,
    secret_provider_class,
    synced,
)
from tests.integration.hot_support import agent_container, agent_key_secret, replicasets
from tests.integration.rollout_timeline import DEPLOYMENT, Timeline, watching

pytestmark = pytest.mark.cluster

V1, V2 = {"db-password": "7"}, {"db-password": "8"}
# The driver writes a pod's status as it mounts the volume, before the containers start;
# here kwok starts them first and the test writes the statuses after, which would make
# the pods look stale at first sight (kube-nudge.io/adopt: roll-stale) to a controller
# started after: such tests adopt without that check.
ADOPT = {**ENABLED, "kube-nudge.io/adopt": "never-roll"}


def notes(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def templates(timeline: Timeline) -> int:
    """Template changes of `web` seen on the watch."""
    return sum(1 for _, name, what in timeline.entries if name == "web" and what == "template")


async def seen(running: Running, namespace: str, status: dict[str, Any]) -> None:
    """Once the controller's caches hold ``status`` (its write or a later one), and it has
    nothing left to do about it."""
    ref = SourceRef(SourceKind.CSI, namespace, status["status"]["secretProviderClassName"])
    version = int(status["metadata"]["resourceVersion"])

    def cached() -> bool:
        view = running.controller.cache.source(ref)
        return view is not None and view.resource_version >= version

    await eventually(cached, timeout=30)
    await running.controller.settled(timeout=30)


async def new_pods(kube: KubeClient, namespace: str, old: list[dict[str, Any]]) -> list[Any]:
    """The 2 running pods of the rollout, once the old ones are gone."""
    names = {p["metadata"]["name"] for p in old}

    async def replaced() -> bool:
        pods = await running_pods(kube, namespace, "web", 2)
        return not names & {p["metadata"]["name"] for p in pods}

    await until(replaced, timeout=60)
    return await running_pods(kube, namespace, "web", 2)


async def collected(kube: AdminClient, namespace: str, pod: dict[str, Any]) -> None:
    """The garbage collector deletes the status of ``pod``, which is gone."""
    name = f"{pod['metadata']['name']}-{namespace}-db"
    with contextlib.suppress(ApiError):  # collected already
        await kube.delete(SECRETPROVIDERCLASSPODSTATUSES.path(namespace, name))


async def test_mounting_adopts_a_rotation_rolls_once_and_new_pods_repeating_it_roll_nothing(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await install_driver_crds(kube)
    await kube.create(SECRETPROVIDERCLASSES.path(namespace), secret_provider_class("db"))
    deployment = manifests.deployment("web", replicas=2, spec=csi_consumer("db"),
                                      annotations=ENABLED)  # fmt: skip
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    pods = await running_pods(kube, namespace, "web", 2)
    async with (
        watching(kube, namespace) as timeline,
        running_controller(cluster, namespace, csi_secrets=True) as running,
    ):
        # First sight before the driver wrote any status: the class's versions are unknown.
        web = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web", lambda o: BASELINE_HASH in notes(o),
            timeout=30,
        )  # fmt: skip
        unknown = notes(web)[BASELINE_HASH]
        for pod in pods:
            status = await mounted(kube, pod, "db", V1)
        await seen(running, namespace, status)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert notes(web)[BASELINE_HASH] != unknown  # adopted the versions mounted
        adopted = [e["message"] for e in await posted(kube, namespace, "Adopted")]
        assert any("mounted Secrets Store CSI classes" in m for m in adopted), adopted
        assert (template_hash(web, DEPLOYMENT), templates(timeline)) == (None, 0)

        # Rotation reaches the first pod: the class changed, the workload rolls.
        await rotated(kube, pods[0], "db", V2)
        web = await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web",
                                    lambda o: template_hash(o, DEPLOYMENT) is not None,
                                    timeout=30)  # fmt: skip
        rolled = template_hash(web, DEPLOYMENT)
        assert rolled == await expected_hash(kube, DEPLOYMENT, web, running.hmac_key,
                                             csi_secrets=True)  # fmt: skip
        [rolling] = await posted(kube, namespace, "Rolling")
        assert "secretproviderclass/db keys [db-password] changed" in rolling["message"]
        assert '"8"' not in rolling["message"] and " 8" not in rolling["message"]

        # The other old pod rotates at its own pace; the old pods go, and with them their
        # statuses (the garbage collector's, by their ownerReferences: done here, as it
        # finds a new CRD's objects only at its next discovery); the new pods mount the same
        # versions.
        await rotated(kube, pods[1], "db", V2)
        fresh = await new_pods(kube, namespace, pods)
        for pod in pods:
            await collected(kube, namespace, pod)
        for pod in fresh:
            status = await mounted(kube, pod, "db", V2)
        await seen(running, namespace, status)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) == rolled
        assert templates(timeline) == 1
        assert len(notes(web)[ROLLED_AT].split(",")) == 1


async def test_a_rotation_of_a_class_synced_to_a_secret_the_pods_read_rolls_once(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    """The pods mount the class and read the Secret it syncs (secretObjects) into an env
    var: the driver records the new versions, then syncs the Secret; one rollout."""
    await install_driver_crds(kube)
    await kube.create(SECRETPROVIDERCLASSES.path(namespace),
                      secret_provider_class("db", synced="db-synced"))  # fmt: skip
    await synced(kube, namespace, "db-synced", "pw-7")
    spec = csi_consumer("db", env_secret="db-synced")
    deployment = manifests.deployment("web", replicas=2, spec=spec, annotations=ADOPT)
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    pods = await running_pods(kube, namespace, "web", 2)
    for pod in pods:
        status = await mounted(kube, pod, "db", V1)
    async with (
        watching(kube, namespace) as timeline,
        # At the defaults (debounce auto): the driver's writes get its quiet window.
        running_controller(cluster, namespace, debounce=None, csi_secrets=True) as running,
    ):
        await seen(running, namespace, status)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert BASELINE_HASH in notes(web) and templates(timeline) == 0

        await rotated(kube, pods[0], "db", V2)
        # The driver's pass between the status and the Secret it syncs (it reads the new
        # files and the Secret first): slower than the default quiet window on a busy node.
        await asyncio.sleep(0.2)
        await synced(kube, namespace, "db-synced", "pw-8")
        secret = await kube.get(SECRETS.path(namespace, "db-synced"))
        assert secret["data"]["password"]  # written
        # The hash of what the controller reads when the driver's quiet window closes, taken
        # now: once the rollout replaces the pods, the garbage collector may delete the old
        # pods' statuses (it does once it has discovered the CRD), and a hash recomputed
        # then would no longer be the one rolled to.
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        final = await expected_hash(kube, DEPLOYMENT, web, running.hmac_key, csi_secrets=True)
        await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web",
                              lambda o: template_hash(o, DEPLOYMENT) == final,
                              timeout=30)  # fmt: skip
        for pod in await new_pods(kube, namespace, pods):
            status = await mounted(kube, pod, "db", V2)
        await seen(running, namespace, status)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert (template_hash(web, DEPLOYMENT), templates(timeline)) == (final, 1)


def agent_loaded(files: dict[str, bytes]) -> dict[str, str]:
    """What the pod's agent writes after reloading the CSI files at MOUNT (whatever they
    hold: only the driver's status says which versions they are)."""
    loaded = claim(((MOUNT, tuple(sorted(files.items()))),), KEY, key_id(KEY))
    return {LOADED_HASH: loaded, LOADED_AT: f"{time.time():.3f}"}


async def hot_web(
    kube: KubeClient, namespace: str, deadline: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Class `db`, the agent key, Deployment `web` (2 pods, strategy hot, mounting the class
    whole), each pod's status written; returns the pods and the last status written, once
    the wall clock is past the second the pods started in (a change in that second would
    count as read at start)."""
    await install_driver_crds(kube)
    await kube.create(SECRETPROVIDERCLASSES.path(namespace), secret_provider_class("db"))
    await kube.create(SECRETS.path(namespace), agent_key_secret())
    hot = {**ADOPT, "kube-nudge.io/strategy": "hot", "kube-nudge.io/hot-deadline": deadline}
    spec = csi_consumer("db")
    spec["containers"].append(agent_container(MOUNT, "secrets-store"))
    deployment = manifests.deployment("web", replicas=2, spec=spec, annotations=hot)
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    pods = await running_pods(kube, namespace, "web", 2)
    for pod in pods:
        status = await mounted(kube, pod, "db", V1)
    started = [parse_timestamp(p["status"]["startTime"]) or 0.0 for p in pods]
    await eventually(lambda: time.time() >= max(started) + 1, timeout=5)
    return pods, status


async def agent_reloads(kube: AdminClient, namespace: str, pod: dict[str, Any]) -> None:
    """The pod's agent saw the files at MOUNT change and reloaded the app."""
    patch = {"metadata": {"annotations": agent_loaded({"db-password": b"pw-8"})}}
    await kube.merge_patch(PODS.path(namespace, pod["metadata"]["name"]), patch)


async def test_hot_reloads_a_rotation_in_place_once_each_pods_status_and_agent_say_so(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    pods, status = await hot_web(kube, namespace, "5m")
    names = [p["metadata"]["name"] for p in pods]
    async with running_controller(cluster, namespace, csi_secrets=True) as running:
        await seen(running, namespace, status)
        for pod in pods:  # the driver rotates each pod, and each pod's agent reloads
            await rotated(kube, pod, "db", V2)
            await agent_reloads(kube, namespace, pod)
        [delivering] = await posted(kube, namespace, "HotReload")
        assert "secretproviderclass/db keys [db-password] changed" in delivering["message"]
        await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web",
                              lambda o: BASELINE_HASH in notes(o)
                              and HOT_RELOAD not in notes(o), timeout=60)  # fmt: skip
        [reloaded] = await posted(kube, namespace, "HotReloaded")
        assert reloaded["message"].startswith("every pod (2) reloaded config v1-")
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) is None and await replicasets(kube, namespace) == 1
        found = await running_pods(kube, namespace, "web", 2)
        assert [p["metadata"]["name"] for p in found] == names  # nothing restarted


async def test_hot_never_counts_a_pod_whose_status_has_not_recorded_the_rotation(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Both agents reload, but the driver rotated only the first pod: the second has the
    old files, so at the deadline the fallback names it, and only it, and why."""
    pods, status = await hot_web(kube, namespace, "10s")
    names = [p["metadata"]["name"] for p in pods]
    async with running_controller(cluster, namespace, csi_secrets=True) as running:
        await seen(running, namespace, status)
        await rotated(kube, pods[0], "db", V2)
        for pod in pods:
            await agent_reloads(kube, namespace, pod)
        [failed] = await posted(kube, namespace, "HotReloadFailed", timeout=60)
        message = failed["message"]
        assert f"within 10 s: {names[1]} (" in message, message
        assert (
            f"{names[1]}: /mnt/secrets-store: the CSI driver has not written the delivered "
            "versions of secretproviderclass/db into it yet"
        ) in message
        assert names[0] not in message.split("within 10 s:")[1].split(";")[0]


async def test_csi_secrets_without_the_drivers_crd_served_counts_no_class(
    kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    on = ControllerOptions(defaults=product_defaults(csi_secrets=True))
    await install_driver_crds(kube)
    assert await csi_served(kube, on) == on
    missing = Resource("secrets-store.example.com", "v1", "secretproviderclasspodstatuses",
                       "SecretProviderClassPodStatus")  # fmt: skip
    assert (await csi_served(kube, on, missing)).defaults.csi_secrets is False
    assert "--csi-secrets: the API server does not serve secretproviderclasspodstatuses/" in (
        caplog.text
    )
    assert (await csi_served(kube, on, replace(missing, group=GROUP, version="v9"))) != on
