"""The fake kubelet (tests/integration/fakekubelet.py) against the real control plane:
a Deployment rolling to a bad config never becomes available and hits its progress
deadline while the old pods keep serving; env is resolved as a kubelet resolves it."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS, SECRETS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.manifests import CANARY
from kube_nudge_dev.waiting import until
from tests.integration.fakekubelet import NODES, FakeKubelet, placement

pytestmark = pytest.mark.cluster
JSON = dict[str, Any]
TIMEOUT = 60.0
DEADLINE = 10  # progressDeadlineSeconds (the API allows 1 and up: > minReadySeconds)


def node_name() -> str:
    return f"fake-kubelet-{uuid.uuid4().hex[:8]}"


def condition(obj: JSON, kind: str) -> JSON:
    found = (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind)
    return next(found, {})


def complete(obj: JSON, replicas: int) -> bool:
    """The Deployment's latest template is rolled out, every replica available, no old pod."""
    status = obj.get("status") or {}
    return (
        status.get("observedGeneration", 0) >= obj["metadata"]["generation"]
        and status.get("replicas") == replicas
        and status.get("updatedReplicas") == replicas
        and status.get("availableReplicas") == replicas
        and condition(obj, "Progressing").get("reason") == "NewReplicaSetAvailable"
    )


async def pods_on(kube: KubeClient, namespace: str, node: str) -> list[JSON]:
    found = await kube.get(PODS.path(namespace), fieldSelector=f"spec.nodeName={node}")
    return list(found["items"])


async def roll(kube: AdminClient, namespace: str, level: str) -> None:
    """Change the config, then restart the Deployment's pods (as kube-nudge would)."""
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": level}})
    template = {"metadata": {"annotations": {"kube-nudge.test/level": level}}}
    await kube.merge_patch(DEPLOYMENTS.path(namespace, "web"), {"spec": {"template": template}})


def good_level(env: Mapping[str, str]) -> bool:
    return env.get("LEVEL") == "good"


async def test_a_bad_config_never_becomes_available_and_misses_its_progress_deadline(
    kube: AdminClient, namespace: str
) -> None:
    node = node_name()
    body = manifests.deployment(
        "web", replicas=2, spec={**manifests.env_consumer(), **placement(node)}
    )  # maxSurge 1, maxUnavailable 0: the old pods serve until new ones are available
    body["spec"]["progressDeadlineSeconds"] = 0
    with pytest.raises(ApiError) as rejected:  # the smallest deadline is 1 s
        await kube.request("POST", DEPLOYMENTS.path(namespace), params={"dryRun": "All"}, body=body)
    assert rejected.value.status == 422
    body["spec"]["progressDeadlineSeconds"] = DEADLINE
    path = DEPLOYMENTS.path(namespace, "web")
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "good"}))

    async with FakeKubelet(kube, node, good_level) as kubelet:
        await kube.create(DEPLOYMENTS.path(namespace), body)

        async def rolled_out() -> bool:
            return complete(await kube.get(path), 2)

        await until(rolled_out, TIMEOUT)
        assert len(kubelet.ready_pods(namespace)) == 2
        assert not kubelet.unready_pods(namespace)

        # A bad config: the new pod runs but never becomes Ready; the old ones keep serving.
        await roll(kube, namespace, "bad")
        fewest_available = 2

        async def deadline_exceeded() -> bool:
            nonlocal fewest_available
            obj = await kube.get(path)
            fewest_available = min(fewest_available, obj["status"].get("availableReplicas", 0))
            progressing = condition(obj, "Progressing")
            return (progressing.get("status"), progressing.get("reason")) == (
                "False",
                "ProgressDeadlineExceeded",
            )

        await until(deadline_exceeded, DEADLINE + TIMEOUT)
        assert fewest_available == 2
        status = (await kube.get(path))["status"]
        assert (status["updatedReplicas"], status["availableReplicas"]) == (1, 2)
        assert status["unavailableReplicas"] == 1
        assert len(kubelet.ready_pods(namespace)) == 2
        assert len(kubelet.unready_pods(namespace)) == 1
        pods = await pods_on(kube, namespace, node)
        unready = [p for p in pods if condition(p, "Ready").get("status") != "True"]
        assert len(pods) == 3 and len(unready) == 1
        assert unready[0]["status"]["phase"] == "Running"
        assert condition(unready[0], "Ready")["reason"] == "ConfigInvalid"
        # It is the new ReplicaSet, the unready pod's, that timed out progressing.
        [owner] = unready[0]["metadata"]["ownerReferences"]
        progressing = condition(await kube.get(path), "Progressing")
        assert progressing["message"] == f'ReplicaSet "{owner["name"]}" has timed out progressing.'

        assert unready[0]["metadata"]["annotations"]["kube-nudge.test/level"] == "bad"

        # A good config rolls out past the failed one; scaled-down pods are really deleted.
        await roll(kube, namespace, "good")

        async def recovered() -> bool:
            if not complete(await kube.get(path), 2):
                return False
            pods = await pods_on(kube, namespace, node)
            return len(pods) == 2 and all(
                p["metadata"]["annotations"]["kube-nudge.test/level"] == "good" for p in pods
            )

        await until(recovered, TIMEOUT)
        assert kubelet.counts["deleted"] >= 3
        assert kubelet.counts["invalid"] == 1

    with pytest.raises(ApiError) as gone:
        await kube.get(NODES.path(name=node))
    assert gone.value.not_found
    assert await pods_on(kube, namespace, node) == []


async def test_env_is_resolved_as_a_kubelet_resolves_it(kube: AdminClient, namespace: str) -> None:
    node = node_name()
    await kube.create(
        CONFIGMAPS.path(namespace), manifests.configmap("cm", {"LEVEL": "good", "A": "1"})
    )
    await kube.create(SECRETS.path(namespace), manifests.secret("sec", {"password": "s3cret"}))
    cm_key = {"configMapKeyRef": {"name": "cm", "key": "LEVEL"}}
    spec = manifests.pod_spec(
        initContainers=[{
            "name": "init", "image": "registry.invalid/init:1",
            "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "A"}}}],
        }],
        containers=[{
            "name": "app", "image": "registry.invalid/app:1",
            "envFrom": [
                {"configMapRef": {"name": "cm"}, "prefix": "CM_"},
                {"secretRef": {"name": "sec"}},
                {"configMapRef": {"name": "absent", "optional": True}},
            ],
            "env": [
                {"name": "LEVEL", "valueFrom": cm_key},
                {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                {"name": "NO_KEY", "valueFrom": {"configMapKeyRef": {
                    "name": "cm", "key": "nope", "optional": True}}},
                {"name": "NO_MAP", "valueFrom": {"configMapKeyRef": {
                    "name": "absent", "key": "x", "optional": True}}},
                {"name": "URL", "value": "http://$(LEVEL):$(UNSET)/$$(LEVEL)"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "CM_A", "value": "override"},
            ],
        }],
        **placement(node),
    )  # fmt: skip
    seen: list[dict[str, str]] = []

    def record(env: Mapping[str, str]) -> bool:
        seen.append({k: "<canary>" if v == CANARY else v for k, v in env.items()})
        return True

    async with FakeKubelet(kube, node, record) as kubelet:
        await kube.create(PODS.path(namespace), {"metadata": {"name": "p"}, "spec": spec})

        async def ready() -> bool:
            pod = await kube.get(PODS.path(namespace, "p"))
            return condition(pod, "Ready").get("status") == "True"

        await until(ready, TIMEOUT)
        assert kubelet.ready_pods(namespace) == {"p"}
    assert seen == [
        {"X": "1"},
        {
            "CM_LEVEL": "good", "CM_A": "override", "password": "s3cret", "canary": "<canary>",
            "LEVEL": "good", "PW": "s3cret", "URL": "http://good:$(UNSET)/$(LEVEL)", "POD": "p",
        },
    ]  # fmt: skip


async def test_missing_config_waits_and_a_running_pod_never_rereads_it(
    kube: AdminClient, namespace: str
) -> None:
    node = node_name()

    def not_broken(env: Mapping[str, str]) -> bool:
        return env.get("MODE") != "broken"

    def pod(name: str, configmap: str, *, init: bool = False) -> JSON:
        spec = {**manifests.env_consumer("MODE", configmap), **placement(node)}
        if init:
            spec["initContainers"] = [{**spec["containers"][0], "name": "setup"}]
            spec["containers"] = [{"name": "app", "image": "registry.invalid/app:1"}]
        return {"metadata": {"name": name}, "spec": spec}

    async def status_of(name: str) -> JSON:
        return dict((await kube.get(PODS.path(namespace, name))).get("status") or {})

    async def waiting_reason(name: str, field: str = "containerStatuses") -> str | None:
        statuses = (await status_of(name)).get(field) or [{}]
        reason = (statuses[0].get("state") or {}).get("waiting", {}).get("reason")
        return None if reason is None else str(reason)

    async def ready(name: str) -> str | None:
        found = condition({"status": await status_of(name)}, "Ready").get("status")
        return None if found is None else str(found)

    async with FakeKubelet(kube, node, not_broken) as kubelet:
        # A missing required ConfigMap: Pending, retried until it exists.
        await kube.create(PODS.path(namespace), pod("late", "later"))

        async def config_error() -> bool:
            return await waiting_reason("late") == "CreateContainerConfigError"

        await until(config_error, TIMEOUT)
        assert (await status_of("late"))["phase"] == "Pending"
        assert kubelet.waiting_pods(namespace) == {"late"}
        await kube.create(
            CONFIGMAPS.path(namespace), manifests.configmap("later", {"MODE": "broken"})
        )

        async def running_unready() -> bool:
            status = await status_of("late")
            return status.get("phase") == "Running" and await ready("late") == "False"

        await until(running_unready, TIMEOUT)
        assert condition({"status": await status_of("late")}, "Ready")["reason"] == "ConfigInvalid"

        # Fixing the config changes nothing for the running pod; a new pod reads it.
        await kube.merge_patch(CONFIGMAPS.path(namespace, "later"), {"data": {"MODE": "ok"}})
        await kube.create(PODS.path(namespace), pod("fresh", "later"))

        async def fresh_ready() -> bool:
            return await ready("fresh") == "True"

        await until(fresh_ready, TIMEOUT)
        assert await ready("late") == "False"
        assert kubelet.unready_pods(namespace) == {"late"}
        assert kubelet.ready_pods(namespace) == {"fresh"}

        # An init container with a bad config crash-loops, and re-reads it on restart.
        await kube.create(
            CONFIGMAPS.path(namespace), manifests.configmap("setup", {"MODE": "broken"})
        )
        await kube.create(PODS.path(namespace), pod("init", "setup", init=True))

        async def crash_looping() -> bool:
            return await waiting_reason("init", "initContainerStatuses") == "CrashLoopBackOff"

        await until(crash_looping, TIMEOUT)
        status = await status_of("init")
        assert status["phase"] == "Pending"
        assert condition({"status": status}, "Initialized")["reason"] == "ConfigInvalid"
        await kube.merge_patch(CONFIGMAPS.path(namespace, "setup"), {"data": {"MODE": "ok"}})

        async def init_ready() -> bool:
            return await ready("init") == "True"

        await until(init_ready, TIMEOUT)
        assert kubelet.counts["config_error"] >= 1
        assert kubelet.counts["init_invalid"] >= 1
