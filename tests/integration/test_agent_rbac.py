"""The chart's agent grant (`agent.rbac.serviceAccounts`) against the real API server: the
rendered Role, RoleBinding and ValidatingAdmissionPolicy apply, and a listed ServiceAccount's
token bound to pod A (as the kubelet projects it into A) lets `kube-nudge agent` record
what it loaded on A, and nothing else: not on pod B, not A's labels or other annotations,
and a token bound to no pod patches nothing, though RBAC grants patch on every pod of the
namespace."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.agent.config import ApiSpec
from kube_nudge.agent.metrics import AgentMetrics
from kube_nudge.agent.podrecord import PodRecorder, PodRef, RecordWorker
from kube_nudge.agentwire import LOADED_AT, LOADED_HASH, RELOAD_FAILED_AT
from kube_nudge.kube.client import MERGE_PATCH, ApiError, KubeClient
from kube_nudge.kube.resources import PODS, SERVICEACCOUNTS, Resource
from kube_nudge_dev import chart, manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import CHART_KINDS, apply_documents, cluster_scoped
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
SELF_SUBJECT_REVIEWS = Resource("authentication.k8s.io", "v1", "selfsubjectreviews",
                                "SelfSubjectReview", namespaced=False)  # fmt: skip
# What the API server puts in the user info of a token bound to a pod (the service account
# authenticator's extra keys).
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
ACCOUNT = "web"


async def refusal(call: Awaitable[Any]) -> str | None:
    """The message of a 403, or None when the call went through."""
    try:
        await call
    except ApiError as exc:
        if exc.status != 403:
            raise
        return exc.message
    return None


async def token_for(kube: KubeClient, namespace: str, pod: dict[str, Any] | None) -> str:
    """A token of the ServiceAccount, bound to ``pod`` (as a pod's projected token is), or
    to nothing."""
    spec: dict[str, Any] = {}
    if pod is not None:
        meta = pod["metadata"]
        spec["boundObjectRef"] = {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                  "uid": meta["uid"]}  # fmt: skip
    review = await kube.create(
        SERVICEACCOUNTS.path(namespace, ACCOUNT, "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    return str(review["status"]["token"])


def client_for(cluster: LocalCluster, token: str, kubeconfig: Path) -> KubeClient:
    """A client authenticated by ``token`` alone."""
    config = json.loads(cluster.kubeconfig.read_text())
    config["users"] = [{"name": "sa", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "sa"
    kubeconfig.write_text(json.dumps(config))
    return KubeClient.from_config(kubeconfig)


async def test_the_agent_may_record_only_on_its_own_pod(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sets = (f"agent.rbac.serviceAccounts[0].namespace={namespace}",
            f"agent.rbac.serviceAccounts[0].name={ACCOUNT}")  # fmt: skip
    # The release is named after the test, so its cluster-scoped names are unique.
    rendered = chart.template(REPO, release=namespace, namespace=namespace, sets=sets)
    agent = f"{namespace}-kube-nudge-agent"
    docs = [d for d in yaml.safe_load_all(rendered)
            if d and d["metadata"]["name"].startswith(agent)]  # fmt: skip
    assert sorted(d["kind"] for d in docs) == [
        "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
    ]  # fmt: skip
    [policy] = [d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]

    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": ACCOUNT}})
    pod_a, pod_b = [
        await kube.create(PODS.path(namespace), {
            "metadata": {"name": name, "labels": {"app": "web"}, "annotations": {"team": "a"}},
            "spec": manifests.pod_spec(serviceAccountName=ACCOUNT)})
        for name in ("a", "b")
    ]  # fmt: skip
    # Deleting the namespace does not remove these.
    cluster_paths = cluster_scoped(docs)
    clients: list[KubeClient] = []
    try:
        await apply_documents(kube, docs)
        bound = client_for(cluster, await token_for(kube, namespace, pod_a), tmp_path / "a.conf")
        unbound = client_for(cluster, await token_for(kube, namespace, None), tmp_path / "u.conf")
        clients += [bound, unbound]
        # The key the policy relies on is what this API server reports for these tokens.
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        me = (await bound.create(SELF_SUBJECT_REVIEWS.path(), review))["status"]["userInfo"]
        assert me["username"] == f"system:serviceaccount:{namespace}:{ACCOUNT}"
        assert me["extra"][POD_NAME_EXTRA] == ["a"]
        me = (await unbound.create(SELF_SUBJECT_REVIEWS.path(), review))["status"]["userInfo"]
        assert POD_NAME_EXTRA not in (me.get("extra") or {})

        def patch(
            client: KubeClient, pod: str, meta: dict[str, Any], dry_run: bool = False
        ) -> Awaitable[Any]:
            return client.request(
                "PATCH", PODS.path(namespace, pod), body={"metadata": meta},
                params={"dryRun": "All"} if dry_run else None, content_type=MERGE_PATCH,
            )  # fmt: skip

        stamp = {"annotations": {LOADED_AT: "1.000"}}

        # The API server loads the RoleBinding and the policy asynchronously: wait (with a
        # dry run that writes nothing) until the policy refuses a label on pod A, which also
        # means RBAC let the request through to admission.
        async def policy_in_force() -> bool:
            why = await refusal(patch(bound, "a", {"labels": {"app": "x"}}, dry_run=True))
            return why is not None and policy in why

        await until(policy_in_force, 60)
        # ... and its expressions type-check against the Pod schema without a warning.
        policy_path = CHART_KINDS["ValidatingAdmissionPolicy"].path(name=policy)

        async def type_checked() -> bool:
            status = (await kube.get(policy_path)).get("status") or {}
            return bool(status.get("observedGeneration"))

        await until(type_checked, 60)
        status = (await kube.get(policy_path))["status"]
        assert not (status.get("typeChecking") or {}).get("expressionWarnings"), status

        # What the agent writes, as it writes it (its worker, merge patch, field manager),
        # with a token bound to pod A in the file a projected volume would hold.
        (tmp_path / "token").write_text(await token_for(kube, namespace, pod_a))
        ca = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
        (tmp_path / "ca.crt").write_bytes(base64.b64decode(ca["certificate-authority-data"]))
        api = ApiSpec(cluster.server, str(tmp_path / "token"), str(tmp_path / "ca.crt"))

        def agent_records(pod: str) -> int:
            """A reload and a failed one recorded on ``pod``; the number of failed writes."""
            recorder = PodRecorder(api, cluster.server, PodRef(namespace, pod),
                                   sleep=lambda _: True, retries=0)  # fmt: skip
            metrics = AgentMetrics()
            worker = RecordWorker(recorder, metrics)
            worker.start()
            worker.submit("sha256:abc", 2.0)
            worker.submit_failure(3.0)
            assert worker.idle(60)
            worker.stop()
            return metrics.record_failures

        assert await asyncio.to_thread(agent_records, "a") == 0
        caplog.clear()
        assert await asyncio.to_thread(agent_records, "b") == 1
        assert "may patch only that pod" in caplog.text
        await patch(bound, "a", stamp)  # allowed
        annotations = (await kube.get(PODS.path(namespace, "a")))["metadata"]["annotations"]
        assert annotations == {"team": "a", LOADED_HASH: "sha256:abc", LOADED_AT: "1.000",
                               RELOAD_FAILED_AT: "3.000"}  # fmt: skip
        await patch(bound, "a", {"annotations": {RELOAD_FAILED_AT: None}})  # may clear its own

        # Not another pod, though RBAC grants patch on every pod of the namespace.
        why = await refusal(patch(bound, "b", stamp))
        assert why is not None and policy in why and "may patch only that pod" in why, why
        # Nothing but its annotations on its own pod.
        owner = {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": pod_b["metadata"]["uid"]}
        for change in (
            {"labels": {"app": "elsewhere"}},
            {"annotations": {"team": "b"}},
            {"annotations": {"team": None}},
            {"annotations": {"other": "x", LOADED_AT: "4.000"}},
            {"ownerReferences": [owner]},
            {"finalizers": ["example.com/keep"]},
        ):
            why = await refusal(patch(bound, "a", change))
            assert why is not None and policy in why, change
        # A token bound to no pod patches no pod at all, and is told why.
        for pod in ("a", "b"):
            why = await refusal(patch(unbound, pod, stamp))
            assert why is not None and policy in why and "bound to no pod" in why, why
        after = (await kube.get(PODS.path(namespace, "a")))["metadata"]
        assert after["annotations"] == {"team": "a", LOADED_HASH: "sha256:abc",
                                        LOADED_AT: "1.000"}  # fmt: skip
        assert after["labels"] == {"app": "web"} and "finalizers" not in after
        assert LOADED_AT not in (await kube.get(PODS.path(namespace, "b")))["metadata"].get(
            "annotations", {})  # fmt: skip
    finally:
        for client in clients:
            await client.aclose()
        for path in cluster_paths:
            try:
                await kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:  # not created: apply failed before it
                    raise
