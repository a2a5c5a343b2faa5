"""`kube-nudge agent` against the real API server: after a kubelet-style config swap it
reloads the app (an HTTP call) and records the loaded hash on its own Pod, as the Pod's
ServiceAccount with only `get`/`patch` on pods, under field manager kube-nudge-agent."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.agent.watch import loaded_hash
from kube_nudge.agentwire import key_id
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import PODS, SERVICEACCOUNTS, Resource
from kube_nudge_dev import manifests
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import until
from tests.agent_support import KEY, Recorder, kubelet_write, serve, stop
from tests.integration.controller_support import REPLICA_LOGS

pytestmark = pytest.mark.cluster
RBAC = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC, "v1", "roles", "Role")
ROLEBINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding")


async def pod_identity(kube: KubeClient, namespace: str, tmp_path: Path) -> tuple[Path, Path]:
    """A ServiceAccount allowed to get and patch pods, and its token and the cluster's CA
    as files, as a pod would have them mounted."""
    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": "app"}})
    await kube.create(ROLES.path(namespace), {"metadata": {"name": "agent"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}]})  # fmt: skip
    await kube.create(ROLEBINDINGS.path(namespace), {
        "metadata": {"name": "agent"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "agent"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": namespace}],
    })  # fmt: skip
    token = await kube.create(
        SERVICEACCOUNTS.path(namespace, "app", "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    token_file = tmp_path / "token"
    token_file.write_text(token["status"]["token"])
    return token_file, tmp_path / "ca.crt"


async def test_the_agent_records_what_it_loaded_on_its_own_pod(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    token_file, ca_file = await pod_identity(kube, namespace, tmp_path)
    config: dict[str, Any] = json.loads(cluster.kubeconfig.read_text())
    ca_file.write_bytes(base64.b64decode(config["clusters"][0]["cluster"][
        "certificate-authority-data"]))  # fmt: skip
    pod = {"metadata": {"name": "web-0"}, "spec": manifests.pod_spec()}
    await kube.create(PODS.path(namespace), pod)
    watched = tmp_path / "config"
    kubelet_write(watched, {"app.conf": b"level=info\n"})
    reloads = Recorder()
    app = serve(reloads)
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    log = tmp_path / "agent.log"
    REPLICA_LOGS.append(log)
    env = {**os.environ, "POD_NAME": "web-0", "POD_NAMESPACE": namespace}
    with log.open("ab") as sink:
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kube_nudge.agent", f"--watch={watched}",
            f"--http-url={app}/-/reload", f"--api-server={cluster.server}",
            f"--token-file={token_file}", f"--ca-file={ca_file}", "--listen=off",
            f"--hash-key-file={key_file}",
            "--debounce=0", "--poll-interval=100ms", "--log-format=json",
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
    try:

        async def watching() -> bool:  # it took what is there as what the app runs
            return "watching" in log.read_text()

        await until(watching, 30)
        kubelet_write(watched, {"app.conf": b"level=debug\n"})
        expected = loaded_hash((str(watched),), KEY, key_id(KEY))

        async def recorded() -> bool:
            annotations = (await kube.get(PODS.path(namespace, "web-0")))["metadata"].get(
                "annotations") or {}  # fmt: skip
            return annotations.get("kube-nudge.io/loaded-hash") == expected

        await until(recorded, 30)
        assert reloads.count("POST") == 1
        found = await kube.get(PODS.path(namespace, "web-0"))
        managers = {f["manager"] for f in found["metadata"]["managedFields"]}
        assert "kube-nudge-agent" in managers
        assert "kube-nudge.io/loaded-at" in found["metadata"]["annotations"]
    finally:
        agent.kill()
        await agent.wait()
        stop(app)
