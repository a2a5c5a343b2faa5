"""Small builders for the manifests the integration tests and the bench create (the one
builder of API objects for both)."""

from __future__ import annotations

import uuid
from typing import Any

JSON = dict[str, Any]

#: The annotation that opts a workload in.
ENABLED = {"kube-nudge.io/enabled": "true"}


def pod_spec(**extra: Any) -> JSON:
    """A minimal pod spec (kwok runs no containers, so the image is never pulled)."""
    spec: JSON = {"containers": [{"name": "app", "image": "registry.invalid/app:1"}]}
    spec.update(extra)
    return spec


def env_consumer(key: str = "LEVEL", configmap: str = "app") -> JSON:
    """A pod spec reading one key of a ConfigMap into an env var (never refreshed in place)."""
    ref = {"configMapKeyRef": {"name": configmap, "key": key}}
    return pod_spec(containers=[{
        "name": "app", "image": "registry.invalid/app:1",
        "env": [{"name": key, "valueFrom": ref}],
    }])  # fmt: skip


def _template(name: str, spec: JSON | None, annotations: dict[str, str] | None) -> JSON:
    metadata: JSON = {"labels": {"app": name}}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec or pod_spec()}


def deployment(
    name: str,
    *,
    replicas: int = 1,
    spec: JSON | None = None,
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
) -> JSON:
    """An apps/v1 Deployment."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": _template(name, spec, template_annotations),
        },
    }


def statefulset(
    name: str,
    *,
    replicas: int = 1,
    spec: JSON | None = None,
    annotations: dict[str, str] | None = None,
) -> JSON:
    """An apps/v1 StatefulSet (parallel pod management, so pods start together)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": _template(name, spec, None),
        },
    }


def daemonset(
    name: str, *, spec: JSON | None = None, annotations: dict[str, str] | None = None
) -> JSON:
    """An apps/v1 DaemonSet."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": _template(name, spec, None),
        },
    }


def cronjob(
    name: str,
    *,
    schedule: str = "* * * * *",
    spec: JSON | None = None,
    annotations: dict[str, str] | None = None,
) -> JSON:
    """A batch/v1 CronJob."""
    pod = dict(spec or pod_spec())
    pod.setdefault("restartPolicy", "Never")
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"spec": {"template": _template(name, pod, None)}},
        },
    }


def configmap(name: str, data: dict[str, str], annotations: dict[str, str] | None = None) -> JSON:
    """A v1 ConfigMap."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": annotations or {}},
        "data": data,
    }


#: Planted in every Secret the tests create; conftest checks that it never leaks.
CANARY = f"kn-canary-{uuid.uuid4().hex}"
#: What a test changes the canary to, so a change of a consumed key carries one too.
CANARY_NEXT = f"kn-canary-next-{uuid.uuid4().hex}"


def secret(
    name: str, string_data: dict[str, str], annotations: dict[str, str] | None = None
) -> JSON:
    """A v1 Opaque Secret, with the session's canary value under an extra key."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "annotations": annotations or {}},
        "stringData": {**string_data, "canary": CANARY},
    }
