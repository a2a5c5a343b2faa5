"""The Secrets Store CSI driver, played by the tests (its Go module is not on the proxy, so
its controller can't be built here): its two CRDs with the fields of its v1 API
(``apis/v1``), and its writes of a ``SecretProviderClassPodStatus`` as the driver makes them
when it mounts a pod's volume (create: name ``<pod>-<namespace>-<class>``, the node label,
an ownerReference to the pod, ``status`` with the objects sorted by id) and when rotation
finds new versions (an update of the whole object: the CRD has no status subresource),
under the driver's field manager. A Secret a class syncs (``secretObjects``) is written as
the driver's secret sync does after the status, one pass later."""

from __future__ import annotations

import base64
from typing import Any

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import (
    PODS,
    SECRETPROVIDERCLASSPODSTATUSES,
    SECRETS,
    Resource,
)
from kube_nudge.model.references import CSI_DRIVER
from kube_nudge_dev import manifests
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import install_crd

DRIVER = "secrets-store-csi-driver"
"""The driver's field manager (client-go's default: its binary's name)."""
NODE_LABEL = "internal.secrets-store.csi.k8s.io/node-name"
GROUP = "secrets-store.csi.x-k8s.io"
SECRETPROVIDERCLASSES = Resource(GROUP, "v1", "secretproviderclasses", "SecretProviderClass")
MOUNT = "/mnt/secrets-store"

_STRING = {"type": "string"}
_STATUS_SCHEMA = {
    "type": "object",
    "properties": {
        "status": {
            "type": "object",
            "properties": {
                "podName": _STRING,
                "secretProviderClassName": _STRING,
                "mounted": {"type": "boolean"},
                "targetPath": _STRING,
                "objects": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"id": _STRING, "version": _STRING}},
                },
            },
        },
    },
}
_CLASS_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "provider": _STRING,
                "parameters": {"type": "object", "additionalProperties": _STRING},
                "secretObjects": {
                    "type": "array",
                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


async def install_driver_crds(kube: KubeClient) -> None:
    """Both CRDs of the driver's v1 API, served and discoverable (reused if installed)."""
    await install_crd(kube, SECRETPROVIDERCLASSPODSTATUSES, "secretproviderclasspodstatus",
                      _STATUS_SCHEMA)  # fmt: skip
    await install_crd(kube, SECRETPROVIDERCLASSES, "secretproviderclass", _CLASS_SCHEMA)


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
