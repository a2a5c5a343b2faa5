"""`kube-nudge.io/pod-selector` against a real API server: a changed ConfigMap or Secret
replaces the pods it names through the Eviction API, one budget's worth at a time (seen
from a watch on the pods), never evicts pods no controller would bring back, and a selector
that doesn't parse is reported and acts on nothing."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable

import pytest

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    PODDISRUPTIONBUDGETS,
    PODS,
    SECRETS,
)
from kube_nudge.model.annotations import POD_SELECTOR
from kube_nudge.model.projection import parse_timestamp
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until, wait_for_objects
from tests.integration.controller_support import (
    audit_entries,
    events,
    eventually,
    running_controller,
)

pytestmark = pytest.mark.cluster
TIMEOUT = 120  # generous: 2 cores, shared with other suites' clusters


def ready(pod: JSON) -> bool:
    """Serving: Ready and not on its way out."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


async def ready_pods(
    kube: KubeClient, namespace: str, selector: str, count: int
) -> dict[str, JSON]:
    """Wait (on a watch) until exactly ``count`` pods match, all Ready; return them."""
    return await wait_for_objects(
        kube, PODS.path(namespace),
        lambda pods: len(pods) == count and all(ready(p) for p in pods.values()),
        timeout=TIMEOUT, params={"labelSelector": selector},
    )  # fmt: skip


async def after_their_start(pods: dict[str, JSON]) -> None:
    """API timestamps have whole seconds, and a change in the pods' own second counts as
    seen: wait until a change lands in a later second than every start."""
    latest = max(parse_timestamp(p["status"]["startTime"]) or 0.0 for p in pods.values())
    await eventually(lambda: time.time() >= latest + 1.0, timeout=5)


class PodWatch:
    """The pods matching a selector as a watch reports them, event by event: no state in
    between is missed, so the worst moment is really seen."""

    def __init__(self, kube: KubeClient, namespace: str, selector: str, replicas: int) -> None:
        self.kube, self.path, self.replicas = kube, PODS.path(namespace), replicas
        self.params = {"labelSelector": selector}
        self.pods: dict[str, JSON] = {}
        self.version = ""
        self.worst = 0
        """The most pods unavailable at once (``replicas`` minus those serving)."""

    async def start(self) -> None:
        """List now; ``until`` watches from this list's version on."""
        async for page, version in self.kube.list_pages(self.path, self.params):
            self.pods.update((p["metadata"]["name"], p) for p in page)
            self.version = version
        self._observe()

    def _observe(self) -> None:
        serving = sum(1 for pod in self.pods.values() if ready(pod))
        self.worst = max(self.worst, self.replicas - serving)

    async def until(self, condition: Callable[[dict[str, JSON]], bool]) -> dict[str, JSON]:
        """Follow the watch until ``condition(pods by name)`` holds."""
        async with asyncio.timeout(TIMEOUT):
            while not condition(self.pods):  # a watch the server ends is resumed
                stream = self.kube.watch(self.path, self.params, resource_version=self.version)
                async for event in stream:
                    if self._apply(event) and condition(self.pods):
                        return self.pods
        return self.pods

    def _apply(self, event: JSON) -> bool:
        obj = event.get("object") or {}
        self.version = obj.get("metadata", {}).get("resourceVersion", self.version)
        if event.get("type") == "BOOKMARK":
            return False
        name = obj["metadata"]["name"]
        if event.get("type") == "DELETED":
            self.pods.pop(name, None)
        else:
            self.pods[name] = obj
        self._observe()
        return True


def evictions(cluster: LocalCluster, namespace: str) -> list[tuple[str, int]]:
    """(pod, HTTP status) of every eviction kube-nudge asked for in ``namespace``, from the
    API server's audit log."""
    return [
        (entry["objectRef"]["name"], entry["responseStatus"]["code"])
        for entry in audit_entries(cluster, namespace)
        if entry["objectRef"].get("subresource") == "eviction"
    ]


async def has_event(kube: KubeClient, namespace: str, reason: str) -> bool:
    """Whether an Event with ``reason`` was posted in ``namespace``."""
    return bool(await events(kube, namespace, reason))


def budget(name: str, max_unavailable: int) -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": name}}},
    }


async def test_a_changed_configmap_replaces_its_pods_one_budget_at_a_time(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    selector = {POD_SELECTOR: "app=webapp"}
    # The ConfigMap first: the pods start after it, so they are fresh until it changes.
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"A": "1"}, selector))
    await kube.create(PODDISRUPTIONBUDGETS.path(namespace), budget("webapp", 1))
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("webapp", replicas=4))
    original = await ready_pods(kube, namespace, "app=webapp", 4)
    await after_their_start(original)
    async with running_controller(cluster, namespace) as running:
        watch = PodWatch(kube, namespace, "app=webapp", replicas=4)
        await watch.start()
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"A": "2"}})
        final = await watch.until(
            lambda pods: (
                not set(original) & set(pods)
                and len(pods) == 4
                and all(ready(p) for p in pods.values())
            )
        )
        assert watch.worst == 1  # never two at once; and one went at a time
        await until(lambda: has_event(kube, namespace, "PodsReplaced"), TIMEOUT)
        [replaced] = await events(kube, namespace, "PodsReplaced")
        assert (replaced["type"], replaced["involvedObject"]["kind"]) == ("Normal", "ConfigMap")
        assert replaced["involvedObject"]["name"] == "app"
        assert replaced["message"].startswith("replaced 4 pods matching app=webapp")
        evicted = running.metrics.pod_evictions.labels(outcome="evicted")._value.get()
        assert evicted == 4
    assert len(final) == 4
    done = [name for name, code in evictions(cluster, namespace) if code == 201]
    assert sorted(done) == sorted(original)  # each original once, nothing else
    assert not [code for _, code in evictions(cluster, namespace) if code not in (201, 429)]
    assert await events(kube, namespace, "PodNotReplaced") == []


async def test_pods_without_a_controller_are_named_and_left_alone(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    selector = {POD_SELECTOR: "app=webapp"}
    await kube.create(SECRETS.path(namespace), manifests.secret("app", {"A": "1"}, selector))
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("webapp", replicas=2))
    bare = {"apiVersion": "v1", "kind": "Pod", "spec": manifests.pod_spec(),
            "metadata": {"name": "bare", "labels": {"app": "webapp"}}}  # fmt: skip
    await kube.create(PODS.path(namespace), bare)
    original = await ready_pods(kube, namespace, "app=webapp", 3)
    bare_uid = original["bare"]["metadata"]["uid"]
    await after_their_start(original)
    async with running_controller(cluster, namespace) as running:
        watch = PodWatch(kube, namespace, "app=webapp", replicas=3)
        await watch.start()
        value = base64.b64encode(b"2").decode()
        await kube.merge_patch(SECRETS.path(namespace, "app"), {"data": {"A": value}})
        final = await watch.until(
            lambda pods: (
                not (set(original) - {"bare"}) & set(pods)
                and sum(ready(p) for name, p in pods.items() if name.startswith("webapp-")) == 2
            )
        )
        assert final["bare"]["metadata"]["uid"] == bare_uid and ready(final["bare"])
        await until(lambda: has_event(kube, namespace, "PodsReplaced"), TIMEOUT)
        [warning] = await events(kube, namespace, "PodNotReplaced")
        assert (warning["type"], warning["involvedObject"]["kind"]) == ("Warning", "Secret")
        assert warning["involvedObject"]["name"] == "app"
        assert "have no controller to replace them: bare;" in warning["message"]
        assert warning["count"] == 1
        [replaced] = await events(kube, namespace, "PodsReplaced")
        assert replaced["message"].startswith("replaced 2 pods matching app=webapp")
        assert running.metrics.pods_not_replaced._value.get() == 1
        assert running.metrics.pod_evictions.labels(outcome="evicted")._value.get() == 2
    assert watch.worst == 1  # no budget: one pod at a time
    still = await kube.get(PODS.path(namespace, "bare"))
    assert still["metadata"]["uid"] == bare_uid and ready(still)
    assert "bare" not in [name for name, _ in evictions(cluster, namespace)]
    # Left stale, a later test's cluster-wide replica would warn about it again.
    await kube.delete(PODS.path(namespace, "bare"))


async def test_a_bad_selector_is_reported_and_evicts_nothing(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(
        "app", {"A": "1"}, {POD_SELECTOR: "app in webapp"}))  # fmt: skip
    # A well-annotated neighbour: once its pod is replaced, the bad one had its chance too.
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(
        "control", {"A": "1"}, {POD_SELECTOR: "app=control"}))  # fmt: skip
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("webapp", replicas=2))
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("control"))
    original = await ready_pods(kube, namespace, "app=webapp", 2)
    await after_their_start({**original, **await ready_pods(kube, namespace, "app=control", 1)})
    async with running_controller(cluster, namespace) as running:
        await until(lambda: has_event(kube, namespace, "InvalidAnnotation"), TIMEOUT)
        for name in ("app", "control"):
            await kube.merge_patch(CONFIGMAPS.path(namespace, name), {"data": {"A": "2"}})
        await until(lambda: has_event(kube, namespace, "PodsReplaced"), TIMEOUT)
        assert running.metrics.pod_evictions.labels(outcome="evicted")._value.get() == 1
    [invalid] = await events(kube, namespace, "InvalidAnnotation")
    assert (invalid["type"], invalid["involvedObject"]["name"]) == ("Warning", "app")
    assert invalid["message"].startswith(
        "kube-nudge.io/pod-selector 'app in webapp': not a label selector"
    )
    [replaced] = await events(kube, namespace, "PodsReplaced")
    assert replaced["involvedObject"]["name"] == "control"
    now = await kube.get(PODS.path(namespace), labelSelector="app=webapp")
    assert sorted(p["metadata"]["name"] for p in now["items"]) == sorted(original)
    assert all(ready(p) for p in now["items"])
    assert [name for name, _ in evictions(cluster, namespace) if name in original] == []


async def test_a_change_made_while_kube_nudge_was_down_replaces_the_pods_at_start(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Level-triggered: nothing remembered, so the pods' start times against the data's
    change time are enough for the next leader to carry out what it missed."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(
        "app", {"A": "1"}, {POD_SELECTOR: "app=webapp"}))  # fmt: skip
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("webapp", replicas=2))
    original = await ready_pods(kube, namespace, "app=webapp", 2)
    await after_their_start(original)
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"A": "2"}})
    watch = PodWatch(kube, namespace, "app=webapp", replicas=2)
    await watch.start()
    async with running_controller(cluster, namespace):
        await watch.until(
            lambda pods: (
                not set(original) & set(pods)
                and len(pods) == 2
                and all(ready(p) for p in pods.values())
            )
        )
        await until(lambda: has_event(kube, namespace, "PodsReplaced"), TIMEOUT)
    assert watch.worst == 1
    [replaced] = await events(kube, namespace, "PodsReplaced")
    assert replaced["message"].startswith("replaced 2 pods matching app=webapp")
    assert sorted(name for name, code in evictions(cluster, namespace) if code == 201) == sorted(
        original
    )
