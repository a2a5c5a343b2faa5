"""Bad input gets a Warning Event and a log line; every other workload keeps being served."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from kube_nudge.controller.controller import BUILTIN_KINDS
from kube_nudge.controller.views import BASELINE_HASH, WorkloadKind
from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge.kube.waiting import wait_for_object
from kube_nudge.model import parse_path
from tests.integration import manifests
from tests.integration.controller_support import (
    events,
    expected_hash,
    running_controller,
    template_hash,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


def volume_spec(*sources: tuple[str, str]) -> dict[str, Any]:
    volumes = []
    for n, (kind, name) in enumerate(sources):
        if kind == "configmap":
            volumes.append({"name": f"v{n}", "configMap": {"name": name}})
        else:
            volumes.append({"name": f"v{n}", "secret": {"secretName": name}})
    return manifests.pod_spec(volumes=volumes)


async def adopted(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await wait_for_object(
        kube,
        DEPLOYMENTS.path(namespace),
        name,
        lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}),
        timeout=30,
    )


async def test_malformed_annotations_warn_and_fall_back_to_defaults(
    kube: KubeClient, cluster: LocalCluster, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
    bad = {
        "kube-nudge.io/enabled": "true",
        "kube-nudge.io/debounce": "soon",
        "kube-nudge.io/max-rollouts": "many",
        "kube-nudge.io/strategy": "teleport",
        "kube-nudge.io/secrets": "a,,b",
        "kube-nudge.io/exclude": "pod/x",
    }
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("bad", spec=volume_spec(("configmap", "app")), annotations=bad),
    )
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment(
            "good",
            spec=volume_spec(("configmap", "app")),
            annotations={"kube-nudge.io/enabled": "true"},
        ),
    )
    await kube.create(
        CONFIGMAPS.path(namespace),
        manifests.configmap("odd", {"K": "1"}, {"kube-nudge.io/share-with": "Not A Namespace!"}),
    )
    with caplog.at_level(logging.WARNING):
        async with running_controller(cluster, namespace) as running:
            await adopted(kube, namespace, "bad")
            await adopted(kube, namespace, "good")
            await running.controller.settled(timeout=30)
            [warning] = [
                e for e in await events(kube, namespace, "InvalidAnnotation")
                if e["involvedObject"]["name"] == "bad"
            ]  # fmt: skip
            for name in ("debounce", "max-rollouts", "strategy", "secrets", "exclude"):
                assert f"kube-nudge.io/{name}" in warning["message"], name
            source_warnings = [
                e for e in await events(kube, namespace, "InvalidAnnotation")
                if e["involvedObject"]["name"] == "odd"
            ]  # fmt: skip
            assert source_warnings and "share-with" in source_warnings[0]["message"]

            # Both keep working: a change to the shared ConfigMap rolls both.
            await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"K": "2"}})
            for name in ("bad", "good"):
                rolled = await wait_for_object(
                    kube,
                    DEPLOYMENTS.path(namespace),
                    name,
                    lambda o: template_hash(o, DEPLOYMENT) is not None,
                    timeout=30,
                )
                assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
                    kube, DEPLOYMENT, rolled, running.hmac_key
                )
    assert any("kube-nudge.io/debounce" in record.getMessage() for record in caplog.records)


async def test_huge_odd_and_many_sources(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    # ~1 MiB of data, 10,000 keys, non-UTF-8 binaryData, names at the length limit.
    long_name = "c" * 253
    await kube.create(
        CONFIGMAPS.path(namespace), manifests.configmap(long_name, {"big": "x" * 1_000_000})
    )
    await kube.create(
        CONFIGMAPS.path(namespace),
        manifests.configmap("many", {f"k{n}": str(n) for n in range(10_000)}),
    )
    binary = manifests.configmap("bin", {})
    binary["binaryData"] = {"blob": base64.b64encode(b"\xff\xfe\x00\x80").decode()}
    await kube.create(CONFIGMAPS.path(namespace), binary)
    sources = [("configmap", long_name), ("configmap", "many"), ("configmap", "bin")]
    for n in range(47):  # 50 sources in all
        await kube.create(SECRETS.path(namespace), manifests.secret(f"s{n}", {"v": str(n)}))
        sources.append(("secret", f"s{n}"))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment(
            "wide", spec=volume_spec(*sources), annotations={"kube-nudge.io/enabled": "true"}
        ),
    )
    async with running_controller(cluster, namespace) as running:
        await adopted(kube, namespace, "wide")
        await kube.merge_patch(
            CONFIGMAPS.path(namespace, "bin"),
            {"binaryData": {"blob": base64.b64encode(b"\x00\xff").decode()}},
        )
        rolled = await wait_for_object(
            kube,
            DEPLOYMENTS.path(namespace),
            "wide",
            lambda o: template_hash(o, DEPLOYMENT) is not None,
            timeout=30,
        )
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )


async def test_custom_resource_without_a_template_at_the_path(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    # Deployments registered under a wrong path stand in for a misconfigured --workload.
    wrong = WorkloadKind(DEPLOYMENTS, parse_path("spec.podTemplate"))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("d", annotations={"kube-nudge.io/enabled": "true"}),
    )
    async with running_controller(cluster, namespace, kinds=(wrong,)) as running:
        await running.controller.settled(timeout=30)
        [warning] = await events(kube, namespace, "NoPodTemplate")
        assert "spec.podTemplate" in warning["message"]
        assert running.metrics.holds.labels(reason="invalid")._value.get() >= 1


async def test_workload_deleted_while_queued_is_forgotten(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
    for name in ("gone", "stays"):
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(
                name,
                spec=volume_spec(("configmap", "app")),
                annotations={"kube-nudge.io/enabled": "true"},
            ),
        )
    async with running_controller(cluster, namespace, debounce=1.0) as running:
        await adopted(kube, namespace, "gone")
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"K": "2"}})
        await kube.delete(DEPLOYMENTS.path(namespace, "gone"))  # inside the debounce window
        rolled = await wait_for_object(
            kube,
            DEPLOYMENTS.path(namespace),
            "stays",
            lambda o: template_hash(o, DEPLOYMENT) is not None,
            timeout=30,
        )
        assert rolled
        await running.controller.settled(timeout=30)
        assert running.metrics.errors.labels(stage="reconcile")._value.get() == 0
