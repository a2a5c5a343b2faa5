"""The seams of the architecture against a real API server: a second strategy (`notify`)
and custom workload kinds whose Kind comes from API discovery."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kube_nudge.app.run import resolve_workloads
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, CORE_EVENTS, DEPLOYMENTS, Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, parse_workload_flag
from kube_nudge.model import BASELINE_HASH
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import (
    controller_writes,
    events,
    eventually,
    install_crd,
    running_controller,
    template_hash,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
NOTIFY = {**ENABLED, "kube-nudge.io/strategy": "notify"}


async def test_notify_announces_the_changed_keys_and_never_writes_the_workload(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(
        CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info", "UNUSED": "1"})
    )
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("app", spec=manifests.env_consumer(), annotations=NOTIFY),
    )
    before = await kube.get(DEPLOYMENTS.path(namespace, "app"))
    async with running_controller(cluster, namespace) as running:
        notified = running.metrics.notifications.labels(kind="Deployment")
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"UNUSED": "2"}})
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        await eventually(lambda: notified._value.get() == 1, timeout=30)
        await running.controller.settled(timeout=30)
        assert notified._value.get() == 1  # the unconsumed key announced nothing
        [changed] = await events(kube, namespace, "ConfigChanged")
        assert changed["type"] == "Normal"
        assert changed["involvedObject"]["kind"] == "Deployment"
        assert "configmap/app keys [LEVEL] changed" in changed["message"]
        version = (await kube.get(CONFIGMAPS.path(namespace, "app")))["metadata"]["resourceVersion"]
        assert f"(versions: configmap/app@{version})" in changed["message"]
        assert "debug" not in changed["message"]
    assert controller_writes(cluster, namespace) == []  # from the API server's audit log
    after = await kube.get(DEPLOYMENTS.path(namespace, "app"))
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert template_hash(after, DEPLOYMENT) is None
    assert BASELINE_HASH not in (after["metadata"].get("annotations") or {})


CANARIES = Resource("example.kube-nudge.io", "v1", "canaries", "CanaryRelease")


async def test_a_custom_kind_comes_from_discovery_and_lands_in_events(
    kube: KubeClient, cluster: LocalCluster, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Its Kind is not its capitalised singular, and its singular isn't its plural minus
    # an "s" (the old guess made "Canarie").
    await install_crd(kube, CANARIES, "canary")
    flags = (
        parse_workload_flag("example.kube-nudge.io/v1/canaries=spec.template"),
        parse_workload_flag("not-installed.example.com/v1/widgets=spec.template"),
    )
    with caplog.at_level(logging.WARNING, logger="kube_nudge"):
        kinds, pending = await resolve_workloads(kube, flags)
    # The missing CRD is logged and left for retries; the others are all there.
    assert pending == flags[1:]
    assert "not-installed.example.com/v1" in caplog.text
    assert "is the CRD installed?" in caplog.text
    *builtin, canary = kinds
    assert tuple(builtin) == BUILTIN_KINDS
    assert canary.resource == CANARIES

    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(CANARIES.path(namespace), {
        "apiVersion": CANARIES.api_version, "kind": "CanaryRelease",
        "metadata": {"name": "c", "annotations": ENABLED},
        "spec": {"template": {"spec": manifests.env_consumer()}},
    })  # fmt: skip
    async with running_controller(cluster, namespace, kinds=kinds) as running:
        await wait_for_object(
            kube, CANARIES.path(namespace), "c",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
    found = await kube.get(
        CORE_EVENTS.path(namespace), fieldSelector="involvedObject.name=c,reason=Adopted"
    )
    [adopted] = found["items"]
    assert adopted["involvedObject"]["kind"] == "CanaryRelease"
    assert adopted["involvedObject"]["apiVersion"] == "example.kube-nudge.io/v1"
    # kubectl describe's filter: the Event is found by the real Kind.
    by_kind = await kube.get(
        CORE_EVENTS.path(namespace), fieldSelector="involvedObject.kind=CanaryRelease"
    )
    assert [e["reason"] for e in by_kind["items"]] == ["Adopted"]


def rolled_as(kind: WorkloadKind) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: template_hash(obj, kind) is not None


async def test_a_kind_installed_after_start_is_watched_while_the_others_keep_working(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    group = f"late-{uuid.uuid4().hex[:8]}.example.com"  # a CRD no earlier run installed
    gadgets = Resource(group, "v1", "gadgets", "Gadget")
    spec = parse_workload_flag(f"{group}/v1/gadgets=spec.template")
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("app", spec=manifests.env_consumer(), annotations=ENABLED),
    )
    async with running_controller(cluster, namespace, pending_kinds=(spec,)) as running:
        # Ready and serving the built-in kinds while the CRD is missing.
        assert running.controller.ready
        available = running.metrics.kind_available
        assert available.labels(resource=str(gadgets))._value.get() == 0
        assert available.labels(resource="deployments.apps")._value.get() == 1
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "app",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=30,
        )  # fmt: skip

        await install_crd(kube, gadgets, "gadget")
        await kube.create(gadgets.path(namespace), {
            "apiVersion": gadgets.api_version, "kind": "Gadget",
            "metadata": {"name": "g", "annotations": ENABLED},
            "spec": {"template": {"spec": manifests.env_consumer()}},
        })  # fmt: skip
        await wait_for_object(
            kube, gadgets.path(namespace), "g",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=90,
        )  # fmt: skip
        assert available.labels(resource=str(gadgets))._value.get() == 1
        assert running.controller.pending_kinds.pending == ()

        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        gadget_kind = WorkloadKind(gadgets, ("spec", "template"))
        for kind, name in ((DEPLOYMENT, "app"), (gadget_kind, "g")):
            await wait_for_object(
                kube, kind.resource.path(namespace), name, rolled_as(kind), timeout=30
            )
        await running.controller.settled(timeout=30)
    [adopted] = (
        await kube.get(
            CORE_EVENTS.path(namespace), fieldSelector="involvedObject.name=g,reason=Adopted"
        )
    )["items"]
    assert adopted["involvedObject"]["kind"] == "Gadget"
