"""`kube-nudge status` as a person or a cron job runs it: which pods run which config."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    SECRETS,
    Resource,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.reporting.audit import Audit
from kube_nudge.runtime.metrics import Metrics
from kube_nudge_dev import chart, manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects
from tests.integration.accounts import RBAC, account_kubeconfig
from tests.integration.controller_support import (
    HMAC_SECRET,
    change_after_pods_started,
    cli_as,
    eventually,
    running_controller,
    wait_cli,
)
from tests.schema_support import status_validator

pytestmark = pytest.mark.cluster
CLUSTERROLES = Resource(RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
REPO = Path(__file__).resolve().parents[2]


async def status(kubeconfig: Path, namespace: str, *flags: str) -> tuple[int, str, str]:
    """``kube-nudge status FLAGS``, the key Secret in ``namespace`` unless a flag says."""
    return await cli_as(kubeconfig, namespace, "status", *flags, timeout=60)


async def make_stale_legacy(kube: AdminClient, namespace: str) -> None:
    """A Deployment `legacy`, not opted in, whose pod started before its ConfigMap changed."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("legacy", spec=manifests.env_consumer(), annotations={}),
    )
    await change_after_pods_started(kube, namespace)


async def test_status_finds_stale_pods_and_clears_once_rolled(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await make_stale_legacy(kube, namespace)

    # Not opted in: invisible without --all, found with it.
    code, out, _ = await status(cluster.kubeconfig, namespace, "-o", "json")
    assert code == 0 and json.loads(out)["workloads"] == []
    code, out, err = await status(cluster.kubeconfig, namespace, "--all", "-o", "json")
    assert code == 1, err
    document = json.loads(out)
    status_validator().validate(document)
    assert document["schema"] == "kube-nudge.io/status/v1" and document["drift"] is True
    [row] = document["workloads"]
    assert (row["name"], row["kind"], row["optedIn"], row["state"]) == (
        "legacy", "Deployment", False, "stale"
    )  # fmt: skip
    assert row["stalePods"] == 1 and row["pods"] == {"-": 1}
    assert "certainly stale (env, subPath or init container): configmap/app" in row["detail"]
    assert row["sources"] == ["configmap/app [LEVEL]"]
    assert "debug" not in out and "info" not in out  # names and hashes, never values

    code, table, _ = await status(cluster.kubeconfig, namespace, "--all")
    assert code == 1
    lines = table.splitlines()
    assert lines[0].split() == ["WORKLOAD", "STATE", "PODS", "DETAIL"]
    assert lines[1].startswith(f"{namespace}/Deployment/legacy") and " stale " in lines[1]
    assert all(len(line) <= 80 for line in lines), lines

    # Opting in rolls the stale pods (adoption sees them); then status is clean.
    async with running_controller(cluster, namespace) as running:
        await kube.merge_patch(
            DEPLOYMENTS.path(namespace, "legacy"), {"metadata": {"annotations": ENABLED}}
        )
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "legacy",
            lambda o: deployment_complete(o) and o["metadata"]["generation"] > 1, timeout=60,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
    await wait_for_objects(kube, PODS.path(namespace), lambda found: len(found) == 1, timeout=60)
    code, out, err = await status(cluster.kubeconfig, namespace, "--all", "-o", "json")
    assert code == 0, (out, err)
    status_validator().validate(json.loads(out))
    [row] = json.loads(out)["workloads"]
    assert (row["optedIn"], row["state"], row["strategy"]) == (True, "current", "rollout")
    assert row["desiredHash"] == row["appliedHash"] and row["pods"] == {row["appliedHash"]: 1}


async def test_the_drift_audit_exports_what_status_all_finds(
    kube: AdminClient, namespace: str
) -> None:
    await make_stale_legacy(kube, namespace)
    metrics = Metrics()
    audit = Audit(
        kube, metrics, interval=60, namespaces=(namespace,), kinds=BUILTIN_KINDS,
        hmac_key=b"k" * 32, compat=False,
    )  # fmt: skip
    assert metrics.audit_timestamp._value.get() == 0
    await audit.run_once()
    assert metrics.audit_workloads.labels(state="stale", opted_in="false")._value.get() == 1
    assert metrics.audit_workloads.labels(state="current", opted_in="true")._value.get() == 0
    assert metrics.audit_stale_pods._value.get() == 1
    assert metrics.audit_timestamp._value.get() > 0


async def test_a_user_who_may_not_read_the_key_never_sees_drift_as_current(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    # kube-nudge's own namespace holds the key; the CI account may edit the team's only.
    state = f"{namespace}-kn"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": state}})
    try:
        ci = await account_kubeconfig(
            kube, cluster, namespace, "as-edit", tmp_path, cluster_role="edit"
        )
        await kube.create(CONFIGMAPS.path(namespace),
                          manifests.configmap("app", {"LEVEL": "info"}))  # fmt: skip
        await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
            "web", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED))  # fmt: skip
        # Adopted, then rolled once by kube-nudge: its template carries the hash.
        async with running_controller(cluster, namespace) as running:
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "web",
                lambda o: BASELINE_HASH in (o["metadata"].get("annotations") or {}), timeout=60,
            )  # fmt: skip
            await change_after_pods_started(kube, namespace, "debug")
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "web",
                lambda o: deployment_complete(o) and o["metadata"]["generation"] > 1, timeout=60,
            )  # fmt: skip
            await running.controller.settled(timeout=30)
        key = await kube.get(SECRETS.path(namespace, HMAC_SECRET))
        await kube.create(SECRETS.path(state),
                          {"metadata": {"name": HMAC_SECRET}, "data": key["data"]})  # fmt: skip
        # No controller runs: the next change is not rolled. The admin sees drift.
        await change_after_pods_started(kube, namespace, "trace")
        where = f"--state-namespace={state}"
        code, out, err = await status(cluster.kubeconfig, namespace, where, "-o", "json")
        assert code == 1, (out, err)
        [row] = json.loads(out)["workloads"]
        assert row["state"] == "drift"

        # The CI account can't read the key: never `current`, never exit 0, and it is told
        # which permission is missing.
        code, out, err = await status(ci, namespace, where, "-o", "json")
        assert code == 6, (out, err)
        document = json.loads(out)
        status_validator().validate(document)
        assert document["desiredKnown"] is False and document["drift"] is False
        [row] = document["workloads"]
        assert row["state"] == "unverified", row
        assert f"get on secret {state}/{HMAC_SECRET}" in row["detail"]
        assert "1 pod(s) started before its config last changed" in row["detail"]
        assert row["stalePods"] == 1
        assert f"cannot read Secret {state}/{HMAC_SECRET} (403" in err
        # wait works for it: pending, so it times out (it used to exit 2 at once).
        code, _, err = await wait_cli(ci, namespace, "deployment/web", "--timeout=3s",
                                      state=state)  # fmt: skip
        assert code == 3, err
        assert f"timed out: {namespace}/Deployment/web: waiting (unverified: " in err

        # Once the controller rolls the change, the same account sees it out, and says so.
        async with running_controller(cluster, namespace):
            code, out, err = await wait_cli(ci, namespace, "configmap/app", "--timeout=90s",
                                            state=state)  # fmt: skip
            assert code == 0, (out, err)
            assert "all 1 workload(s) run the new config" in out
        code, out, err = await status(ci, namespace, where, "-o", "json")
        assert code == 0, (out, err)
        [row] = json.loads(out)["workloads"]
        assert row["state"] == "current" and "checked without the key" in row["detail"]
        code, out, _ = await status(cluster.kubeconfig, namespace, where, "-o", "json")
        assert code == 0 and json.loads(out)["workloads"][0]["state"] == "current"
    finally:
        await kube.delete(NAMESPACES.path(name=state))


async def test_the_charts_viewer_role_is_enough_for_status_and_wait(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    [role] = [
        d
        for d in yaml.safe_load_all(chart.template(REPO, sets=("viewer.create=true",)))
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-viewer")
    ]
    role["metadata"] = {"name": f"{namespace}-viewer"}
    await kube.create(CLUSTERROLES.path(), role)
    try:
        viewer = await account_kubeconfig(
            kube, cluster, namespace, "as-viewer", tmp_path, cluster_role=f"{namespace}-viewer"
        )
        await kube.create(CONFIGMAPS.path(namespace),
                          manifests.configmap("app", {"LEVEL": "info"}))  # fmt: skip
        secret = await kube.create(SECRETS.path(namespace), manifests.secret("db", {"pw": "x"}))
        # API times have whole seconds: pods that start in the second their config was
        # written can't prove they read it (without the key).
        written = parse_timestamp(secret["metadata"]["creationTimestamp"]) or 0.0
        await eventually(lambda: time.time() >= written + 1.0, timeout=5)
        reads_secret = manifests.pod_spec(containers=[{
            "name": "app", "image": "registry.invalid/app:1",
            "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}],
        }])  # fmt: skip
        for name, spec in (("web", manifests.env_consumer("LEVEL")), ("db", reads_secret)):
            workload = manifests.deployment(name, spec=spec, annotations=ENABLED)
            await kube.create(DEPLOYMENTS.path(namespace), workload)
        async with running_controller(cluster, namespace) as running:
            for name in ("web", "db"):
                await wait_for_object(
                    kube, DEPLOYMENTS.path(namespace), name,
                    lambda o: BASELINE_HASH in (o["metadata"].get("annotations") or {})
                    and deployment_complete(o), timeout=60,
                )  # fmt: skip
            await running.controller.settled(timeout=30)
        await wait_for_objects(  # both pods started: their start is what tells without the key
            kube, PODS.path(namespace),
            lambda found: len(found) == 2
            and all((p.get("status") or {}).get("startTime") for p in found.values()),
            timeout=30,
        )  # fmt: skip

        code, out, err = await status(viewer, namespace, "-o", "json")
        assert code == 6, (out, err)  # not 5: the role reads all status needs but Secrets
        status_validator().validate(json.loads(out))
        rows = {row["name"]: row for row in json.loads(out)["workloads"]}
        assert rows["web"]["state"] == "current", rows["web"]
        assert rows["db"]["state"] == "unverified"
        assert f"get on secret {namespace}/db is forbidden" in rows["db"]["detail"]
        code, out, err = await wait_cli(viewer, namespace, "deployment/web", "--timeout=30s")
        assert code == 0, (out, err)
        code, out, err = await wait_cli(viewer, namespace, "deployment/db", "--timeout=60s")
        assert code == 6, (out, err)  # at once: no wait can read the Secret
        assert f"unverified: {namespace}/Deployment/db: UNVERIFIED" in err
    finally:
        await kube.delete(CLUSTERROLES.path(name=f"{namespace}-viewer"))
