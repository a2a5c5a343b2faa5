"""The Helm chart installed with the real helm, running the image built from this checkout
on the real node: two replicas Ready through their real probes, a leader elected between
the pods, a config change rolled onto pods that really run it, a leader killed in a stream
of changes, the snapshot webhook called through its Service, and an uninstall that leaves
nothing behind."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    REPLICASETS,
    SECRETS,
    Resource,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge_dev import chart, manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.node import NODE_LABEL, TAINT_KEY, RealNode
from kube_nudge_dev.nodepods import kubectl, on_real_node, python_container
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects
from tests.integration.controller_support import REPLICA_LOGS, expected_hash, template_hash
from tests.integration.real_node_support import CONFIG_PRINTER, kill_container

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]
REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = next(k for k in BUILTIN_KINDS if k.resource.kind == "Deployment")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
SERVICES = Resource("", "v1", "services", "Service")
WEBHOOKS = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration", namespaced=False)  # fmt: skip
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole",
                         namespaced=False)  # fmt: skip
POLICIES = Resource("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies",
                    "ValidatingAdmissionPolicy", namespaced=False)  # fmt: skip


@dataclass
class Release:
    """One installed release of the chart and where its workloads live."""

    name: str
    namespace: str
    apps: str
    """The namespace of the workloads it manages (selected by the ``labels``)."""
    image: str
    """The controller image, which the test apps run too (it has Python)."""

    @property
    def labels(self) -> dict[str, str]:
        return {"chart-test": self.name}


def _helm(cluster: LocalCluster, *args: str) -> str:
    return chart.helm(*args, f"--kubeconfig={cluster.kubeconfig}", cwd=REPO)


@pytest.fixture
async def release(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
    tmp_path: Path,
) -> AsyncIterator[Release]:
    """The chart installed as a user would (helm install, the image built here), with the
    snapshot strategy and its webhook; uninstalled afterwards, checking that nothing the
    chart or the controller made is left but the documented key Secret."""
    repository, tag = controller_image.ref.rsplit(":", 1)
    state = f"{namespace}-kn"
    rel = Release(name=namespace, namespace=state, apps=namespace, image=controller_image.ref)
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "nodeSelector": {NODE_LABEL: "real"},
        "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        # Only this test's workloads (others' namespaces may still be terminating).
        "workloadSelector": f"chart-test={rel.name}",
        "snapshotStrategy": {"enabled": True, "webhook": {"enabled": True}},
        "log": {"level": "debug"},
    }
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    await asyncio.to_thread(
        _helm, cluster, "install", rel.name, str(chart.CHART), f"--namespace={state}",
        "--create-namespace", f"--values={path}",
    )  # fmt: skip
    try:
        yield rel
    finally:
        # Uninstalled whatever the logs do: replicas left running would act on later tests'
        # objects (pod-selector sources are not scoped by the workload selector).
        try:
            await _keep_replica_logs(kube, cluster, rel, tmp_path)
        finally:
            await asyncio.to_thread(_helm, cluster, "uninstall", rel.name,
                                    f"--namespace={state}", "--wait", "--timeout=120s")  # fmt: skip
    # Nothing cluster-scoped is left. In its namespace, only what the controller made at run
    # time (docs/install.md, Uninstall): its Lease, and its key Secret, kept on purpose so that a
    # reinstall keeps the hashes on every workload and restarts nothing.
    fullname = f"{rel.name}-kube-nudge"
    for cluster_scoped in (WEBHOOKS, CLUSTER_ROLES, POLICIES):
        assert await _named(kube, cluster_scoped.path(), rel.name) == []
    left = {
        resource.kind: sorted(
            o["metadata"]["name"] for o in (await kube.get(resource.path(state)))["items"]
            if not o["metadata"].get("deletionTimestamp")
        )
        for resource in (PODS, DEPLOYMENTS, SERVICES, SECRETS, CONFIGMAPS, LEASES)
    }  # fmt: skip
    assert left == {
        "Pod": [], "Deployment": [], "Service": [], "Secret": [f"{fullname}-hmac-key"],
        "ConfigMap": ["kube-root-ca.crt"], "Lease": [fullname],
    }  # fmt: skip
    await kube.delete(NAMESPACES.path(name=state))


async def _keep_replica_logs(
    kube: KubeClient, cluster: LocalCluster, rel: Release, directory: Path
) -> None:
    """The replicas' logs, for the session's check that no Secret value leaked into one."""
    for pod in (await kube.get(PODS.path(rel.namespace)))["items"]:
        name = pod["metadata"]["name"]
        try:
            text = await asyncio.to_thread(kubectl, cluster, "logs", "-n", rel.namespace, name)
        except RuntimeError as exc:
            if "NotFound" not in str(exc):
                raise
            continue  # replaced since the list: its logs went with it
        log = directory / f"{name}.log"
        log.write_text(text)
        REPLICA_LOGS.append(log)


async def _named(kube: KubeClient, path: str, fragment: str) -> list[str]:
    return [o["metadata"]["name"] for o in (await kube.get(path))["items"]
            if fragment in o["metadata"]["name"]]  # fmt: skip


async def _controller_pods(kube: KubeClient, rel: Release) -> dict[str, dict[str, Any]]:
    """Both replicas Ready through their real probes (the Deployment rolled out)."""
    [deployment] = (await kube.get(DEPLOYMENTS.path(rel.namespace)))["items"]
    name = deployment["metadata"]["name"]
    await wait_for_object(kube, DEPLOYMENTS.path(rel.namespace), name, deployment_complete,
                          timeout=180)  # fmt: skip
    pods = await wait_for_objects(
        kube, PODS.path(rel.namespace),
        lambda found: len(_ready_pods(found)) == 2, timeout=60,
    )  # fmt: skip
    return _ready_pods(pods)


def _ready_pods(pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        name: pod for name, pod in pods.items()
        if not pod["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True"
                for c in pod.get("status", {}).get("conditions", []))
    }  # fmt: skip


async def _leader(kube: KubeClient, rel: Release, pods: set[str]) -> str:
    """The pod holding the Lease (identities are ``<pod name>_<random>``)."""
    leases = await wait_for_objects(
        kube, LEASES.path(rel.namespace),
        lambda found: any(_holder_pod(lease) in pods for lease in found.values()), timeout=60,
    )  # fmt: skip
    return next(_holder_pod(lease) for lease in leases.values() if _holder_pod(lease) in pods)


def _holder_pod(lease: dict[str, Any]) -> str:
    return str(lease.get("spec", {}).get("holderIdentity") or "").rsplit("_", 1)[0]


def _app(rel: Release, strategy: str = "rollout") -> dict[str, Any]:
    """An app on the real node that prints its config at start (env from ConfigMap `app`)."""
    container = python_container(
        rel.image, CONFIG_PRINTER,
        env=[{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}}],
        volumeMounts=[{"name": "config", "mountPath": "/config"}],
    )  # fmt: skip
    spec = on_real_node(manifests.pod_spec(
        containers=[container], volumes=[{"name": "config", "configMap": {"name": "app"}}],
        terminationGracePeriodSeconds=1,
    ))  # fmt: skip
    annotations = {**manifests.ENABLED, "kube-nudge.io/strategy": strategy}
    app = manifests.deployment("app", spec=spec, annotations=annotations)
    app["metadata"]["labels"] = rel.labels
    return app


async def _runs(kube: KubeClient, cluster: LocalCluster, rel: Release, line: str) -> str:
    """Wait until a Ready pod of `app` logged ``line`` from its running container."""

    async def ready_pods() -> list[str]:
        pods = await kube.get(PODS.path(rel.apps), labelSelector="app=app")
        return list(_ready_pods({p["metadata"]["name"]: p for p in pods["items"]}))

    while True:
        for pod in await ready_pods():
            out = await asyncio.to_thread(kubectl, cluster, "logs", "-n", rel.apps, pod)
            if line in out.splitlines():
                return pod
        await asyncio.sleep(0.5)  # polling container logs: no watch exists for them


async def _adopted(kube: KubeClient, rel: Release) -> None:
    """Wait until kube-nudge adopted `app` (its baseline recorded, nothing restarted)."""
    await wait_for_object(
        kube, DEPLOYMENTS.path(rel.apps), "app",
        lambda o: "kube-nudge.io/baseline-hash" in o["metadata"].get("annotations", {}),
        timeout=60,
    )  # fmt: skip


async def _hmac_key(kube: KubeClient, rel: Release) -> bytes:
    [secret] = [s for s in (await kube.get(SECRETS.path(rel.namespace)))["items"]
                if s["metadata"]["name"].endswith("-hmac-key")]  # fmt: skip
    return base64.b64decode(next(iter(secret["data"].values())))


async def test_two_real_replicas_elect_a_leader_and_roll_a_workload_onto_its_new_config(
    kube: AdminClient, cluster: LocalCluster, release: Release
) -> None:
    pods = await _controller_pods(kube, release)
    for replica in pods.values():  # both on the real node, Ready through real probes
        assert replica["spec"]["nodeName"] == "kube-nudge-node"
        [status] = replica["status"]["containerStatuses"]
        assert status["ready"] and status["restartCount"] == 0
    leader = await _leader(kube, release, set(pods))
    assert leader in pods
    # The controller's memory in its real container, as its own /metrics reports it (the
    # host reaches pod addresses over the node's bridge).
    address = pods[leader]["status"]["podIP"]
    rss = await asyncio.to_thread(_metric, f"http://{address}:8080/metrics",
                                  "process_resident_memory_bytes")  # fmt: skip
    print(f"\ncontroller RSS in its container (leader, idle): {rss / 2**20:.1f} MiB")

    await kube.create(CONFIGMAPS.path(release.apps), manifests.configmap("app", {"LEVEL": "v0"}))
    await kube.create(DEPLOYMENTS.path(release.apps), _app(release))
    await asyncio.wait_for(_runs(kube, cluster, release, "env v0"), timeout=120)
    await _adopted(kube, release)

    await kube.merge_patch(CONFIGMAPS.path(release.apps, "app"), {"data": {"LEVEL": "v1"}})
    # The new pod runs the new config: read back from its container, not from the template.
    pod = await asyncio.wait_for(_runs(kube, cluster, release, "env v1"), timeout=120)
    out = await asyncio.to_thread(kubectl, cluster, "exec", "-n", release.apps, pod, "--",
                                  "printenv", "LEVEL")  # fmt: skip
    assert out == "v1\n"
    rolled = await kube.get(DEPLOYMENTS.path(release.apps, "app"))
    assert template_hash(rolled, DEPLOYMENT) == await expected_hash(
        kube, DEPLOYMENT, rolled, await _hmac_key(kube, release)
    )

    # helm upgrade replaces both replicas (a new pod template). The new leader writes
    # nothing at start: after one more change, exactly one more ReplicaSet exists (a write
    # of another hash at start would have left one more).
    sets = await _replica_set_names(kube, release)
    await asyncio.to_thread(
        _helm, cluster, "upgrade", release.name, str(chart.CHART),
        f"--namespace={release.namespace}", "--reuse-values", "--set=log.level=info",
    )  # fmt: skip
    upgraded = await _controller_pods(kube, release)
    assert not set(upgraded) & set(pods)
    await _leader(kube, release, set(upgraded))
    await kube.merge_patch(CONFIGMAPS.path(release.apps, "app"), {"data": {"LEVEL": "v2"}})
    await asyncio.wait_for(_runs(kube, cluster, release, "env v2"), timeout=120)
    assert len((await _replica_set_names(kube, release)) - sets) == 1


def _metric(url: str, name: str) -> float:
    """One unlabelled sample from a Prometheus text page."""
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310  # nosec B310 # a pod address on the node's bridge
        for line in response.read().decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in {url}")


async def _replica_set_names(kube: KubeClient, rel: Release) -> set[str]:
    return {rs["metadata"]["name"] for rs in (await kube.get(REPLICASETS.path(rel.apps)))["items"]}


async def test_a_killed_leader_is_replaced_and_no_change_is_lost_or_rolled_twice(
    kube: AdminClient, cluster: LocalCluster, release: Release
) -> None:
    pods = await _controller_pods(kube, release)
    leader = await _leader(kube, release, set(pods))
    await kube.create(CONFIGMAPS.path(release.apps), manifests.configmap("app", {"LEVEL": "v0"}))
    await kube.create(DEPLOYMENTS.path(release.apps), _app(release))
    await _adopted(kube, release)

    [lease] = (await kube.get(LEASES.path(release.namespace)))["items"]
    held = lease["spec"]["holderIdentity"]
    changes = 8
    killed_at = 0.0
    for version in range(1, changes + 1):
        await kube.merge_patch(CONFIGMAPS.path(release.apps, "app"),
                               {"data": {"LEVEL": f"v{version}"}})  # fmt: skip
        if version == 3:  # mid-stream: SIGKILL the leader's process (a crash, no release)
            await asyncio.to_thread(kill_container, pods[leader], "kube-nudge")
            killed_at = time.monotonic()
        await asyncio.sleep(1)  # the stream's pace: one change a second
    await wait_for_object(
        kube, LEASES.path(release.namespace), lease["metadata"]["name"],
        lambda o: o["spec"].get("holderIdentity") not in (None, held), timeout=60,
    )  # fmt: skip
    takeover = time.monotonic() - killed_at

    # No change lost: the final config runs; nothing rolled twice: one ReplicaSet per
    # distinct config hash.
    pod = await asyncio.wait_for(_runs(kube, cluster, release, f"env v{changes}"), timeout=120)
    assert pod
    final = await kube.get(DEPLOYMENTS.path(release.apps, "app"))
    assert template_hash(final, DEPLOYMENT) == await expected_hash(
        kube, DEPLOYMENT, final, await _hmac_key(kube, release)
    )
    sets = (await kube.get(REPLICASETS.path(release.apps)))["items"]
    hashes = [template_hash(rs, DEPLOYMENT) for rs in sets]
    assert len(hashes) == len(set(hashes)), hashes
    assert len(sets) <= changes + 1
    print(f"\nfailover with real pods: the new leader held the Lease {takeover:.2f} s after "
          f"the SIGKILL; {len(sets) - 1} rollouts for {changes} changes")  # fmt: skip


async def test_the_snapshot_webhook_is_called_through_its_service(
    kube: AdminClient, cluster: LocalCluster, release: Release
) -> None:
    await _controller_pods(kube, release)
    await kube.create(CONFIGMAPS.path(release.apps), manifests.configmap("app", {"LEVEL": "v0"}))
    await kube.create(DEPLOYMENTS.path(release.apps), _app(release, strategy="snapshot"))
    original = _app(release, strategy="snapshot")["spec"]["template"]["spec"]
    await _adopted(kube, release)
    await kube.merge_patch(CONFIGMAPS.path(release.apps, "app"), {"data": {"LEVEL": "v1"}})
    rolled = await wait_for_object(
        kube, DEPLOYMENTS.path(release.apps), "app",
        lambda o: o["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] != "app",
        timeout=60,
    )  # fmt: skip
    copy = rolled["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
    await asyncio.wait_for(_runs(kube, cluster, release, "env v1"), timeout=120)

    # A GitOps re-apply of the original manifest. Through the webhook (the API server calls
    # its Service's ClusterIP; kube-proxy takes it to a controller pod) the stored template
    # is unchanged: same copy, same generation. Until the API server has picked the
    # webhook's registration up, the controller points the template back instead, with a
    # new generation: re-apply until the webhook answers.
    reapply = [{"op": "replace", "path": "/spec/template/spec", "value": original}]

    async def reapplied_unchanged() -> None:
        while True:
            before = await kube.get(DEPLOYMENTS.path(release.apps, "app"))
            await kube.request(
                "PATCH", DEPLOYMENTS.path(release.apps, "app"),
                content_type="application/json-patch+json", body=reapply,
            )  # fmt: skip
            after = await kube.get(DEPLOYMENTS.path(release.apps, "app"))
            same_copy = after["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"] == copy
            if same_copy and after["metadata"]["generation"] == before["metadata"]["generation"]:
                return
            await wait_for_object(
                kube, DEPLOYMENTS.path(release.apps), "app",
                lambda o: o["spec"]["template"]["spec"]["volumes"][0]["configMap"]["name"]
                == copy, timeout=60,
            )  # fmt: skip

    await asyncio.wait_for(reapplied_unchanged(), timeout=90)
    try:
        await kube.get(CONFIGMAPS.path(release.apps, copy))
    except ApiError as exc:  # pragma: no cover - the message names what is missing
        raise AssertionError(f"the copy {copy} the template points at is gone") from exc
