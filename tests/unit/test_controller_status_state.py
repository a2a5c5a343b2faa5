"""The state `kube-nudge status` gives a workload, from its own annotations (pure part)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, cast

import pytest

from kube_nudge.controller.status import DRIFT_STATES, UNVERIFIED, _state, collect
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import CONFIG_HASH, WorkloadDefaults, WorkloadView, project_workload
from kube_nudge.model.annotations import FAILED, LOADED_AT, format_failed


def view(annotations: dict[str, str], template_hash: str = "v1-a") -> WorkloadView:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "shop", "uid": "u",
                     "annotations": {"kube-nudge.io/enabled": "true", **annotations}},
        "spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: template_hash}},
                              "spec": {"containers": [{"name": "a", "image": "x"}]}}},
    }  # fmt: skip
    projected = project_workload(obj, ("spec", "template"), WorkloadDefaults())
    assert projected is not None
    return projected


def test_a_failed_rollout_is_its_own_state_and_counts_as_drift() -> None:
    state, detail = _state(view({FAILED: format_failed("v1-a", 1.0)}), "v1-a", (), {}, 0, [])
    assert state == "failed" and state in DRIFT_STATES
    assert detail.startswith("its rollout to v1-a failed (kube-nudge.io/failed)")
    # A failure of an earlier config is history.
    state, _ = _state(view({FAILED: format_failed("v1-old", 1.0)}), "v1-a", (), {}, 0, [])
    assert state == "current"


def test_drift_says_what_the_workload_may_be_waiting_for() -> None:
    waiting = view({
        "kube-nudge.io/approval": "required", "kube-nudge.io/rollout-order": "2",
    })  # fmt: skip
    state, detail = _state(waiting, "v1-b", (), {}, 0, [])
    assert state == "drift"
    assert "approval (kube-nudge.io/approval: required; kube-nudge approve)" in detail
    assert "lower rollout orders (kube-nudge.io/rollout-order: 2)" in detail
    _, plain = _state(view({}), "v1-b", (), {}, 0, [])
    assert plain == "its config changed and it has not rolled yet"


# Without the key (a user who may not get the key Secret), only facts that need no key count.
KEYLESS = "get on secret kube-nudge/kube-nudge-hmac-key"


def test_without_the_key_old_pods_are_unverified_never_current_nor_drift() -> None:
    # The admin's answer for the same workload is `drift` (its config changed, not rolled).
    assert _state(view({}), "v1-b", (), {"v1-a": 2}, 2, [])[0] == "drift"
    state, detail = _state(view({}), None, (), {"v1-a": 2}, 2, [], without=KEYLESS)
    assert state == UNVERIFIED and state not in DRIFT_STATES
    assert "2 pod(s) started before its config last changed" in detail
    assert "a change of keys it doesn't read counts too" in detail
    assert detail.endswith(f"comparing its hash needs {KEYLESS}")


def test_without_the_key_pods_that_read_the_config_after_its_change_are_current() -> None:
    state, detail = _state(view({}), None, (), {"v1-a": 2}, 0, [], without=KEYLESS)
    assert state == "current"
    assert "every pod was created after its config last changed" in detail
    assert "checked without the key" in detail


def test_without_the_key_no_pods_or_unlisted_pods_are_unverified() -> None:
    state, detail = _state(view({}), None, (), {}, 0, [], without=KEYLESS)
    assert (state, detail.split(",")[0]) == (UNVERIFIED, "cannot verify: no pod tells which "
                                                         "config it runs")  # fmt: skip
    state, detail = _state(view({}), None, (), None, 0, [], without=KEYLESS)
    assert state == UNVERIFIED and "its pods may not be listed here" in detail
    # Not opted in, pods not listable: never the audit's "current".
    opted_out = replace(view({}), settings=replace(view({}).settings, enabled=False))
    assert _state(opted_out, None, (), None, 0, [])[0] == UNVERIFIED


def test_without_the_key_what_needs_no_key_is_still_told() -> None:
    held = _state(view({}), None, ("configmap/app not found",), {"v1-a": 1}, 1, [],
                  without=KEYLESS)  # fmt: skip
    assert held == ("held", "missing: configmap/app not found")
    failed = _state(view({FAILED: format_failed("v1-a", 1.0)}), None, (), {"v1-a": 1}, 1, [],
                    without=KEYLESS)  # fmt: skip
    assert failed[0] == "failed"
    unadopted = replace(view({}), template_hash=None)
    assert _state(unadopted, None, (), {"-": 1}, 1, [], without=KEYLESS)[0] == "not-adopted"


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


def test_without_the_key_a_pod_started_in_the_second_of_the_change_is_not_proof() -> None:
    # API times have whole seconds: a pod started in that second may predate the change; an
    # agent's reload after it may have read old files. Neither proves anything.
    state, detail = _state(view({}), None, (), {"v1-a": 2}, 0, [], without=KEYLESS,
                           unproven=1)  # fmt: skip
    assert state == UNVERIFIED
    assert "1 pod(s) created in the second of its config's last change or before it" in detail
    # With the key, the hashes decide, as before.
    assert _state(view({}), "v1-a", (), {"v1-a": 2}, 0, [], unproven=1)[0] == "current"


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
