"""`kube-nudge status` reading workloads, sources and pods from the API (the state itself:
tests/unit/test_model_status.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from kube_nudge.agentwire import LOADED_AT
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.reporting.status import UNVERIFIED, collect


class FakeClient:
    """Lists one Deployment reading ConfigMap `app` and Secret `db`; the Secret is forbidden."""

    def __init__(self, deployment: dict[str, Any]) -> None:
        self.deployment = deployment
        self.gets: list[str] = []

    async def list_pages(
        self, path: str, params: object = None
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        if path.endswith("/deployments"):
            yield [self.deployment], ""
        elif path.endswith("/pods"):
            yield [{"metadata": {"name": "web-1"}, "status": {}}], ""
        else:
            yield [], ""

    async def get(self, path: str) -> dict[str, Any]:
        self.gets.append(path)
        if "/secrets/" in path:
            raise ApiError(403, "Forbidden", 'secrets "db" is forbidden')
        return {"metadata": {"name": "app"}, "data": {"LEVEL": "info"}}


def test_a_source_the_user_may_not_get_makes_the_workload_unverified_naming_it() -> None:
    spec = {"containers": [{"name": "a", "image": "x", "env": [
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}},
        {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
    ]}]}  # fmt: skip
    deployment = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u",
                     "annotations": {"kube-nudge.io/enabled": "true"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}},
    }  # fmt: skip
    client = FakeClient(deployment)
    for key in (b"k" * 32, None):  # with the key or without: the Secret can't be read
        [row] = asyncio.run(collect(cast(KubeClient, client), namespaces=("shop",),
                                    hmac_key=key, kinds=BUILTIN_KINDS[:1]))  # fmt: skip
        assert row.state == UNVERIFIED and row.unverified and not row.waiting_helps
        assert "get on secret shop/db is forbidden" in row.detail
        assert row.pods == {"-": 1} and row.desired_hash is None


class PodsClient:
    """One adopted Deployment reading ConfigMap `app` (written at second 1000), and pods."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    async def list_pages(
        self, path: str, params: object = None
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        spec = {
            "containers": [
                {
                    "name": "a",
                    "image": "x",
                    "env": [
                        {"name": "L", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "L"}}}
                    ],
                }
            ]
        }
        deployment = {
            "metadata": {"name": "web", "namespace": "shop", "uid": "u", "annotations": {
                "kube-nudge.io/enabled": "true", "kube-nudge.io/baseline-hash": "v1-a"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}},
            "status": {"replicas": 2, "updatedReplicas": 2, "availableReplicas": 2},
        }  # fmt: skip
        yield ([deployment] if path.endswith("/deployments") else
               self.pods if path.endswith("/pods") else []), ""  # fmt: skip

    async def get(self, path: str) -> dict[str, Any]:
        stamp = "1970-01-01T00:16:40Z"  # 1000
        return {"metadata": {"name": "app", "creationTimestamp": stamp}, "data": {"L": "x"}}


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
    [row] = asyncio.run(collect(cast(KubeClient, PodsClient(pods)), namespaces=("shop",),
                                hmac_key=None, kinds=BUILTIN_KINDS[:1]))  # fmt: skip
    assert row.state == state, row.detail
