"""Coalescing, restart safety, missing config, flap caps, custom resources, compat, isolation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    REPLICASETS,
    SECRETS,
    Resource,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import BASELINE_HASH, SourceKind, parse_path
from kube_nudge.model.projection import parse_timestamp
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_object, wait_for_objects
from tests.integration.controller_support import (
    HMAC_SECRET,
    controller_writes,
    events,
    eventually,
    expected_hash,
    install_crd,
    kube_nudge_cli,
    running_controller,
    template_hash,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


def app_spec() -> dict[str, Any]:
    """Consumes configmap/app (all keys) and secret/db (key password)."""
    return manifests.pod_spec(
        containers=[{
            "name": "app", "image": "registry.invalid/app:1",
            "envFrom": [{"configMapRef": {"name": "app"}}],
            "env": [{"name": "PW",
                     "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
        }],
    )  # fmt: skip


async def make_app(kube: KubeClient, namespace: str, annotations: dict[str, str] | None = None,
                   *, with_sources: bool = True) -> None:  # fmt: skip
    if with_sources:
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
        await kube.create(
            SECRETS.path(namespace), manifests.secret("db", {"password": "s3cr3t-canary"})
        )
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("app", spec=app_spec(), annotations=annotations or ENABLED),
    )


async def replicasets(kube: KubeClient, namespace: str) -> int:
    return len((await kube.get(REPLICASETS.path(namespace)))["items"])


async def wait_adopted(kube: KubeClient, namespace: str, name: str = "app") -> dict[str, Any]:
    return await wait_for_object(
        kube, DEPLOYMENTS.path(namespace), name,
        lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=30,
    )  # fmt: skip


async def wait_rolled(
    kube: KubeClient, namespace: str, old: str | None, name: str = "app"
) -> dict[str, Any]:
    def rolled(obj: dict[str, Any]) -> bool:
        new = template_hash(obj, DEPLOYMENT)
        return new is not None and new != old

    return await wait_for_object(kube, DEPLOYMENTS.path(namespace), name, rolled, timeout=30)


async def test_configmap_and_secret_changed_300ms_apart_roll_once(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_app(kube, namespace)
    async with running_controller(cluster, namespace, debounce=2.0) as running:
        await wait_adopted(kube, namespace)
        assert await replicasets(kube, namespace) == 1
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        await asyncio.sleep(0.3)  # the scenario itself: two edits 300 ms apart
        await kube.merge_patch(SECRETS.path(namespace, "db"), {"stringData": {"password": "n3w"}})
        rolled = await wait_rolled(kube, namespace, None)
        await running.controller.settled(timeout=30)
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )
        await wait_for_objects(kube, REPLICASETS.path(namespace), lambda f: len(f) == 2, timeout=30)
        assert await replicasets(kube, namespace) == 2
        assert len(controller_writes(cluster, namespace)) == 2  # adoption + one rollout
        [event] = await events(kube, namespace, "Rolling")
        assert "configmap/app keys [LEVEL] changed" in event["message"]
        assert "secret/db keys [password] changed" in event["message"]


async def test_restarts_write_nothing_and_offline_changes_roll_once(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_app(kube, namespace)
    async with running_controller(cluster, namespace):
        await wait_adopted(kube, namespace)
    writes = len(controller_writes(cluster, namespace))
    assert writes == 1
    for _ in range(3):
        async with running_controller(cluster, namespace) as running:
            await running.controller.settled(timeout=30)
    assert len(controller_writes(cluster, namespace)) == writes
    assert await replicasets(kube, namespace) == 1

    # Changed while no controller runs: rolled exactly once when it comes back.
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "warn"}})
    async with running_controller(cluster, namespace) as running:
        rolled = await wait_rolled(kube, namespace, None)
        await running.controller.settled(timeout=30)
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )
    assert len(controller_writes(cluster, namespace)) == writes + 1


async def test_a_lost_key_rebaselines_instead_of_restarting(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Deleting the key Secret makes every hash different; no config changed, so nothing
    may roll. The next real change rolls under the new key."""
    await make_app(kube, namespace)
    async with running_controller(cluster, namespace):
        adopted = await wait_adopted(kube, namespace)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "warn"}})
        rolled = template_hash(await wait_rolled(kube, namespace, None), DEPLOYMENT)
    await wait_for_objects(kube, REPLICASETS.path(namespace), lambda f: len(f) == 2, timeout=30)
    writes = len(controller_writes(cluster, namespace))
    await kube.delete(SECRETS.path(namespace, HMAC_SECRET))

    async with running_controller(cluster, namespace) as running:
        rebaselined = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "app",
            lambda o: o["metadata"]["annotations"].get(BASELINE_HASH)
            not in (None, adopted["metadata"]["annotations"][BASELINE_HASH]),
            timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        assert template_hash(rebaselined, DEPLOYMENT) == rolled  # the template is untouched
        assert rebaselined["metadata"]["annotations"][BASELINE_HASH] == await expected_hash(
            kube, DEPLOYMENT, rebaselined, running.hmac_key
        )
        assert len(controller_writes(cluster, namespace)) == writes + 1  # the baseline only
        assert await replicasets(kube, namespace) == 2
        notes = [e["message"] for e in await events(kube, namespace, "Adopted")]
        assert any("another installation key" in message for message in notes), notes

        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "error"}})
        again = await wait_rolled(kube, namespace, rolled)
        assert template_hash(again, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, again, running.hmac_key
        )
        assert BASELINE_HASH not in again["metadata"]["annotations"]
    await wait_for_objects(kube, REPLICASETS.path(namespace), lambda f: len(f) == 3, timeout=30)


async def test_opting_in_stale_pods_rolls_them_and_fresh_pods_nothing(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """The situation a team opts in to fix: pods that started before their ConfigMap
    changed run the old config. Opting them in rolls them once; fresh ones are adopted."""
    await make_app(kube, namespace, annotations={})  # not opted in yet
    running_pod = await wait_for_objects(
        kube, PODS.path(namespace), lambda found: any(
            (p.get("status") or {}).get("startTime") for p in found.values()), timeout=30,
    )  # fmt: skip
    started = min(
        parse_timestamp(p["status"]["startTime"]) or 0.0
        for p in running_pod.values() if (p.get("status") or {}).get("startTime")
    )  # fmt: skip
    # API timestamps have whole seconds, and a change in the pods' own second counts as
    # seen: the change must land in a later second to be unambiguously newer.
    await eventually(lambda: time.time() >= started + 1.0, timeout=5)
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("fresh", spec=app_spec(), annotations={}),
    )
    await wait_for_objects(
        kube, PODS.path(namespace), lambda found: any(
            name.startswith("fresh-") and (p.get("status") or {}).get("startTime")
            for name, p in found.items()), timeout=30,
    )  # fmt: skip
    async with running_controller(cluster, namespace) as running:
        for name in ("app", "fresh"):
            await kube.merge_patch(
                DEPLOYMENTS.path(namespace, name), {"metadata": {"annotations": ENABLED}}
            )
        rolled = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "app",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        await wait_adopted(kube, namespace, "fresh")
        await running.controller.settled(timeout=30)
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )
        [rolling] = await events(kube, namespace, "Rolling")
        assert rolling["involvedObject"]["name"] == "app"
        assert "pods that started before their config last changed" in rolling["message"]
    fresh = await kube.get(DEPLOYMENTS.path(namespace, "fresh"))
    assert template_hash(fresh, DEPLOYMENT) is None  # adopted, not rolled
    sets = (await kube.get(REPLICASETS.path(namespace)))["items"]
    owners = sorted(rs["metadata"]["ownerReferences"][0]["name"] for rs in sets)
    assert owners == ["app", "app", "fresh"]


async def test_missing_configmap_holds_then_rolls_when_created(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(SECRETS.path(namespace), manifests.secret("db", {"password": "x"}))
    await make_app(kube, namespace, with_sources=False)
    async with running_controller(cluster, namespace) as running:
        adopted = await wait_adopted(kube, namespace)
        assert template_hash(adopted, DEPLOYMENT) is None
        await running.controller.settled(timeout=30)
        [warning] = await events(kube, namespace, "ConfigMissing")
        assert warning["type"] == "Warning"
        assert "configmap/app not found" in warning["message"]
        assert await replicasets(kube, namespace) == 1
        states = running.metrics.workloads
        assert states.labels(state="held-missing")._value.get() == 1
        assert states.labels(state="current")._value.get() == 0

        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
        rolled = await wait_rolled(kube, namespace, None)
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )
        await running.controller.settled(timeout=30)
        assert states.labels(state="held-missing")._value.get() == 0
        # "applied" right after the write, "current" once a later pass finds nothing to do.
        moved = [states.labels(state=s)._value.get() for s in ("applied", "current")]
        assert sorted(moved) == [0, 1]


async def test_flapping_secret_is_capped_then_rolled_with_the_latest_value(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_app(kube, namespace)
    async with running_controller(
        cluster, namespace, debounce=0.2, max_rollouts=3, window=6.0
    ) as running:
        await wait_adopted(kube, namespace)
        for n in range(100):  # 100 updates over ~10 s
            await kube.merge_patch(
                SECRETS.path(namespace, "db"), {"stringData": {"password": f"v{n}"}}
            )
            await asyncio.sleep(0.1)
        final = await kube.get(DEPLOYMENTS.path(namespace, "app"))
        want = await expected_hash(kube, DEPLOYMENT, final, running.hmac_key)
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "app",
            lambda o: template_hash(o, DEPLOYMENT) == want, timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        _adoption, *rolled = sorted(
            parse_timestamp(entry["requestReceivedTimestamp"]) or 0.0
            for entry in controller_writes(cluster, namespace)
        )
        # The cap itself, whatever the machine's pace: at most 3 rollouts in any 6 s, so
        # any 4 in a row span 6 s (less the writes' own delays: 5 s). A count alone can't
        # tell: a cap of 4 gave 9 rollouts in 12 s, as many as a cap of 3 allows there.
        spans = [round(later - first, 2) for first, later in zip(rolled, rolled[3:], strict=False)]
        assert len(rolled) >= 2 and all(span >= 5.0 for span in spans), spans
        holds = running.metrics.holds.labels(reason="flapping")._value.get()
        assert holds >= 2
        # One Event whose count grows, not one Event per held reconcile.
        [capped] = await events(kube, namespace, "RolloutsCapped")
        assert capped["type"] == "Warning"
        # Repeats that arrive while its creation is in flight are folded into the next bump,
        # so the count can trail the holds by those.
        assert 2 <= capped["count"] <= holds
        # Why it rolled, where `kubectl rollout history` shows it (the newest ReplicaSet).
        newest = max(
            (await kube.get(REPLICASETS.path(namespace)))["items"],
            key=lambda rs: int(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]),
        )
        assert newest["metadata"]["annotations"]["kubernetes.io/change-cause"] in (
            "kube-nudge: secret/db keys [password] changed",
            "kube-nudge: config changed while kube-nudge was not watching",
        )


async def test_the_flap_cap_survives_a_restart(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """Recent rollouts are recorded on the workload, so a restarted controller (or a new
    leader) keeps holding a workload that has used up its cap."""
    await make_app(kube, namespace)
    async with running_controller(cluster, namespace, max_rollouts=2, window=600.0):
        await wait_adopted(kube, namespace)
        rolled = None
        for n in range(2):
            await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"N": str(n)}})
            rolled = template_hash(await wait_rolled(kube, namespace, rolled), DEPLOYMENT)
    writes = len(controller_writes(cluster, namespace))
    async with running_controller(cluster, namespace, max_rollouts=2, window=600.0) as running:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"N": "again"}})
        flapping = running.metrics.holds.labels(reason="flapping")
        await eventually(lambda: flapping._value.get() >= 1, timeout=10)
        await running.controller.events.flush()
    assert len(controller_writes(cluster, namespace)) == writes
    obj = await kube.get(DEPLOYMENTS.path(namespace, "app"))
    assert template_hash(obj, DEPLOYMENT) == rolled
    assert await events(kube, namespace, "RolloutsCapped")


async def test_release_lets_a_capped_workload_roll_its_latest_config(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_app(kube, namespace)
    async with running_controller(cluster, namespace, max_rollouts=1, window=3600.0) as running:
        await wait_adopted(kube, namespace)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "a"}})
        first = template_hash(await wait_rolled(kube, namespace, None), DEPLOYMENT)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "b"}})
        flapping = running.metrics.holds.labels(reason="flapping")
        await eventually(lambda: flapping._value.get() >= 1, timeout=10)
        code, out = await kube_nudge_cli(cluster, namespace, "release", "deployment/app")
        assert code == 0, out
        assert f"released {namespace}/Deployment/app" in out
        rolled = await wait_rolled(kube, namespace, first)
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )


ROLLOUTS = Resource("example.kube-nudge.io", "v1", "rollouts", "Rollout")


async def test_custom_resource_with_a_registered_template_path(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await install_crd(kube, ROLLOUTS, "rollout")
    kind = WorkloadKind(ROLLOUTS, parse_path("spec.workload.template"))
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(ROLLOUTS.path(namespace), {
        "apiVersion": ROLLOUTS.api_version, "kind": "Rollout",
        "metadata": {"name": "r", "annotations": ENABLED},
        "spec": {"workload": {"template": {"spec": manifests.pod_spec(
            volumes=[{"name": "c", "configMap": {"name": "app"}}])}}},
    })  # fmt: skip
    async with running_controller(cluster, namespace, kinds=(*BUILTIN_KINDS, kind)) as running:
        await wait_for_object(
            kube, ROLLOUTS.path(namespace), "r",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=30,
        )  # fmt: skip
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "x"}})
        rolled = await wait_for_object(
            kube, ROLLOUTS.path(namespace), "r",
            lambda o: template_hash(o, kind) is not None, timeout=30,
        )  # fmt: skip
        assert template_hash(rolled, kind) == await expected_hash(
            kube, kind, rolled, running.hmac_key
        )


async def test_compat_annotations_opt_in_only_with_compat(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_app(kube, namespace, {"reloader.stakater.com/auto": "true"})
    async with running_controller(cluster, namespace) as running:
        await running.controller.settled(timeout=30)
        assert controller_writes(cluster, namespace) == []
    async with running_controller(cluster, namespace, compat=True):
        await wait_adopted(kube, namespace)


async def test_cross_namespace_source_needs_the_owners_grant(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    other = f"{namespace}-src"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": other}})
    try:
        await kube.create(CONFIGMAPS.path(other), manifests.configmap("shared", {"K": "1"}))
        await make_app(kube, namespace, {**ENABLED, "kube-nudge.io/configmaps": f"{other}/shared"})
        async with running_controller(cluster, namespace, also_watch=(other,)) as running:
            adopted = await wait_adopted(kube, namespace)
            await running.controller.settled(timeout=30)
            [refused] = await events(kube, namespace, "SourceNotShared")
            assert f"configmap/{other}/shared" in refused["message"]
            # Not shared: its changes are invisible to the workload.
            await kube.merge_patch(CONFIGMAPS.path(other, "shared"), {"data": {"K": "2"}})
            await running.controller.settled(timeout=30)
            assert len(controller_writes(cluster, namespace)) == 1

            # The owner grants access: from now on it is part of the workload's config.
            await kube.merge_patch(
                CONFIGMAPS.path(other, "shared"),
                {"metadata": {"annotations": {"kube-nudge.io/share-with": namespace}}},
            )
            rolled = await wait_rolled(kube, namespace, template_hash(adopted, DEPLOYMENT))
            assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
                kube, DEPLOYMENT, rolled, running.hmac_key
            )
    finally:
        await kube.delete(NAMESPACES.path(name=other))


async def test_helm_release_and_token_secrets_are_never_listed(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    for name, kind in (("sh.helm.release.v1.app.v1", "helm.sh/release.v1"),
                       ("token", "kubernetes.io/service-account-token")):  # fmt: skip
        secret = manifests.secret(name, {"release": "x" * 1000})
        secret["type"] = kind
        if kind.endswith("token"):
            secret["metadata"]["annotations"] = {"kubernetes.io/service-account.name": "default"}
        await kube.create(SECRETS.path(namespace), secret)
    await kube.create(SECRETS.path(namespace), manifests.secret("plain", {"k": "v"}))
    async with running_controller(cluster, namespace) as running:
        seen = {name for _, name in running.controller.cache.source_keys(SourceKind.SECRET)}
    assert "plain" in seen
    assert "sh.helm.release.v1.app.v1" not in seen and "token" not in seen


async def test_a_new_workload_is_adopted_at_once_so_a_change_right_after_rolls_it(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    """The baseline must be the config the pods started with: adopting only after the
    debounce window would record a change made meanwhile as already running."""
    async with running_controller(cluster, namespace, debounce=3.0) as running:
        await make_app(kube, namespace)
        key = (DEPLOYMENT, namespace, "app")
        async with asyncio.timeout(10):
            while running.controller.cache.workload(key) is None:
                await asyncio.sleep(0.01)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        obj = await wait_rolled(kube, namespace, None)
        assert template_hash(obj, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, obj, running.hmac_key
        )
