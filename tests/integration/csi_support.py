"""The Secrets Store CSI driver's writes, acted out by the tests: for unit-level cases only,
against the real API server with the driver's own CRDs installed (from its pinned module,
``make csi-driver``) but no driver running, and pods of the fake kubelet. Each write is made
as the driver makes it (what test_csi_driver_real_node.py shows the real driver doing on the
real node): a ``SecretProviderClassPodStatus`` created when it mounts a pod's volume (name
``<pod>-<namespace>-<class>``, the node label, an ownerReference to the pod, ``status`` with
the objects sorted by id) and updated whole when rotation finds new versions (the CRD has no
status subresource), under the driver's field manager; a Secret a class syncs
(``secretObjects``) written after the status, one pass later."""

from __future__ import annotations

import base64
from typing import Any

import yaml

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import (
    PODS,
    SECRETPROVIDERCLASSPODSTATUSES,
    SECRETS,
    Resource,
)
from kube_nudge.model.references import CSI_DRIVER
from kube_nudge_dev import manifests
from kube_nudge_dev.build import secrets_store_csi_manifests
from kube_nudge_dev.chartapply import apply_crd
from kube_nudge_dev.waiting import until

DRIVER = "csi-secrets-store"
"""The field manager of the acted-out writes: the real driver's (v1.6.0 writes as
``csi-secrets-store``, its user agent's first part; test_csi_driver_real_node.py checks
it), the one ``model/pacing.py`` gives the driver's quiet window."""
NODE_LABEL = "internal.secrets-store.csi.k8s.io/node-name"
GROUP = "secrets-store.csi.x-k8s.io"
SECRETPROVIDERCLASSES = Resource(GROUP, "v1", "secretproviderclasses", "SecretProviderClass")
CSIDRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
MOUNT = "/mnt/secrets-store"


async def install_driver_crds(kube: KubeClient) -> None:
    """The driver's own two CRDs (SecretProviderClass, SecretProviderClassPodStatus: v1 and
    the deprecated v1alpha1), from its pinned module, served and discoverable (reused if
    installed)."""
    for path in secrets_store_csi_manifests():
        document = yaml.safe_load(path.read_text())
        if document["kind"] == "CustomResourceDefinition":
            await apply_crd(kube, document)


async def install_csidriver(kube: KubeClient) -> None:
    """The driver's own CSIDriver object (pod info on mount, re-published by the kubelet at
    each sync of a pod, inline ephemeral volumes), from its pinned module (reused if there)."""
    [path] = [p for p in secrets_store_csi_manifests() if p.name == "csidriver.yaml"]
    try:
        await kube.create(CSIDRIVERS.path(), yaml.safe_load(path.read_text()))
    except ApiError as exc:
        if not exc.conflict:
            raise


def secret_provider_class(name: str, synced: str | None = None) -> dict[str, Any]:
    """A SecretProviderClass of object ``db-password``; ``synced``: also synced to that
    Secret (``secretObjects``), key ``password``."""
    spec: dict[str, Any] = {
        "provider": "vault",
        "parameters": {"objects": "- objectName: db-password\n  secretPath: secret/data/db\n"},
    }
    if synced is not None:
        data = [{"objectName": "db-password", "key": "password"}]
        spec["secretObjects"] = [{"secretName": synced, "type": "Opaque", "data": data}]
    return {"apiVersion": f"{GROUP}/v1", "kind": "SecretProviderClass",
            "metadata": {"name": name}, "spec": spec}  # fmt: skip


def csi_volume(spc: str, name: str = "secrets-store") -> dict[str, Any]:
    """A pod's volume of the driver, mounting class ``spc``."""
    return {"name": name, "csi": {"driver": CSI_DRIVER, "readOnly": True,
                                  "volumeAttributes": {"secretProviderClass": spc}}}  # fmt: skip


def csi_consumer(spc: str, *, env_secret: str | None = None) -> dict[str, Any]:
    """A pod spec mounting class ``spc`` whole at MOUNT; ``env_secret``: also reading that
    (synced) Secret's key ``password`` into an env var."""
    container: dict[str, Any] = {
        "name": "app", "image": "registry.invalid/app:1",
        "volumeMounts": [{"name": "secrets-store", "mountPath": MOUNT, "readOnly": True}],
    }  # fmt: skip
    if env_secret is not None:
        ref = {"secretKeyRef": {"name": env_secret, "key": "password"}}
        container["env"] = [{"name": "DB_PASSWORD", "valueFrom": ref}]
    return manifests.pod_spec(volumes=[csi_volume(spc)], containers=[container])


def _body(pod: dict[str, Any], spc: str, versions: dict[str, str]) -> dict[str, Any]:
    meta = pod["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    uid = meta["uid"]
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "SecretProviderClassPodStatus",
        "metadata": {
            "name": f"{name}-{namespace}-{spc}", "namespace": namespace,
            "labels": {NODE_LABEL: pod["spec"].get("nodeName") or ""},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}],
        },
        "status": {
            "podName": name, "secretProviderClassName": spc, "mounted": True,
            "targetPath": f"/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/"
                          "secrets-store/mount",
            "objects": [{"id": k, "version": v} for k, v in sorted(versions.items())],
        },
    }  # fmt: skip


async def mounted(
    kube: KubeClient, pod: dict[str, Any], spc: str, versions: dict[str, str]
) -> dict[str, Any]:
    """The driver mounted ``pod``'s volume of ``spc``: it creates the pod's status."""
    path = SECRETPROVIDERCLASSPODSTATUSES.path(pod["metadata"]["namespace"])
    return await kube.request(
        "POST", path, params={"fieldManager": DRIVER}, body=_body(pod, spc, versions)
    )


async def rotated(
    kube: KubeClient, pod: dict[str, Any], spc: str, versions: dict[str, str]
) -> dict[str, Any]:
    """Rotation found new versions for ``pod``: the driver updates its status."""
    namespace = pod["metadata"]["namespace"]
    name = f"{pod['metadata']['name']}-{namespace}-{spc}"
    path = SECRETPROVIDERCLASSPODSTATUSES.path(namespace, name)
    current = await kube.get(path)
    body = _body(pod, spc, versions)
    body["metadata"] = current["metadata"]
    return await kube.request("PUT", path, params={"fieldManager": DRIVER}, body=body)


async def synced(kube: KubeClient, namespace: str, name: str, password: str) -> None:
    """The driver's secret sync wrote ``password`` into the Secret ``name``."""
    data = {"password": base64.b64encode(password.encode()).decode()}
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "labels": {"secrets-store.csi.k8s.io/managed": "true"}},
            "data": data}  # fmt: skip
    try:
        current = await kube.get(SECRETS.path(namespace, name))
    except ApiError as exc:
        if not exc.not_found:
            raise
        await kube.request(
            "POST", SECRETS.path(namespace), params={"fieldManager": DRIVER}, body=body
        )
        return
    body["metadata"] = current["metadata"]
    await kube.request(
        "PUT", SECRETS.path(namespace, name), params={"fieldManager": DRIVER}, body=body
    )


async def running_pods(kube: KubeClient, namespace: str, app: str, count: int) -> list[Any]:
    """The ``count`` live pods of ``app`` once all run (kwok)."""

    async def live() -> list[Any]:
        found = await kube.get(PODS.path(namespace), labelSelector=f"app={app}")
        return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]

    async def ready() -> bool:
        pods = await live()
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)

    await until(ready, timeout=60)
    return sorted(await live(), key=lambda p: p["metadata"]["name"])
