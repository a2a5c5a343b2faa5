"""Strategy `hot` against the real API server: a change that only refreshed volumes carry
is delivered without a rollout (the pods get the kubelet nudge; the test plays each pod's
`kube-nudge agent` by writing what it writes: the keyed hash of the files it loaded, under
the namespace's agent key), a change an env var carries rolls, a pod whose agent reloaded
other data than delivered is not confirmed however fresh its reload, a failed or missing
reload falls back as `kube-nudge.io/hot-fallback` says, and a pod template without the
agent never waits for a confirmation that can't come."""

from __future__ import annotations

import logging

import pytest

from kube_nudge.agentwire import (
    AGENT_KEY_SECRET,
    LOADED_AT,
    RELOAD_FAILED_AT,
    key_id,
)
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.reporting.status import collect
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge.strategies.hot.verdicts import NO_AGENT
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until, wait_for_object
from tests.agent_support import KEY
from tests.integration.controller_support import (
    events,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.hot_support import (
    DATA,
    agent_reports,
    nudged,
    pods,
    replicasets,
    start,
    start_without_agent,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
OTHER_KEY = b"not-the-namespaces-agent-key"


async def test_a_volume_change_reloads_in_place_and_an_env_change_rolls(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    before = await start(kube, namespace)
    async with running_controller(cluster, namespace) as running:
        reloads = running.metrics.hot_reloads
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "port 81"}})
        found = await nudged(kube, namespace)
        assert sorted(p["metadata"]["name"] for p in found) == sorted(
            p["metadata"]["name"] for p in before
        )  # the same pods: nothing restarted
        assert await replicasets(kube, namespace) == 1
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) is None  # the template was not touched
        [delivering] = await posted(kube, namespace, "HotReload")
        assert "configmap/app keys [app.conf] changed" in delivering["message"]
        assert "asked the kubelet of 2 pods" in delivering["message"]
        assert "port 81" not in delivering["message"]
        [row] = await collect(kube, namespaces=[namespace], hmac_key=running.hmac_key)
        applied = row.applied_hash
        assert (row.state, row.desired_hash) == ("reloading", applied)
        assert row.detail.endswith("2 pod(s) have not confirmed it yet")

        for pod in found:  # each pod's agent reloads the app and says what it loaded
            await agent_reports(kube, namespace, pod["metadata"]["name"], LOADED_AT,
                                {**DATA, "app.conf": "port 81"})  # fmt: skip
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: HOT_RELOAD not in (o["metadata"].get("annotations") or {}), timeout=30,
        )  # fmt: skip
        [reloaded] = await posted(kube, namespace, "HotReloaded")
        assert reloaded["message"].startswith("every pod (2) reloaded config v1-")
        assert reloads.labels(outcome="reloaded")._value.get() == 1
        assert await replicasets(kube, namespace) == 1
        [row] = await collect(kube, namespaces=[namespace], hmac_key=running.hmac_key)
        assert (row.state, dict(row.pods)) == ("current", {applied: 2})

        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        [impossible] = await posted(kube, namespace, "HotReloadImpossible")
        assert impossible["message"] == (
            "cannot reload in place: configmap/app keys [LEVEL] are read only at start "
            "(env app); rolling instead"
        )
        assert reloads.labels(outcome="rolled")._value.get() == 1
        await until(lambda: _more_than_one_replicaset(kube, namespace), timeout=30)


async def _more_than_one_replicaset(kube: KubeClient, namespace: str) -> bool:
    return await replicasets(kube, namespace) == 2


async def test_a_failed_reload_falls_back_to_a_rollout(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await start(kube, namespace)
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "bad"}})
        first, second = await nudged(kube, namespace)
        await agent_reports(kube, namespace, second["metadata"]["name"], LOADED_AT,
                            {**DATA, "app.conf": "bad"})  # fmt: skip
        await agent_reports(kube, namespace, first["metadata"]["name"], RELOAD_FAILED_AT)
        web = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        assert HOT_RELOAD not in web["metadata"]["annotations"]
        [failed] = await posted(kube, namespace, "HotReloadFailed")
        assert failed["type"] == "Warning"
        assert failed["message"].startswith("pods reported a failed reload of config v1-")
        assert failed["message"].endswith(
            f": {first['metadata']['name']}; rolling instead (kube-nudge.io/hot-fallback: rollout)"
        )
        assert running.metrics.hot_reloads.labels(outcome="failed")._value.get() == 1
        await until(lambda: _more_than_one_replicaset(kube, namespace), timeout=30)


async def test_silent_pods_only_warn_when_asked_to(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    settings = {"kube-nudge.io/hot-fallback": "warn", "kube-nudge.io/hot-deadline": "5s"}
    await start(kube, namespace, **settings)
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "x"}})
        await nudged(kube, namespace)  # no agent answers
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: HOT_RELOAD not in (o["metadata"].get("annotations") or {}), timeout=30,
        )  # fmt: skip
        [failed] = await posted(kube, namespace, "HotReloadFailed")
        assert "did not confirm reloading config v1-" in failed["message"]
        assert "within 5 s" in failed["message"]
        assert failed["message"].endswith(
            "not rolling (kube-nudge.io/hot-fallback: warn): those pods may run the previous "
            "config until they restart"
        )
        assert running.metrics.hot_reloads.labels(outcome="timed-out")._value.get() == 1
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) is None
        assert await replicasets(kube, namespace) == 1


async def test_a_fresh_reload_of_other_data_is_not_a_confirmation(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    settings = {"kube-nudge.io/hot-fallback": "warn", "kube-nudge.io/hot-deadline": "5s"}
    await start(kube, namespace, **settings)
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "new"}})
        first, second = sorted(p["metadata"]["name"] for p in await nudged(kube, namespace))
        # Both agents reload after the change, and say so; but the first loaded the files
        # as they were before it, the second hashed them under a key of its own.
        await agent_reports(kube, namespace, first, LOADED_AT, DATA)
        await agent_reports(kube, namespace, second, LOADED_AT, {**DATA, "app.conf": "new"},
                            OTHER_KEY)  # fmt: skip
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: HOT_RELOAD not in (o["metadata"].get("annotations") or {}), timeout=30,
        )  # fmt: skip
        [failed] = await posted(kube, namespace, "HotReloadFailed")
        assert f"within 5 s: {first}, {second} " in failed["message"]
        assert f"{first}: it loaded other data than delivered in /etc/app" in failed["message"]
        assert (
            f"{second}: its agent hashes with key {key_id(OTHER_KEY)}, not "
            f"{AGENT_KEY_SECRET}'s ({key_id(KEY)})"
        ) in failed["message"]
        assert running.metrics.hot_reloads.labels(outcome="timed-out")._value.get() == 1
        assert running.metrics.hot_reloads.labels(outcome="reloaded")._value.get() == 0


async def test_without_the_agent_in_the_pod_template_a_change_rolls_at_once_with_a_warning(
    kube: AdminClient, cluster: LocalCluster, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No container runs `kube-nudge agent`, so no pod could ever confirm a reload: a change
    its volume carries rolls at once, not at the hour's deadline, saying why."""
    await start_without_agent(kube, namespace, **{"kube-nudge.io/hot-deadline": "1h"})
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "port 81"}})
        web = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        assert HOT_RELOAD not in web["metadata"]["annotations"]  # nothing waits for agents
        [impossible] = await posted(kube, namespace, "HotReloadImpossible")
        assert impossible["type"] == "Warning"
        assert impossible["message"] == f"cannot reload in place: {NO_AGENT}; rolling instead"
        assert await events(kube, namespace, "HotReload") == []
        assert running.metrics.hot_reloads.labels(outcome="rolled")._value.get() == 1
        assert [r.levelno for r in caplog.records if NO_AGENT in r.getMessage()] == [
            logging.WARNING
        ]
        await until(lambda: _more_than_one_replicaset(kube, namespace), timeout=30)


async def test_without_the_agent_and_fallback_warn_a_change_is_delivered_and_warned_at_once(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """`hot-fallback: warn` never rolls for pods that don't confirm: without an agent the
    change is delivered in place (the kubelet nudge) and the Warning comes at once."""
    settings = {"kube-nudge.io/hot-fallback": "warn", "kube-nudge.io/hot-deadline": "1h"}
    before = await start_without_agent(kube, namespace, **settings)
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "port 81"}})
        [unconfirmed] = await posted(kube, namespace, "HotReloadUnconfirmed")
        assert unconfirmed["type"] == "Warning"
        assert unconfirmed["message"].startswith(
            "delivered without a rollout, unconfirmed: configmap/app keys [app.conf] changed"
        )
        assert (
            f"asked the kubelet of 2 pods to refresh their volumes, but {NO_AGENT}"
            in unconfirmed["message"]
        )
        assert running.metrics.hot_reloads.labels(outcome="unconfirmed")._value.get() == 1
        web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
        assert template_hash(web, DEPLOYMENT) is None
        assert HOT_RELOAD not in web["metadata"]["annotations"]
        found = await pods(kube, namespace)
        assert {p["metadata"]["name"] for p in found} == {p["metadata"]["name"] for p in before}
        assert all(HOT_RELOAD in p["metadata"]["annotations"] for p in found)  # nudged
        assert await replicasets(kube, namespace) == 1
