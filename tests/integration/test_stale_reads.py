"""A reconcile never acts twice on a stale read. The controller's Deployment watch runs
through an API proxy that holds every event back (``ApiProxy.delay_watches``), so its
cache lags its own writes by seconds; an edit of the workload made just before the
controller writes reaches the cache after that write and before the write's echo, and
the pass it brings reads what the write has already changed. That pass must do nothing
(``runtime/expectations.py``): each test sees it return ``LAGGING`` with the edit in the
cache and the write not yet, so it fails if the proxy's delay never took effect. The echo
brings the workload back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.agentwire import LOADED_AT
from kube_nudge.controller.reader import WorkloadKey
from kube_nudge.controller.reconciler import Action, Outcome
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.projection import resource_version
from kube_nudge.strategies.hot.settings import HOT_RELOAD, hot_reload
from kube_nudge.strategies.snapshot.copies import SNAPSHOT_LABEL
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object
from tests.integration.apiproxy import proxy_for
from tests.integration.controller_support import (
    Running,
    background,
    events,
    eventually,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.fakekubelet import FakeKubelet
from tests.integration.hot_support import DATA, agent_reports, nudged, replicasets, start
from tests.integration.rollout_timeline import (
    Seen,
    change,
    held_for,
    kubelet_fleet,
    node_for,
    valid,
    watching,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
LAG = 4.0
"""Seconds each Deployment watch event is held back: more than strategy hot's 2 s poll,
so the confirmation is written before the edit made ahead of it reaches the cache."""


async def poke(kube: AdminClient, namespace: str, value: str) -> int:
    """An edit of `web` nobody but the test cares about; the resourceVersion it made."""
    edited = await kube.merge_patch(
        DEPLOYMENTS.path(namespace, "web"),
        {"metadata": {"annotations": {"example.com/poke": value}}},
    )
    return resource_version(edited["metadata"])


def cached(running: Running, namespace: str) -> Any:
    return running.controller.cache.workload((DEPLOYMENT, namespace, "web"))


@contextlib.contextmanager
def lagging_passes(running: Running, namespace: str) -> Iterator[list[int]]:
    """The resourceVersion of `web` in the cache at each pass over it that returned
    ``LAGGING`` (our own write not seen yet) while the block ran. No metric counts those
    passes (``kube_nudge_workloads`` leaves them out) and their DEBUG record carries the
    workload only in its message's arguments, so the running controller's reconciler is
    wrapped here: the product is unchanged. The version is read as the pass returns,
    before anything else runs: the one the pass read."""
    reconciler = running.controller.reconciler
    reconcile = reconciler.reconcile
    found: list[int] = []

    async def observed(key: WorkloadKey) -> Outcome:
        outcome = await reconcile(key)
        if outcome.action is Action.LAGGING and key == (DEPLOYMENT, namespace, "web"):
            found.append(cached(running, namespace).resource_version)
        return outcome

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reconciler, "reconcile", observed)
        yield found


def saw_the_lag(lagging: list[int], edit: int, write: int) -> bool:
    """Whether a pass returned LAGGING reading `web` with ``edit`` and without ``write``:
    the edit had reached the cache, the write's echo had not."""
    return any(edit <= seen < write for seen in lagging)


async def caught_up(running: Running, namespace: str, version: int) -> None:
    """Until the controller's cache shows `web` at ``version`` or later, then settled."""
    await eventually(
        lambda: (
            (view := cached(running, namespace)) is not None and view.resource_version >= version
        ),
        timeout=30,
    )
    await running.controller.settled(timeout=30)


async def create_web(kube: KubeClient, namespace: str, annotations: dict[str, str]) -> None:
    """ConfigMap ``app`` and Deployment ``web`` reading all of it by ``envFrom``."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", DATA))
    spec = manifests.pod_spec(containers=[{
        "name": "app", "image": "registry.invalid/app:1",
        "envFrom": [{"configMapRef": {"name": "app"}}],
    }])  # fmt: skip
    deployment = manifests.deployment("web", spec=spec, annotations=annotations)
    await kube.create(DEPLOYMENTS.path(namespace), deployment)


async def roll_behind_a_poke(
    kube: AdminClient, running: Running, namespace: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Poke ``web``, then change ``app``: the poke reaches the lagging cache after the
    rollout is written, before its echo. The rolled workload, and the latest once the
    cache shows it and the controller settled."""
    with lagging_passes(running, namespace) as lagging:
        poked = await poke(kube, namespace, "before-the-rollout")
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "x"}})
        rolled = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        assert resource_version(rolled["metadata"]) > poked
        await caught_up(running, namespace, resource_version(rolled["metadata"]))
    assert saw_the_lag(lagging, poked, resource_version(rolled["metadata"])), lagging
    latest = await kube.get(DEPLOYMENTS.path(namespace, "web"))
    await caught_up(running, namespace, resource_version(latest["metadata"]))
    return rolled, latest


async def test_a_hot_reload_is_confirmed_once_while_the_cache_lags(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    found = await start(kube, namespace)
    async with proxy_for(cluster) as proxy:
        proxy.delay_watches("deployments", LAG)
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        async with running_controller(cluster, namespace, kubeconfig=kubeconfig) as running:
            reloads = running.metrics.hot_reloads.labels(outcome="reloaded")
            await kube.merge_patch(
                CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "port 81"}}
            )
            found = await nudged(kube, namespace)
            await eventually(lambda: hot_reload(cached(running, namespace)) is not None,
                             timeout=30)  # fmt: skip
            with lagging_passes(running, namespace) as lagging:
                poked = await poke(kube, namespace, "before-the-confirmation")
                for pod in found:
                    await agent_reports(kube, namespace, pod["metadata"]["name"], LOADED_AT,
                                        {**DATA, "app.conf": "port 81"})  # fmt: skip
                confirmed = await wait_for_object(
                    kube, DEPLOYMENTS.path(namespace), "web",
                    lambda o: HOT_RELOAD not in (o["metadata"].get("annotations") or {}),
                    timeout=30,
                )  # fmt: skip
                # The poke reaches the cache after the confirmation was written: the pass it
                # brings still sees the hot-reload record.
                assert resource_version(confirmed["metadata"]) > poked
                await caught_up(running, namespace, resource_version(confirmed["metadata"]))
            assert saw_the_lag(lagging, poked, resource_version(confirmed["metadata"])), lagging
            [reloaded] = await posted(kube, namespace, "HotReloaded")
            assert (reloads._value.get(), reloaded.get("count", 1)) == (1, 1)


async def test_a_rollout_is_written_once_while_the_cache_lags(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await create_web(kube, namespace, ENABLED)
    async with proxy_for(cluster) as proxy:
        proxy.delay_watches("deployments", LAG)
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        async with running_controller(cluster, namespace, kubeconfig=kubeconfig) as running:
            nudges = running.metrics.nudges.labels(kind="Deployment")
            rolled, latest = await roll_behind_a_poke(kube, running, namespace)
            assert nudges._value.get() == 1
            assert template_hash(latest, DEPLOYMENT) == template_hash(rolled, DEPLOYMENT)
            assert [e.get("count", 1) for e in await events(kube, namespace, "Rolling")] == [1]
            await until(lambda: _two_replicasets(kube, namespace), timeout=30)


async def test_a_snapshot_rollout_copies_and_writes_once_while_the_cache_lags(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Strategy snapshot: its copy of the changed ConfigMap is made once, and the template
    is pointed at it once, though a pass reads the workload before its write is seen."""
    await create_web(kube, namespace, {**ENABLED, "kube-nudge.io/strategy": "snapshot"})
    async with proxy_for(cluster) as proxy:
        proxy.delay_watches("deployments", LAG)
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        async with running_controller(cluster, namespace, kubeconfig=kubeconfig) as running:
            nudges = running.metrics.nudges.labels(kind="Deployment")
            await eventually(lambda: cached(running, namespace) is not None, timeout=30)
            await running.controller.settled(timeout=30)
            before = await snapshot_copies(kube, namespace)
            rolled, latest = await roll_behind_a_poke(kube, running, namespace)
            assert nudges._value.get() == 1
            assert len(await snapshot_copies(kube, namespace) - before) == 1
            assert template_hash(latest, DEPLOYMENT) == template_hash(rolled, DEPLOYMENT)
            assert [e.get("count", 1) for e in await events(kube, namespace, "Rolling")] == [1]


async def snapshot_copies(kube: KubeClient, namespace: str) -> set[str]:
    """The names of the snapshot copies of ConfigMaps in ``namespace``."""
    listed = await kube.get(CONFIGMAPS.path(namespace), labelSelector=SNAPSHOT_LABEL)
    return {item["metadata"]["name"] for item in listed["items"]}


async def _two_replicasets(kube: KubeClient, namespace: str) -> bool:
    return await replicasets(kube, namespace) == 2


ROLLBACK = {"kube-nudge.io/strategy": "snapshot", "kube-nudge.io/on-failure": "rollback"}


async def test_a_failed_rollout_is_rolled_back_once_while_the_cache_lags(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """The rollback case under lag: the first change after adoption is broken (the fake
    kubelet never makes its pods Ready), so it fails and is rolled back onto the adopted
    config's copies. Edits of ``web`` keep coming meanwhile, so passes read it before the
    controller's own writes (the failure record, the rollback) show: those passes do
    nothing. One rollout, one rollback, one RolledBack, and the adopted config is not
    adopted again."""
    async with FakeKubelet(kube, node_for(namespace), valid):
        await kubelet_fleet(kube, namespace, {"web": None}, **ROLLBACK)
        async with watching(kube, namespace) as timeline, proxy_for(cluster) as proxy:
            await timeline.until(lambda: timeline.seen.get("web", Seen()).done)
            proxy.delay_watches("deployments", LAG)
            kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
            async with running_controller(cluster, namespace, kubeconfig=kubeconfig) as running:
                await eventually(lambda: (view := cached(running, namespace)) is not None
                                 and view.baseline_hash is not None, timeout=30)  # fmt: skip
                await running.controller.settled(timeout=30)
                start = len(timeline.entries)
                with lagging_passes(running, namespace) as lagging:
                    async with background(_keep_poking(kube, namespace)):
                        await change(kube, namespace, "broken")
                        await timeline.until(lambda: timeline.seen["web"].failed)
                        await held_for(kube, namespace, "RolledBack")
                        await timeline.until(lambda: timeline.seen["web"].done)
                    latest = await kube.get(DEPLOYMENTS.path(namespace, "web"))
                    await caught_up(running, namespace, resource_version(latest["metadata"]))
                await held_for(kube, namespace, "ConfigRolledBack")
                rolled = [n for _, n, w in timeline.entries[start:] if w == "template"]
                assert rolled == ["web", "web"]  # onto the broken config, and back: once each
                [rolled_back] = await events(kube, namespace, "RolledBack")
                assert rolled_back.get("count", 1) == 1
                assert "made at adoption" in rolled_back["message"]
                assert [e.get("count", 1) for e in await events(kube, namespace, "Adopted")] == [1]
                assert lagging, "no pass read web behind the controller's own writes"


async def _keep_poking(kube: AdminClient, namespace: str) -> None:
    """Edit ``web`` twice a second (at most 240 times) until cancelled: each edit made
    within the lag before one of the controller's writes reaches its cache after it."""
    for n in range(240):
        await poke(kube, namespace, str(n))
        await asyncio.sleep(0.5)  # a paced load, not a wait for a condition
