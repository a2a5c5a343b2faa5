"""Bad input gets a Warning Event and a log line; every other workload keeps being served."""

from __future__ import annotations

import base64
import gc
import logging
import sys
import uuid
from types import FunctionType, ModuleType
from typing import Any

import pytest

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import BASELINE_HASH, SourceKind, SourceRef, parse_path
from kube_nudge.model.digests import DIGEST_SIZE
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object, wait_for_objects
from tests.integration.controller_support import (
    controller_writes,
    events,
    eventually,
    expected_hash,
    posted,
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


def retained_bytes(root: object) -> int:
    """Rough size of everything reachable from ``root`` (types, modules and functions aside)."""
    seen: set[int] = set()
    stack, total = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type | ModuleType | FunctionType):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


async def adopted(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    return await wait_for_object(
        kube,
        DEPLOYMENTS.path(namespace),
        name,
        lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}),
        timeout=30,
    )


async def test_malformed_annotations_warn_and_fall_back_to_defaults(
    kube: AdminClient, cluster: LocalCluster, namespace: str, caplog: pytest.LogCaptureFixture
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
            annotations=ENABLED,
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
    kube: AdminClient, cluster: LocalCluster, namespace: str
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
        manifests.deployment("wide", spec=volume_spec(*sources), annotations=ENABLED),
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

        # The projections keep 16-byte digests per key, never the payload.
        def view(name: str) -> Any:
            return running.controller.source(SourceRef(SourceKind.CONFIGMAP, namespace, name))

        big, many = view(long_name), view("many")
        assert list(big.state.digests) == ["big"]
        assert retained_bytes(big) < 4096, retained_bytes(big)  # the value alone is 1 MB
        assert set(many.state.digests) == {f"k{n}" for n in range(10_000)}
        for digest in many.state.digests.values():
            assert isinstance(digest, bytes) and len(digest) == DIGEST_SIZE


async def test_custom_resource_without_a_template_at_the_path(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    # Deployments registered under a wrong path stand in for a misconfigured --workload.
    wrong = WorkloadKind(DEPLOYMENTS, parse_path("spec.podTemplate"))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("d", annotations=ENABLED),
    )
    async with running_controller(cluster, namespace, kinds=(wrong,)) as running:
        await running.controller.settled(timeout=30)
        [warning] = await events(kube, namespace, "NoPodTemplate")
        assert "spec.podTemplate" in warning["message"]
        assert running.metrics.holds.labels(reason="invalid")._value.get() >= 1


async def test_workload_deleted_while_queued_is_forgotten(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
    for name in ("gone", "stays"):
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(
                name,
                spec=volume_spec(("configmap", "app")),
                annotations=ENABLED,
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


def key_refs(*refs: tuple[str, str, str, bool]) -> dict[str, Any]:
    """A pod spec with one env var per (kind, source, key, optional) key reference."""
    env = []
    for n, (kind, name, key, optional) in enumerate(refs):
        ref_kind = "configMapKeyRef" if kind == "configmap" else "secretKeyRef"
        ref: dict[str, Any] = {"name": name, "key": key}
        if optional:
            ref["optional"] = True
        env.append({"name": f"E{n}", "valueFrom": {ref_kind: ref}})
    return manifests.pod_spec(
        containers=[{"name": "app", "image": "registry.invalid/app:1", "env": env}]
    )


async def test_missing_required_key_holds_until_it_exists_optional_key_never_holds(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    values = [f"value-{uuid.uuid4().hex}" for _ in range(2)]  # must never appear in an Event
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"OLD": values[0]}))
    await kube.create(SECRETS.path(namespace), manifests.secret("db", {"password": values[1]}))
    required = key_refs(
        ("configmap", "app", "OLD", False),
        ("configmap", "app", "NEW", False),
        ("secret", "db", "token", False),
    )
    optional = key_refs(
        ("configmap", "app", "OLD", False),
        ("configmap", "app", "NEW", True),
        ("secret", "db", "token", True),
    )
    for name, spec in (("required", required), ("optional", optional)):
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(name, spec=spec, annotations=ENABLED),
        )

    async def warnings() -> list[str]:
        found = await events(kube, namespace, "ConfigMissing")
        assert {e["involvedObject"]["name"] for e in found} <= {"required"}
        assert all(e["type"] == "Warning" for e in found)
        messages = [e["message"] for e in found]
        for value in (*values, manifests.CANARY):
            assert not [m for m in messages if value in m], "a value reached an Event"
        return messages

    async def rolled(name: str, old: str | None) -> str:
        obj = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), name,
            lambda o: template_hash(o, DEPLOYMENT) not in (None, old), timeout=30,
        )  # fmt: skip
        new = template_hash(obj, DEPLOYMENT)
        assert new == await expected_hash(kube, DEPLOYMENT, obj, running.hmac_key)
        return new

    async def still_held() -> None:
        await running.controller.settled(timeout=30)
        obj = await kube.get(DEPLOYMENTS.path(namespace, "required"))
        assert template_hash(obj, DEPLOYMENT) is None
        writes = controller_writes(cluster, namespace)
        assert [w["objectRef"]["name"] for w in writes].count("required") == 1  # adoption

    async with running_controller(cluster, namespace) as running:
        await adopted(kube, namespace, "required")
        await adopted(kube, namespace, "optional")
        await running.controller.settled(timeout=30)
        assert await warnings() == [
            "not rolling: configmap/app has no key 'NEW'; secret/db has no key 'token'"
        ]
        holds = running.metrics.holds.labels(reason="missing")._value.get()
        assert holds >= 1

        # A change to a key both consume: the optional consumer rolls, the other is held.
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"OLD": "2"}})
        optional_hash = await rolled("optional", None)
        await still_held()
        assert running.metrics.holds.labels(reason="missing")._value.get() > holds

        # One of the two missing keys appears: still held, now naming only the other one.
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"NEW": "1"}})
        optional_hash = await rolled("optional", optional_hash)
        await still_held()
        assert "not rolling: secret/db has no key 'token'" in await warnings()

        # The last one appears: the held workload rolls with the config as it is now.
        await kube.merge_patch(SECRETS.path(namespace, "db"), {"stringData": {"token": "t"}})
        await rolled("required", None)
        await rolled("optional", optional_hash)
        await running.controller.settled(timeout=30)
        assert running.metrics.errors.labels(stage="reconcile")._value.get() == 0


async def test_namespace_deleted_while_its_workloads_are_queued(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    doomed = f"{namespace}-gone"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": doomed}})
    try:
        spec = volume_spec(("configmap", "app"))
        for ns in (namespace, doomed):
            await kube.create(CONFIGMAPS.path(ns), manifests.configmap("app", {"K": "1"}))
        for n in range(3):
            await kube.create(
                DEPLOYMENTS.path(namespace),
                manifests.deployment(f"d{n}", spec=spec, annotations=ENABLED),
            )
        for name in ("fast", "slow"):
            await kube.create(
                DEPLOYMENTS.path(doomed),
                manifests.deployment(name, spec=spec, annotations=ENABLED),
            )
        async with running_controller(
            cluster, namespace, debounce=2.0, also_watch=(doomed,)
        ) as running:
            # The audit log is written behind the responses: wait for both adoption entries.
            await eventually(lambda: len(controller_writes(cluster, doomed)) == 2, timeout=10)
            adoptions = 2
            # "fast" (2 s) comes due while its namespace terminates, which takes the namespace
            # controller ~10 s; "slow" (1 h, set after adoption so that the startup settles)
            # is still queued when its deletion is observed.
            await kube.merge_patch(
                DEPLOYMENTS.path(doomed, "slow"),
                {"metadata": {"annotations": {"kube-nudge.io/debounce": "1h"}}},
            )

            def slow_debounce() -> float | None:
                view = running.controller.cache.workload((DEPLOYMENT, doomed, "slow"))
                return view.settings.debounce if view is not None else None

            await eventually(lambda: slow_debounce() == 3600, timeout=10)
            for ns in (namespace, doomed):
                await kube.merge_patch(CONFIGMAPS.path(ns, "app"), {"data": {"K": "2"}})
            await eventually(lambda: len(running.controller.queue) == 5, timeout=10)
            await kube.delete(NAMESPACES.path(name=doomed))

            async def all_rolled(old: set[str | None]) -> set[str | None]:
                found = await wait_for_objects(
                    kube, DEPLOYMENTS.path(namespace),
                    lambda objs: len(objs) == 3 and all(
                        template_hash(o, DEPLOYMENT) not in old for o in objs.values()),
                    timeout=30,
                )  # fmt: skip
                for obj in found.values():
                    assert template_hash(obj, DEPLOYMENT) == await expected_hash(
                        kube, DEPLOYMENT, obj, running.hmac_key
                    )
                return {template_hash(o, DEPLOYMENT) for o in found.values()}

            hashes = await all_rolled({None})
            await wait_for_objects(
                kube, NAMESPACES.path(), lambda found: doomed not in found,
                params={"fieldSelector": f"metadata.name={doomed}"}, timeout=60,
            )  # fmt: skip
            with pytest.raises(ApiError) as gone:
                await kube.get(NAMESPACES.path(name=doomed))
            assert gone.value.not_found
            await eventually(
                lambda: all(ns != doomed for _, ns, _ in running.controller.cache.workload_keys()),
                timeout=30,
            )
            # The queue drains: "slow" was forgotten with its namespace, not left for an hour.
            await running.controller.settled(timeout=30)
            writes = controller_writes(cluster, doomed)
            assert [w["objectRef"]["name"] for w in writes].count("slow") == 1  # adoption only
            assert len(writes) <= adoptions + 1  # at most "fast", while its namespace terminated

            # The workers keep serving the namespace that is left.
            await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"K": "3"}})
            assert len(await all_rolled(hashes)) == 1
            await running.controller.settled(timeout=30)
            assert len(controller_writes(cluster, doomed)) == len(writes)
            assert running.metrics.errors.labels(stage="reconcile")._value.get() == 0
            assert running.metrics.errors.labels(stage="write")._value.get() == 0
            assert running.controller.healthy
    finally:
        try:
            await kube.delete(NAMESPACES.path(name=doomed))
        except ApiError as exc:
            if not exc.not_found:
                raise


async def test_a_created_optional_source_rolls_and_a_deleted_required_one_holds(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("base", {"A": "1"}))
    for name, source, optional in (("opt", "extra", True), ("req", "base", False)):
        ref: dict[str, Any] = {"name": source, "optional": optional}
        spec = manifests.pod_spec(containers=[{
            "name": "app", "image": "registry.invalid/app:1", "envFrom": [{"configMapRef": ref}],
        }])  # fmt: skip
        body = manifests.deployment(name, spec=spec, annotations=ENABLED)
        await kube.create(DEPLOYMENTS.path(namespace), body)
    async with running_controller(cluster, namespace) as running:
        await adopted(kube, namespace, "opt")
        await adopted(kube, namespace, "req")

        # An optional source that appears is new config for its consumer: it rolls.
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("extra", {"B": "2"}))
        rolled = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "opt",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
            kube, DEPLOYMENT, rolled, running.hmac_key
        )
        causes = [e["message"] for e in await posted(kube, namespace, "Rolling")]
        assert [m for m in causes if m.startswith("rolling: configmap/extra keys [B]")], causes

        # A required source deleted: rolling would start pods that cannot start. Held.
        await kube.delete(CONFIGMAPS.path(namespace, "base"))

        async def held() -> bool:
            found = await events(kube, namespace, "ConfigMissing")
            return [e["involvedObject"]["name"] for e in found] == ["req"]

        await until(held, 30)
        await running.controller.settled(timeout=30)
        req = await kube.get(DEPLOYMENTS.path(namespace, "req"))
        assert template_hash(req, DEPLOYMENT) is None  # never rolled
        [missing] = await events(kube, namespace, "ConfigMissing")
        assert missing["type"] == "Warning"
        assert missing["message"] == "not rolling: configmap/base not found"
