"""Argo Rollouts as a built-in kind (``run --argo-rollouts``) against the real API server,
with Argo's own CRDs, each status written through the status subresource as its controller
writes it: ``observedGeneration`` as a string, ``phase``, ``abort``, ``pauseConditions``,
``currentPodHash``/``stableRS``. Writing them here gives each state on cue (an aborted
analysis, a stale status); test_argo_rollouts_controller.py runs the real controller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, ROLLOUTS
from kube_nudge.kube.workloads import ARGO_ROLLOUTS, BUILTIN_KINDS, WorkloadKind
from kube_nudge.model.argorollout import WORKLOAD_GENERATION
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object
from tests.integration.argo_support import (
    adopted,
    change_and_roll,
    install_argo_rollouts_crds,
    rollout,
    rollout_kinds,
)
from tests.integration.controller_support import (
    cli_as,
    events,
    kube_nudge_cli,
    running_controller,
    template_hash,
)

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
TIMEOUT = 60


async def argo_writes(kube: AdminClient, namespace: str, name: str, **status: Any) -> None:
    """Write ``status`` as the Argo controller does after seeing the Rollout's latest spec:
    through the status subresource, ``observedGeneration`` the generation as a string."""
    obj = await kube.get(ROLLOUTS.path(namespace, name))
    observed = str(obj["metadata"]["generation"])
    await kube.merge_patch(
        ROLLOUTS.path(namespace, name) + "/status",
        {"status": {"observedGeneration": observed, **status}},
    )


def healthy(pod_hash: str) -> dict[str, Any]:
    return {"phase": "Healthy", "currentPodHash": pod_hash, "stableRS": pod_hash,
            "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}  # fmt: skip


async def healthy_web(
    kube: AdminClient, namespace: str, annotations: dict[str, str]
) -> tuple[WorkloadKind, ...]:
    """Argo's CRD, ConfigMap ``app`` and Rollout ``web`` reading it, healthy at ReplicaSet
    5f7c; the kinds ``run --argo-rollouts`` watches."""
    await install_argo_rollouts_crds(kube)
    kinds = await rollout_kinds(kube)
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    template = {"metadata": {"labels": {"app": "web"}}, "spec": manifests.env_consumer()}
    await kube.create(ROLLOUTS.path(namespace), rollout("web", annotations, template=template))
    await argo_writes(kube, namespace, "web", **healthy("5f7c"))
    return kinds


async def test_a_rollout_rolls_on_its_config_and_is_followed_as_argo_reports_it(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    kinds = await healthy_web(kube, namespace, ENABLED)
    async with running_controller(cluster, namespace, kinds=kinds) as running:
        await adopted(kube, ROLLOUTS.path(namespace), "web")
        obj, rolled = await change_and_roll(kube, running, ARGO_ROLLOUTS, namespace, "web")
        assert rolled["metadata"]["generation"] == obj["metadata"]["generation"] + 1

        # Argo sees the new template: a canary paused for promotion is in progress, not
        # done and not failed, however long it waits.
        paused = [{"reason": "CanaryPauseStep", "startTime": "2026-11-27T10:00:00Z"}]
        await argo_writes(kube, namespace, "web", phase="Paused", currentPodHash="9a1b",
                          stableRS="5f7c", pauseConditions=paused)  # fmt: skip
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "status", "-o", "json")
        assert code == 0, err
        [row] = [r for r in _rows(out) if r["kind"] == "Rollout"]
        assert (row["name"], row["state"], row["rolledOut"]) == ("web", "rolling", False)
        assert await events(kube, namespace, "RolloutComplete") == []

        # Promoted: healthy, the new ReplicaSet stable.
        await argo_writes(kube, namespace, "web", pauseConditions=None, **healthy("9a1b"))
        await until(lambda: _reasons(kube, namespace, "RolloutComplete"), TIMEOUT)
        [complete] = await events(kube, namespace, "RolloutComplete")
        assert complete["involvedObject"]["kind"] == "Rollout"
        assert complete["message"] == "rollout complete: 2 of 2 updated, 2 available"
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "wait", "rollout/web",
                                      "--timeout=30s")  # fmt: skip
        assert code == 0, out + err
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "status", "-o", "json")
        assert code == 0, err
        [row] = [r for r in _rows(out) if r["kind"] == "Rollout"]
        assert (row["state"], row["rolledOut"]) == ("current", True)


async def test_an_aborted_rollout_fails_and_stops_the_line(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    kinds = await healthy_web(kube, namespace, {**ENABLED, "kube-nudge.io/rollout-order": "1"})
    second = {**ENABLED, "kube-nudge.io/rollout-order": "2"}
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
        "api", replicas=0, spec=manifests.env_consumer(), annotations=second))  # fmt: skip
    async with running_controller(cluster, namespace, kinds=kinds):
        await adopted(kube, ROLLOUTS.path(namespace), "web")
        await adopted(kube, DEPLOYMENTS.path(namespace), "api")
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
        await wait_for_object(
            kube, ROLLOUTS.path(namespace), "web",
            lambda o: template_hash(o, ARGO_ROLLOUTS) is not None, timeout=TIMEOUT,
        )  # fmt: skip
        # An analysis failed: Argo aborts, back on the stable ReplicaSet, and says Degraded.
        await argo_writes(
            kube, namespace, "web", phase="Degraded", abort=True, currentPodHash="9a1b",
            stableRS="5f7c", message="RolloutAborted: Rollout aborted update to revision 2",
        )  # fmt: skip
        await until(lambda: _reasons(kube, namespace, "LineStopped"), TIMEOUT)
        [failed] = await events(kube, namespace, "RolloutFailed")
        assert failed["involvedObject"]["name"] == "web"
        assert failed["type"] == "Warning"
        assert "aborted: RolloutAborted: Rollout aborted update to revision 2" in failed["message"]
        stopped = await events(kube, namespace, "LineStopped")
        assert {e["involvedObject"]["name"] for e in stopped} == {"api"}
        api = await kube.get(DEPLOYMENTS.path(namespace, "api"))
        assert template_hash(api, DEPLOYMENT) is None  # never rolled into the failed change
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "status", "-o", "json")
        assert code == 1, out + err
        [row] = [r for r in _rows(out) if r["kind"] == "Rollout"]
        assert row["state"] == "failed"

        # Released on the failed Rollout (the command its Event names): the line goes on.
        code, out = await kube_nudge_cli(cluster, namespace, "release", "rollout/web")
        assert code == 0, out
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "api",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=TIMEOUT,
        )  # fmt: skip


async def test_a_workload_ref_rollout_rolls_through_its_deployments_template(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await install_argo_rollouts_crds(kube)
    kinds = await rollout_kinds(kube)
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    # The migration shape Argo documents: the Deployment keeps the template, scaled to zero.
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
        "web", replicas=0, spec=manifests.env_consumer(), annotations=ENABLED))  # fmt: skip
    ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    selector = {"matchLabels": {"app": "web"}}  # the Deployment's: Argo checks they match
    await kube.create(ROLLOUTS.path(namespace), rollout("web-ro", ENABLED, workloadRef=ref,
                                                        selector=selector))  # fmt: skip
    async with running_controller(cluster, namespace, kinds=kinds) as running:
        await until(lambda: _reasons(kube, namespace, "NoPodTemplate"), TIMEOUT)
        [told] = await events(kube, namespace, "NoPodTemplate")
        assert (told["involvedObject"]["kind"], told["type"]) == ("Rollout", "Warning")
        assert "opt in Deployment/web instead (kube-nudge.io/enabled)" in told["message"]
        await adopted(kube, DEPLOYMENTS.path(namespace), "web")
        # The hash lands on the Deployment's template: the change Argo watches for (its
        # generation moves, Argo copies it to rollout.argoproj.io/workload-generation).
        obj, rolled = await change_and_roll(kube, running, DEPLOYMENT, namespace, "web")
        assert rolled["metadata"]["generation"] > obj["metadata"]["generation"]
        assert rolled["spec"]["replicas"] == 0  # nothing but the template annotation
        ro = await kube.get(ROLLOUTS.path(namespace, "web-ro"))
        assert "template" not in ro["spec"]  # Argo refuses a template beside workloadRef

        # The rollout is the Rollout's: the Deployment (0 of 0 updated) is followed by it.
        # Argo sees the new template (copies the Deployment's generation) and pauses.
        generation = str(rolled["metadata"]["generation"])
        await kube.merge_patch(
            ROLLOUTS.path(namespace, "web-ro"),
            {"metadata": {"annotations": {WORKLOAD_GENERATION: generation}}},
        )
        paused = [{"reason": "CanaryPauseStep", "startTime": "2026-11-27T10:00:00Z"}]
        await argo_writes(kube, namespace, "web-ro", phase="Paused", currentPodHash="9a1b",
                          stableRS="5f7c", pauseConditions=paused,
                          workloadObservedGeneration=generation)  # fmt: skip
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "status", "-o", "json")
        assert code == 0, err
        [row] = [r for r in _rows(out) if r["kind"] == "Deployment"]
        assert (row["name"], row["state"], row["rolledOut"]) == ("web", "rolling", False)

        # An analysis fails: Argo aborts. The Deployment's rollout failed, and says why.
        await argo_writes(
            kube, namespace, "web-ro", phase="Degraded", abort=True, pauseConditions=None,
            message="RolloutAborted: Rollout aborted update to revision 2",
        )  # fmt: skip
        await until(lambda: _reasons(kube, namespace, "RolloutFailed"), TIMEOUT)
        [failed] = await events(kube, namespace, "RolloutFailed")
        assert (failed["involvedObject"]["kind"], failed["involvedObject"]["name"]) == (
            "Deployment", "web",
        )  # fmt: skip
        assert "Rollout web-ro: aborted: RolloutAborted" in failed["message"]
        assert await events(kube, namespace, "RolloutComplete") == []
        code, out, err = await cli_as(cluster.kubeconfig, namespace, "wait", "deployment/web",
                                      "--timeout=30s")  # fmt: skip
        assert code == 1, out + err


async def test_plan_and_migrate_read_rollouts(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await healthy_web(kube, namespace, {"reloader.stakater.com/auto": "true"})
    # plan, live: the ConfigMap as Git would apply it next; the Rollout reads it.
    head = tmp_path / "head.yaml"
    head.write_text(yaml.safe_dump(manifests.configmap("app", {"LEVEL": "debug"})))
    code, out, err = await cli_as(cluster.kubeconfig, namespace, "plan", "-f", str(head),
                                  "-o", "json", "--compat")  # fmt: skip
    assert code == 1, out + err
    planned = {f"{w['kind']}/{w['name']}": w["action"] for w in json.loads(out)["workloads"]}
    assert planned == {"Rollout/web": "roll"}
    # migrate: the Rollout carrying Reloader's annotation is in the report, adopted at the
    # switch without a restart.
    code, out = await kube_nudge_cli(cluster, namespace, "migrate", "-o", "json")
    assert code == 0, out
    rows = {f"{w['kind']}/{w['name']}": w for w in json.loads(out)["workloads"]}
    assert list(rows) == ["Rollout/web"]
    assert (rows["Rollout/web"]["optedIn"], rows["Rollout/web"]["atSwitch"]) == (True, "none")


def _rows(out: str) -> list[dict[str, Any]]:
    """The ``workloads`` of ``status -o json``."""
    rows: list[dict[str, Any]] = json.loads(out)["workloads"]
    return rows


async def _reasons(kube: KubeClient, namespace: str, reason: str) -> bool:
    return bool(await events(kube, namespace, reason))
