"""`kube-nudge status` reading workloads, sources and pods from the API (the state itself:
tests/unit/test_model_status.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kube_nudge.agentwire import LOADED_AT
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.resources import CONFIGMAPS, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.reporting.status import UNVERIFIED, collect
from kube_nudge_dev import manifests
from tests.unit.fakes import FakeApi, stored


def test_a_source_the_user_may_not_get_makes_the_workload_unverified_naming_it() -> None:
    spec = {"containers": [{"name": "a", "image": "x", "env": [
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
    ]}]}  # fmt: skip
    # One Deployment reading ConfigMap `app` and Secret `db`; the Secret is forbidden.
    deployment = stored(manifests.deployment("web", spec=spec, annotations=manifests.ENABLED))
    pods = [{"metadata": {"name": "web-1"}, "status": {}}]
    configmap = manifests.configmap("app", {"LEVEL": "info"})
    client = FakeApi({"deployments": [deployment], "pods": pods},
                     {CONFIGMAPS.path("shop", "app"): configmap}, version="")  # fmt: skip
    client.errors[SECRETS.path("shop", "db")] = ApiError(
        403, "Forbidden", 'secrets "db" is forbidden'
    )
    for key in (b"k" * 32, None):  # with the key or without: the Secret can't be read
        [row] = asyncio.run(collect(client.as_client(), namespaces=("shop",),
                                    hmac_key=key, kinds=BUILTIN_KINDS[:1]))  # fmt: skip
        assert row.state == UNVERIFIED and row.unverified and not row.waiting_helps
        assert "get on secret shop/db is forbidden" in row.detail
        assert row.pods == {"-": 1} and row.desired_hash is None


def pods_client(pods: list[dict[str, Any]]) -> FakeApi:
    """One adopted Deployment reading ConfigMap `app` (written at second 1000), and pods."""
    spec = manifests.env_consumer("L")
    annotations = {**manifests.ENABLED, "kube-nudge.io/baseline-hash": "v1-a"}
    deployment = stored(manifests.deployment("web", replicas=2, spec=spec, annotations=annotations))
    deployment["status"] = {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}
    configmap = manifests.configmap("app", {"L": "x"})
    configmap["metadata"]["creationTimestamp"] = "1970-01-01T00:16:40Z"  # 1000
    return FakeApi({"deployments": [deployment], "pods": pods},
                   {CONFIGMAPS.path("shop", "app"): configmap}, version="")  # fmt: skip


def pod(created: int, loaded_at: float | None = None, started: int = 0) -> dict[str, Any]:
    def stamp(seconds: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))

    annotations = {LOADED_AT: str(loaded_at)} if loaded_at is not None else {}
    return {"metadata": {"name": f"web-{created}", "annotations": annotations,
                         "creationTimestamp": stamp(created)},
            "status": {"startTime": stamp(started or created)}}  # fmt: skip


@pytest.mark.parametrize(
    ("pods", "state"),
    [
        ([pod(1001), pod(1005)], "current"),  # both created in a later second than the change
        ([pod(1001), pod(1000)], UNVERIFIED),  # the second of the change: before or after?
        ([pod(1001), pod(990, loaded_at=1002.5)], UNVERIFIED),  # a reload proves no data
        ([pod(1001), pod(990)], UNVERIFIED),  # plainly older than the change
        ([pod(1001), pod(995, started=1003)], UNVERIFIED),  # a node clock running ahead
    ],
)
def test_without_the_key_only_a_pod_created_in_a_later_second_proves_the_config(
    pods: list[dict[str, Any]], state: str
) -> None:
    [row] = asyncio.run(collect(pods_client(pods).as_client(), namespaces=("shop",),
                                hmac_key=None, kinds=BUILTIN_KINDS[:1]))  # fmt: skip
    assert row.state == state, row.detail
