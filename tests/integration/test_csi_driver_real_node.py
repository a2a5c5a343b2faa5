"""The real Secrets Store CSI driver on the real node (``--csi-secrets``): nothing of the
driver is acted out here. The driver (its pinned release, built by ``make csi-driver``) runs
beside the real kubelet, which registers it through the registrar's plugin registration
socket and mounts the pods' ``csi`` volumes through it; the provider serves secrets from a
file the test rewrites. When the test rotates a secret, the driver itself notices it at the
kubelet's next re-publish of a pod's volume, rewrites the files in the running pod and
updates that pod's ``SecretProviderClassPodStatus``; kube-nudge reads only those statuses.

One rotation: the Deployment with the default strategy rolls exactly once (its new pods
mount the new version, which changes nothing more), the one with strategy ``notify`` is
announced exactly once and not restarted, its running container reading the new file.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS, PODS, SECRETPROVIDERCLASSPODSTATUSES
from kube_nudge.model import BASELINE_HASH, ROLLED_AT
from kube_nudge_dev import manifests
from kube_nudge_dev.build import secrets_store_csi_binaries
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.node import NODE_NAME, RealNode
from kube_nudge_dev.nodepods import on_real_node, python_container, read_in_container
from kube_nudge_dev.secretsstore import (
    DRIVER_NAME,
    PROVIDER_NAME,
    SecretsStoreCsi,
    StoredSecret,
    csi_mounts,
)
from kube_nudge_dev.waiting import deployment_complete, until, wait_for_object
from tests.integration.controller_support import (
    events,
    expected_hash,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.csi_support import (
    MOUNT,
    SECRETPROVIDERCLASSES,
    csi_volume,
    install_csidriver,
    install_driver_crds,
)
from tests.integration.rollout_timeline import DEPLOYMENT, Timeline, watching

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]

#: The kubelet re-publishes a pod's volume (and so the driver rotates it) at its next sync of
#: the pod: every minute, plus up to half of that as jitter.
ROTATION = 150.0
#: The driver's field manager: the API server takes it from its user agent
#: (``csi-secrets-store/controller/<version> ...``).
DRIVER_MANAGER = "csi-secrets-store"
V1, V2 = StoredSecret("1", "pw-1"), StoredSecret("2", "pw-2")
#: Sleeps; the secret's file is read by the test through `kubectl exec`.
APP = "import time\nwhile True:\n    time.sleep(3600)\n"


@pytest.fixture(scope="module")
async def secrets_store(
    cluster: LocalCluster, real_node: RealNode, kube: KubeClient
) -> AsyncIterator[SecretsStoreCsi]:
    """The driver, its registrar and the provider (serving V1) beside the real node's kubelet,
    once the kubelet has registered the driver; stopped after every pod mounting one of its
    volumes is gone (the kubelet needs the driver to unmount them)."""
    await install_driver_crds(kube)
    await install_csidriver(kube)
    store = SecretsStoreCsi(real_node, kubeconfig=cluster.kubeconfig, logs=cluster.logs,
                            binaries=secrets_store_csi_binaries(), free_port=free_port)  # fmt: skip
    try:
        store.start({"db-password": V1})
        await until(lambda: registered(kube), timeout=60)
        yield store
    finally:
        with contextlib.suppress(TimeoutError):
            await no_csi_pods(kube, real_node)
        store.stop()


async def registered(kube: KubeClient) -> bool:
    """Whether the kubelet registered the driver: its CSINode lists it."""
    try:
        node = await kube.get(f"/apis/storage.k8s.io/v1/csinodes/{NODE_NAME}")
    except ApiError as exc:
        if exc.not_found:  # the kubelet has not written it yet
            return False
        raise
    drivers = (node.get("spec") or {}).get("drivers") or []
    return any(d["name"] == DRIVER_NAME and d.get("nodeID") == NODE_NAME for d in drivers)


async def no_csi_pods(kube: KubeClient, node: RealNode) -> None:
    """Delete the real node's pods that mount the driver's volumes; wait until the kubelet has
    torn them down and had the driver unmount their volumes."""
    found = await kube.get(PODS.path(), fieldSelector=f"spec.nodeName={NODE_NAME}")
    for pod in found["items"]:
        volumes = pod["spec"].get("volumes") or []
        if any((v.get("csi") or {}).get("driver") == DRIVER_NAME for v in volumes):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):  # gone already
                await kube.request("DELETE", PODS.path(meta["namespace"], meta["name"]),
                                   params={"gracePeriodSeconds": 0})  # fmt: skip

    async def unmounted() -> bool:
        return not csi_mounts(node)

    await until(unmounted, timeout=60)


def secret_class(name: str) -> dict[str, Any]:
    """A SecretProviderClass of the test provider, object ``db-password``."""
    return {
        "apiVersion": SECRETPROVIDERCLASSES.api_version, "kind": "SecretProviderClass",
        "metadata": {"name": name},
        "spec": {"provider": PROVIDER_NAME,
                 "parameters": {"objects": "- objectName: db-password\n"}},
    }  # fmt: skip


def consumer(name: str, image: str, replicas: int, annotations: dict[str, str]) -> Any:
    """A Deployment on the real node mounting class `db` whole at MOUNT."""
    mount = {"name": "secrets-store", "mountPath": MOUNT, "readOnly": True}
    spec = on_real_node({
        "containers": [python_container(image, APP, volumeMounts=[mount])],
        "volumes": [csi_volume("db")],
        "terminationGracePeriodSeconds": 1,
    })  # fmt: skip
    return manifests.deployment(name, replicas=replicas, spec=spec, annotations=annotations)


async def pods_of(kube: KubeClient, namespace: str, app: str) -> list[dict[str, Any]]:
    """The live pods of ``app``."""
    found = await kube.get(PODS.path(namespace), labelSelector=f"app={app}")
    return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]


async def statuses(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    """The SecretProviderClassPodStatuses in ``namespace`` by pod name."""
    found = await kube.get(SECRETPROVIDERCLASSPODSTATUSES.path(namespace))
    return {s["status"]["podName"]: s for s in found["items"]}


def recorded(status: dict[str, Any] | None) -> str | None:
    """The version of `db-password` a status records as mounted, if it does."""
    if status is None or not status["status"].get("mounted"):
        return None
    versions = {o["id"]: o["version"] for o in status["status"].get("objects") or []}
    return versions.get("db-password")


async def driver_recorded(
    kube: KubeClient, namespace: str, app: str, version: str, timeout: float
) -> list[dict[str, Any]]:
    """The statuses of every live pod of ``app``, once the driver recorded ``version`` in
    each (written under its own field manager: nothing here writes one)."""
    found: list[dict[str, Any]] = []

    async def all_recorded() -> bool:
        nonlocal found
        pods, by_pod = await pods_of(kube, namespace, app), await statuses(kube, namespace)
        found = [by_pod[p["metadata"]["name"]] for p in pods if p["metadata"]["name"] in by_pod]
        return bool(pods) and len(found) == len(pods) and all(
            recorded(s) == version for s in found)  # fmt: skip

    await until(all_recorded, timeout)
    for status in found:
        managers = {f["manager"] for f in status["metadata"].get("managedFields") or []}
        assert managers == {DRIVER_MANAGER}, managers
    return found


def templates(timeline: Timeline, name: str) -> int:
    """Template changes of ``name`` seen on the watch."""
    return sum(1 for _, seen, what in timeline.entries if seen == name and what == "template")


def notes(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


async def test_a_rotation_by_the_real_driver_rolls_once_and_notifies_once(
    kube: KubeClient,
    cluster: LocalCluster,
    namespace: str,
    controller_image: BuiltImage,
    secrets_store: SecretsStoreCsi,
) -> None:
    secrets_store.serve({"db-password": V1})
    await kube.create(SECRETPROVIDERCLASSES.path(namespace), secret_class("db"))
    notify = {**ENABLED, "kube-nudge.io/strategy": "notify"}
    async with (
        watching(kube, namespace) as timeline,
        running_controller(cluster, namespace, csi_secrets=True) as running,
    ):
        for name, replicas, settings in (("web", 2, ENABLED), ("watcher", 1, notify)):
            deployment = consumer(name, controller_image.ref, replicas, settings)
            await kube.create(DEPLOYMENTS.path(namespace), deployment)
        for name in ("web", "watcher"):
            await wait_for_object(kube, DEPLOYMENTS.path(namespace), name, deployment_complete,
                                  timeout=120)  # fmt: skip
            await driver_recorded(kube, namespace, name, "1", timeout=30)
        [watcher_pod] = await pods_of(kube, namespace, "watcher")
        assert read_in_container(cluster, namespace, watcher_pod["metadata"]["name"],
                                 f"{MOUNT}/db-password") == "pw-1"  # fmt: skip
        adopted = await posted(kube, namespace, "Adopted")
        assert any("mounted Secrets Store CSI classes" in e["message"] for e in adopted)
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert BASELINE_HASH in notes(web) and templates(timeline, "web") == 0

        secrets_store.serve({"db-password": V2})  # the secret rotates in the store
        web = await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web",
                                    lambda o: template_hash(o, DEPLOYMENT) is not None,
                                    timeout=ROTATION)  # fmt: skip
        rolled = template_hash(web, DEPLOYMENT)
        assert rolled == await expected_hash(kube, DEPLOYMENT, web, running.hmac_key,
                                             csi_secrets=True)  # fmt: skip
        [rolling] = await posted(kube, namespace, "Rolling")
        assert "secretproviderclass/db keys [db-password] changed" in rolling["message"]

        # The rollout's pods mount the new version; the watcher's pod is rotated in place.
        await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web", deployment_complete,
                              timeout=120)  # fmt: skip
        await driver_recorded(kube, namespace, "web", "2", timeout=30)
        await driver_recorded(kube, namespace, "watcher", "2", timeout=ROTATION)
        assert read_in_container(cluster, namespace, watcher_pod["metadata"]["name"],
                                 f"{MOUNT}/db-password") == "pw-2"  # fmt: skip
        await running.controller.settled(timeout=30)

        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) == rolled
        assert templates(timeline, "web") == 1 and len(notes(web)[ROLLED_AT].split(",")) == 1
        assert len(await events(kube, namespace, "Rolling")) == 1
        [changed] = await events(kube, namespace, "ConfigChanged")
        assert changed["involvedObject"]["name"] == "watcher" and changed.get("count", 1) == 1
        assert "secretproviderclass/db" in changed["message"]
        assert templates(timeline, "watcher") == 0
        assert [p["metadata"]["name"] for p in await pods_of(kube, namespace, "watcher")] == [
            watcher_pod["metadata"]["name"]
        ]
