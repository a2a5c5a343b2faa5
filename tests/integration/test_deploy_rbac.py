"""The chart grants enough and no more: in both install modes its rendered manifests apply to
the real API server (a server-side dry run, then for real), and `kube-nudge run` with the
chart's own command line, authenticated as the chart's ServiceAccount, adopts and rolls a
workload without one Forbidden; what the grant leaves out (writing a user's Secret, reading
outside the watched namespaces) is denied. With `snapshotStrategy.enabled` the same holds for
a workload rolling onto copies that its ReplicaSet then owns, and the chart's admission policy
denies the writes to users' ConfigMaps and Secrets that RBAC then allows; with
`hotStrategy.enabled` (same mode) for a hot change nudging a workload's pods, and the policy
keeps that grant to the one annotation; with `csi.enabled` (same mode) for a rotation the
Secrets Store CSI driver recorded."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.kube.client import MERGE_PATCH, ApiError, KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    ROLLOUTS,
    SECRETS,
    SERVICEACCOUNTS,
    Resource,
)
from kube_nudge.kube.workloads import ARGO_ROLLOUTS, BUILTIN_KINDS
from kube_nudge.model import template_annotation
from kube_nudge.model.annotations import POD_SELECTOR
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.model.references import SourceKind
from kube_nudge.model.standins import parse_stand_ins as parse_snapshots
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge.strategies.snapshot.copies import SNAPSHOT_LABEL
from kube_nudge.strategies.snapshot.model import BASELINE_SNAPSHOTS, SNAPSHOTS, parse_baseline
from kube_nudge_dev import chart, manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import ADMISSION, CHART_KINDS, apply_documents
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_object, wait_for_objects
from tests.integration.argo_support import install_argo_rollouts_crds
from tests.integration.controller_support import eventually, start_replica, template_hash
from tests.integration.csi_support import (
    csi_consumer,
    install_driver_crds,
    mounted,
    rotated,
    running_pods,
)
from tests.integration.hot_support import agent_container

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
# Flags the test sets itself: a free local port for the probes, no debounce to be quick.
OWN_FLAGS = ("run", "--metrics-addr=")
SNAPSHOT = {**ENABLED, "kube-nudge.io/strategy": "snapshot"}
HOT = {**ENABLED, "kube-nudge.io/strategy": "hot"}


async def denied(call: Any) -> bool:
    try:
        await call
    except ApiError as exc:
        return exc.status == 403
    return False


@pytest.mark.parametrize("mode", ["cluster-wide", "namespace-scoped", "snapshot"])
async def test_controller_runs_with_exactly_the_charts_rbac(
    mode: str, kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    state = f"{namespace}-kn"  # the release namespace: its Lease and key Secret
    scoped = mode != "cluster-wide"
    # namespace-scoped, with the snapshot and hot strategies' grants
    snapshot = mode == "snapshot"
    sets: tuple[str, ...] = (f"watchNamespaces={{{namespace}}}",) if scoped else ()
    sets += (
        ("snapshotStrategy.enabled=true", "hotStrategy.enabled=true", "csi.enabled=true")
        if snapshot
        else ()
    )
    sets += ("argoRollouts.enabled=true",) if snapshot else ()  # the optional grants
    # Only this test's workload: cluster-wide, workloads other tests left in namespaces still
    # being deleted would otherwise be adopted, and Events about them refused.
    sets += (f"workloadSelector=rbac-test={namespace}",)
    # The release is named after the test, so its cluster-scoped names are unique.
    rendered = chart.template(REPO, release=namespace, namespace=state, sets=sets)
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    assert bool([d for d in docs if d["kind"] == "ClusterRole"]) is not scoped
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]

    await kube.create(NAMESPACES.path(), {"metadata": {"name": state}})
    cluster_scoped: list[str] = []
    try:
        cluster_scoped = await apply_documents(kube, docs)
        token = await kube.create(
            SERVICEACCOUNTS.path(state, account, "token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
        config = json.loads(cluster.kubeconfig.read_text())
        config["users"] = [{"name": "sa", "user": {"token": token["status"]["token"]}}]
        config["contexts"][0]["context"]["user"] = "sa"
        kubeconfig = tmp_path / "sa.kubeconfig"
        kubeconfig.write_text(json.dumps(config))

        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
        await kube.create(SECRETS.path(namespace), manifests.secret("user", {"k": "v"}))
        spec = manifests.pod_spec(volumes=[{"name": "c", "configMap": {"name": "app"}}])
        app = manifests.deployment("app", spec=spec, annotations=SNAPSHOT if snapshot else ENABLED)
        app["metadata"]["labels"] = {"rbac-test": namespace}
        await kube.create(DEPLOYMENTS.path(namespace), app)
        # kube-nudge.io/pod-selector: listing pods and budgets, evicting (not opted in).
        await kube.create(CONFIGMAPS.path(namespace), manifests.configmap(
            "evict", {"K": "1"}, {POD_SELECTOR: "app=evictable"}))  # fmt: skip
        await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("evictable"))
        if snapshot:  # strategy hot: a volume-only change nudges the pods
            await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("hot", {"K": "1"}))
            volume = {"name": "c", "configMap": {"name": "hot"}}
            hot_spec = manifests.pod_spec(volumes=[volume])
            hot_spec["containers"].append(agent_container("/c", "c"))
            hot = manifests.deployment("hot", spec=hot_spec, annotations=HOT)
            hot["metadata"]["labels"] = {"rbac-test": namespace}
            await kube.create(DEPLOYMENTS.path(namespace), hot)
            # --argo-rollouts: a Rollout is read, followed and annotated with the chart's grant.
            await install_argo_rollouts_crds(kube)
            template = {"metadata": {"labels": {"app": "ro"}}, "spec": spec}
            await kube.create(ROLLOUTS.path(namespace), {
                "apiVersion": ROLLOUTS.api_version, "kind": "Rollout",
                "metadata": {"name": "ro", "annotations": ENABLED,
                             "labels": {"rbac-test": namespace}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "ro"}},
                         "template": template},
            })  # fmt: skip

        if snapshot:  # --csi-secrets: the Secrets Store CSI driver's statuses, read
            await install_driver_crds(kube)
            csi = manifests.deployment("csi", spec=csi_consumer("db"), annotations={
                **ENABLED, "kube-nudge.io/adopt": "never-roll"})  # fmt: skip
            csi["metadata"]["labels"] = {"rbac-test": namespace}
            await kube.create(DEPLOYMENTS.path(namespace), csi)
            [csi_pod] = await running_pods(kube, namespace, "csi", 1)
            await mounted(kube, csi_pod, "db", {"db-password": "1"})
        # The chart's command line as it is, but for the probe port; cluster-wide, it watches
        # every namespace of the session cluster, as installed. Scoped, the chart's own
        # --namespace flags say which (kube-nudge refuses one given twice).
        chart_flags = [a for a in container["args"] if not a.startswith(OWN_FLAGS)]
        assert any(a.startswith("--namespace=") for a in chart_flags) is scoped
        replica = await start_replica(
            kubeconfig, None, tmp_path / "kn.log",
            state_namespace=state, extra_args=(*chart_flags, "--debounce=0"),
        )  # fmt: skip
        try:
            await until(replica.leading, 60)
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "app",
                lambda o: "kube-nudge.io/baseline-hash" in o["metadata"].get("annotations", {}),
                timeout=30,
            )  # fmt: skip
            if snapshot:
                await wait_for_object(
                    kube, ROLLOUTS.path(namespace), "ro",
                    lambda o: "kube-nudge.io/baseline-hash" in o["metadata"]["annotations"],
                    timeout=30,
                )  # fmt: skip
            await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"K": "2"}})
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "app",
                lambda o: template_hash(o, BUILTIN_KINDS[0]) is not None, timeout=30,
            )  # fmt: skip
            if snapshot:  # the Rollout too
                await wait_for_object(
                    kube, ROLLOUTS.path(namespace), "ro",
                    lambda o: template_hash(o, ARGO_ROLLOUTS) is not None, timeout=30,
                )  # fmt: skip
            if snapshot:  # rolled onto a copy, which its ReplicaSet then takes over, beside
                # the copy of the adopted config the Deployment keeps (for a rollback)
                app = await kube.get(DEPLOYMENTS.path(namespace, "app"))
                text = template_annotation(app, BUILTIN_KINDS[0].template_path, SNAPSHOTS)
                [(_, copy)] = parse_snapshots(text)
                owners = {copy: ["ReplicaSet"]}
                baseline = parse_baseline(app["metadata"]["annotations"][BASELINE_SNAPSHOTS])
                assert baseline is not None
                owners |= {name: ["Deployment"] for kind, name in baseline.copies
                           if kind is SourceKind.CONFIGMAP}  # fmt: skip
                await wait_for_objects(
                    kube, CONFIGMAPS.path(namespace),
                    lambda found: {n: [r["kind"] for r in o["metadata"].get("ownerReferences")
                                       or []] for n, o in found.items()} == owners,
                    params={"labelSelector": SNAPSHOT_LABEL}, timeout=30,
                )  # fmt: skip
            [(old, pod)] = (await wait_for_objects(
                kube, PODS.path(namespace), lambda found: len(found) == 1 and all(
                    (p.get("status") or {}).get("startTime") for p in found.values()),
                params={"labelSelector": "app=evictable"}, timeout=30,
            )).items()  # fmt: skip
            # Whole-second times: the change must land in a later second to make it stale.
            started = parse_timestamp(pod["status"]["startTime"]) or 0.0
            await eventually(lambda: time.time() >= started + 1.0, timeout=5)
            await kube.merge_patch(CONFIGMAPS.path(namespace, "evict"), {"data": {"K": "2"}})
            await wait_for_objects(
                kube, PODS.path(namespace), lambda found: old not in found and len(found) == 1,
                params={"labelSelector": "app=evictable"}, timeout=30,
            )  # fmt: skip
            if snapshot:  # a rotation the driver recorded rolls the CSI consumer
                await wait_for_object(
                    kube, DEPLOYMENTS.path(namespace), "csi",
                    lambda o: "kube-nudge.io/baseline-hash" in o["metadata"]["annotations"],
                    timeout=30,
                )  # fmt: skip
                await rotated(kube, csi_pod, "db", {"db-password": "2"})
                await wait_for_object(
                    kube, DEPLOYMENTS.path(namespace), "csi",
                    lambda o: template_hash(o, BUILTIN_KINDS[0]) is not None, timeout=30,
                )  # fmt: skip
                await wait_for_object(
                    kube, DEPLOYMENTS.path(namespace), "hot",
                    lambda o: "kube-nudge.io/baseline-hash" in o["metadata"]["annotations"],
                    timeout=30,
                )  # fmt: skip
                await kube.merge_patch(CONFIGMAPS.path(namespace, "hot"), {"data": {"K": "2"}})
                await wait_for_objects(
                    kube, PODS.path(namespace), lambda found: len(found) == 1 and all(
                        HOT_RELOAD in (p["metadata"].get("annotations") or {})
                        for p in found.values()),
                    params={"labelSelector": "app=hot"}, timeout=30,
                )  # fmt: skip
            metrics = await replica.get("/metrics")
            assert metrics is not None
            assert 'kube_nudge_pod_evictions_total{outcome="evicted"} 1.0' in metrics.text
            assert 'kube_nudge_errors_total{stage="event"} 0.0' in metrics.text
            assert "Forbidden" not in (tmp_path / "kn.log").read_text()
        finally:
            replica.proc.send_signal(signal.SIGTERM)
            await replica.proc.wait()

        # What the grant leaves out, asked as the same ServiceAccount.
        sa = AdminClient.from_config(kubeconfig)
        try:
            # Denied by RBAC, or (where RBAC must grant more: the snapshot strategy's writes,
            # creating the key Secret) by the chart's admission policy.
            # The API server loads admission policies asynchronously: wait (with a dry run
            # that writes nothing) until the chart's is in force, then ask for real.
            async def policy_in_force() -> bool:
                probe = manifests.secret("probe", {})
                return await denied(sa.request("POST", SECRETS.path(state), params={
                    "dryRun": "All"}, body=probe))  # fmt: skip

            await until(policy_in_force, 30)
            user_secret = SECRETS.path(namespace, "user")
            assert await denied(sa.merge_patch(user_secret, {"data": {"k": "eA=="}}))
            assert await denied(sa.delete(user_secret))
            assert await denied(sa.create(SECRETS.path(namespace), manifests.secret("x", {})))
            assert await denied(sa.create(SECRETS.path(state), manifests.secret("x", {})))
            assert await denied(sa.delete(CONFIGMAPS.path(namespace, "app")))
            assert await denied(sa.delete(DEPLOYMENTS.path(namespace, "app")))
            # Patching workloads is granted; the policy keeps it to config: never what runs.
            workload = DEPLOYMENTS.path(namespace, "app")
            container = {"name": "app", "image": "registry.invalid/other:1"}
            for change in (
                {"spec": {"template": {"spec": {"containers": [container]}}}},
                {"spec": {"template": {"spec": {"serviceAccountName": "admin"}}}},
                {"spec": {"replicas": 7}},
                {"metadata": {"labels": {"rbac-test": "elsewhere"}}},
            ):
                assert await denied(sa.merge_patch(workload, change)), change
            await sa.merge_patch(workload, {"metadata": {"annotations": {"k": "v"}}})  # allowed
            # Pods: without strategy hot's grant, no patch at all; with it, its annotation only.
            [pod] = (await kube.get(PODS.path(namespace), labelSelector="app=app"))["items"]
            pod_path = PODS.path(namespace, pod["metadata"]["name"])

            def patch_pod(change: dict[str, Any], dry_run: bool = False) -> Any:
                return sa.request("PATCH", pod_path, body={"metadata": change},
                                  params={"dryRun": "All"} if dry_run else None,
                                  content_type=MERGE_PATCH)  # fmt: skip

            nudge = {"annotations": {HOT_RELOAD: "v1-x@1"}}
            if snapshot:

                async def pod_policy_in_force() -> bool:
                    return await denied(patch_pod({"labels": {"app": "x"}}, dry_run=True))

                await until(pod_policy_in_force, 30)
                await patch_pod(nudge)  # allowed
                pod_changes: list[dict[str, Any]] = [
                    {"labels": {"app": "elsewhere"}},
                    {"annotations": {"other": "x"}},
                    {"ownerReferences": None},
                ]
                for pod_change in pod_changes:
                    assert await denied(patch_pod(pod_change)), pod_change
            else:
                assert await denied(patch_pod(nudge))
            if scoped:  # nothing outside the watched namespace
                assert await denied(sa.get(CONFIGMAPS.path()))
                assert await denied(sa.get(SECRETS.path("default")))
        finally:
            await sa.aclose()
    finally:
        for path in cluster_scoped:
            await kube.delete(path)
        await kube.delete(NAMESPACES.path(name=state))


WEBHOOKS = Resource(ADMISSION, "v1", "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration", namespaced=False)  # fmt: skip


async def test_the_charts_snapshot_webhook_passes_the_api_servers_validation(
    kube: KubeClient, namespace: str
) -> None:
    """The chart with the snapshot webhook, in both certificate modes, in a server-side dry
    run (all but cert-manager's Certificate, whose CRD the session cluster lacks)."""
    kinds = {**CHART_KINDS, "Secret": SECRETS, "MutatingWebhookConfiguration": WEBHOOKS}
    webhook = ("snapshotStrategy.enabled=true", "snapshotStrategy.webhook.enabled=true",
               f"watchNamespaces={{{namespace}}}")  # fmt: skip
    cert_manager = ("snapshotStrategy.webhook.certManager.enabled=true",
                    "snapshotStrategy.webhook.certManager.issuerRef.name=webhook-ca")  # fmt: skip
    for sets in (webhook, webhook + cert_manager):
        rendered = chart.template(REPO, release=namespace, namespace=namespace, sets=sets)
        docs = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] != "Certificate"]
        for doc in docs:
            path = kinds[doc["kind"]].path(doc["metadata"].get("namespace"))
            await kube.request("POST", path, params={"dryRun": "All"}, body=doc)
    # the dry run does validate: the same configuration with a bad field is refused
    [registration] = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    registration["webhooks"][0]["reinvocationPolicy"] = "Always-ish"
    with pytest.raises(ApiError) as refused:
        await kube.request("POST", WEBHOOKS.path(), params={"dryRun": "All"}, body=registration)
    assert refused.value.status == 422
