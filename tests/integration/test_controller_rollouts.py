"""Each reference form x each workload kind: consumed changes roll, others don't."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    CONTROLLERREVISIONS,
    REPLICASETS,
    SECRETS,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind
from kube_nudge.model import BASELINE_HASH, SourceKind, SourceRef
from kube_nudge.model.digests import value_digest
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object
from tests.integration.controller_support import (
    controller_writes,
    eventually,
    expected_hash,
    running_controller,
    template_hash,
)

pytestmark = pytest.mark.cluster
KINDS = {kind.resource.plural: kind for kind in BUILTIN_KINDS}

# name, kind, consumed key, unconsumed key (None: every key is consumed)
FORMS: list[tuple[str, SourceKind, str, str | None]] = [
    ("cm-keyref", SourceKind.CONFIGMAP, "LEVEL", "OTHER"),
    ("cm-envfrom", SourceKind.CONFIGMAP, "A", None),
    ("cm-volume", SourceKind.CONFIGMAP, "app.conf", None),
    ("cm-items", SourceKind.CONFIGMAP, "used.conf", "unused.conf"),
    ("sec-projected", SourceKind.SECRET, "token", "spare"),
    ("sec-init-keyref", SourceKind.SECRET, "password", "username"),
    ("sec-envfrom", SourceKind.SECRET, "API_KEY", None),
]


def pod_spec_using_every_form() -> dict[str, Any]:
    """One pod spec that consumes config in every way a pod can."""
    return manifests.pod_spec(
        initContainers=[{
            "name": "init", "image": "registry.invalid/init:1",
            "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {
                "name": "sec-init-keyref", "key": "password"}}}],
        }],
        containers=[{
            "name": "app", "image": "registry.invalid/app:1",
            "env": [{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {
                "name": "cm-keyref", "key": "LEVEL"}}}],
            "envFrom": [{"configMapRef": {"name": "cm-envfrom"}, "prefix": "X_"},
                        {"secretRef": {"name": "sec-envfrom"}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v"}, {"name": "i", "mountPath": "/i"},
                             {"name": "p", "mountPath": "/p"}],
        }],
        volumes=[
            {"name": "v", "configMap": {"name": "cm-volume"}},
            {"name": "i", "configMap": {"name": "cm-items",
                                        "items": [{"key": "used.conf", "path": "u"}]}},
            {"name": "p", "projected": {"sources": [{"secret": {
                "name": "sec-projected", "items": [{"key": "token", "path": "t"}]}}]}},
        ],
    )  # fmt: skip


async def create_sources(kube: KubeClient, namespace: str) -> None:
    for name, kind, used, unused in FORMS:
        data = {used: "1"} | ({unused: "1"} if unused else {})
        if kind is SourceKind.CONFIGMAP:
            await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(name, data))
        else:
            await kube.create(SECRETS.path(namespace), manifests.secret(name, data))


def workload_manifest(kind: WorkloadKind, name: str) -> dict[str, Any]:
    spec = pod_spec_using_every_form()
    builders: dict[str, Callable[..., dict[str, Any]]] = {
        "deployments": manifests.deployment,
        "statefulsets": manifests.statefulset,
        "daemonsets": manifests.daemonset,
        "cronjobs": manifests.cronjob,
    }
    return builders[kind.resource.plural](name, spec=spec, annotations=ENABLED)


async def edit_source(
    kube: AdminClient, namespace: str, form: str, kind: SourceKind, key: str, value: str
) -> None:
    if kind is SourceKind.CONFIGMAP:
        await kube.merge_patch(CONFIGMAPS.path(namespace, form), {"data": {key: value}})
    else:
        await kube.merge_patch(SECRETS.path(namespace, form), {"stringData": {key: value}})


async def rollout_evidence(kube: KubeClient, kind: WorkloadKind, namespace: str, name: str) -> int:
    """How many pod-template versions the kind's own controller has produced."""
    if kind.resource.plural == "deployments":
        found = await kube.get(REPLICASETS.path(namespace))
        return len(found["items"])
    if kind.resource.plural in ("statefulsets", "daemonsets"):
        found = await kube.get(CONTROLLERREVISIONS.path(namespace))
        return len(found["items"])
    return 0  # a CronJob's next Job is created from the patched jobTemplate


@pytest.mark.parametrize("plural", list(KINDS))
async def test_every_reference_form_rolls_every_kind(
    plural: str, kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    kind = KINDS[plural]
    path = kind.resource.path(namespace)
    await create_sources(kube, namespace)
    await kube.create(path, workload_manifest(kind, "w"))
    async with running_controller(cluster, namespace) as running:
        adopted = await wait_for_object(
            kube,
            path,
            "w",
            lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}),
            timeout=30,
        )
        assert template_hash(adopted, kind) is None  # adoption restarts nothing
        assert len(controller_writes(cluster, namespace)) == 1

        for form, source_kind, used, unused in FORMS:
            ref = SourceRef(source_kind, namespace, form)
            before = await kube.get(kind.resource.path(namespace, "w"))
            writes_before = len(controller_writes(cluster, namespace))
            if unused:
                await edit_source(kube, namespace, form, source_kind, unused, "changed")
                await _until_cached(running.controller.source, ref, unused, "changed", source_kind)
                await running.controller.settled(timeout=30)
                assert len(controller_writes(cluster, namespace)) == writes_before, form
            # A label-only edit changes no data.
            resource = CONFIGMAPS if source_kind is SourceKind.CONFIGMAP else SECRETS
            await kube.merge_patch(resource.path(namespace, form),
                                   {"metadata": {"labels": {"touched": form}}})  # fmt: skip
            await running.controller.settled(timeout=30)
            assert len(controller_writes(cluster, namespace)) == writes_before, form

            await edit_source(kube, namespace, form, source_kind, used, f"new-{form}")
            old_hash = template_hash(before, kind)

            def rolled(obj: dict[str, Any], old: str | None = old_hash) -> bool:
                new = template_hash(obj, kind)
                return new is not None and new != old

            after = await wait_for_object(kube, path, "w", rolled, timeout=30)
            assert template_hash(after, kind) == await expected_hash(
                kube, kind, after, running.hmac_key
            ), form
            await running.controller.settled(timeout=30)
            assert len(controller_writes(cluster, namespace)) == writes_before + 1, form

        if plural != "cronjobs":
            # The original template + one per change; the kind's own controller makes the
            # last revision a moment after kube-nudge is done.
            async def revisions_made() -> bool:
                return await rollout_evidence(kube, kind, namespace, "w") >= 1 + len(FORMS)

            with contextlib.suppress(TimeoutError):
                await until(revisions_made, 30)
            assert await rollout_evidence(kube, kind, namespace, "w") == 1 + len(FORMS)


async def _until_cached(
    source: Callable[[SourceRef], Any], ref: SourceRef, key: str, value: str, kind: SourceKind
) -> None:
    import base64

    encoded = value if kind is SourceKind.CONFIGMAP else base64.b64encode(value.encode()).decode()
    wanted = value_digest(encoded)

    def seen() -> bool:
        view = source(ref)
        return view is not None and view.state.digests.get(key) == wanted

    await eventually(seen, timeout=30)
