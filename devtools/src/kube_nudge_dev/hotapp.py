"""The hot-reload app on the real node, shared by its end-to-end tests and the bench's
agent-node scenario: a small Python app, its Deployment with the agent sidecar, and the
wait until the API server enforces the agent's grant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kube_nudge.agentwire import LOADED_AT
from kube_nudge.kube.client import MERGE_PATCH, ApiError, KubeClient
from kube_nudge.kube.resources import PODS, SERVICEACCOUNTS
from kube_nudge_dev import manifests
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.nodepods import AGENT_KEY_VOLUME, agent_sidecar, on_real_node, python_container
from kube_nudge_dev.waiting import until

#: The ServiceAccount the app's pods run as (the agent's grant names it).
ACCOUNT = "web"
#: The annotations that opt a workload into strategy `hot`.
HOT = {**manifests.ENABLED, "kube-nudge.io/strategy": "hot"}

#: A small app: loads /etc/app/app.conf at start, on SIGHUP and on a POST to
#: 127.0.0.1:$RELOAD_PORT (when set), printing `loaded <content>`; it is Ready (the file
#: /tmp/ready) only while what it loaded is not "broken". Its process is named `webapp`
#: (PR_SET_NAME), the agent's `--process`.
APP = """
import ctypes, os, signal, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
ctypes.CDLL(None).prctl(15, b"webapp", 0, 0, 0)
lock = threading.Lock()
def load(*_):
    with lock:
        with open("/etc/app/app.conf") as f:
            content = f.read()
        print("loaded", content, flush=True)
        if content == "broken":
            if os.path.exists("/tmp/ready"):
                os.remove("/tmp/ready")
        else:
            open("/tmp/ready", "w").close()
class Reload(BaseHTTPRequestHandler):
    def do_POST(self):
        load()
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
signal.signal(signal.SIGHUP, load)
load()
if os.environ.get("RELOAD_PORT"):
    server = HTTPServer(("127.0.0.1", int(os.environ["RELOAD_PORT"])), Reload)
    threading.Thread(target=server.serve_forever, daemon=True).start()
while True:
    time.sleep(3600)
"""


def app_deployment(
    name: str, image: str, *, agent: list[str] | None, annotations: dict[str, str],
    env: dict[str, str] | None = None, ready_probe: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """A Deployment of one APP pod on the real node, ConfigMap `app` at /etc/app, and the
    agent sidecar with ``agent`` flags (None: no agent)."""
    extra: dict[str, Any] = {
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    if ready_probe:
        ready = "/tmp/ready"  # noqa: S108  # nosec B108 # a path in the app's container, not here
        extra["readinessProbe"] = {"exec": {"command": ["cat", ready]}, "periodSeconds": 1}
    containers = [python_container(image, APP, **extra)]
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": "app"}}]
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 1}
    if agent is not None:
        containers.append(agent_sidecar(image, *agent))
        volumes.append(AGENT_KEY_VOLUME)
        spec.update(serviceAccountName=ACCOUNT, shareProcessNamespace=True)
    pod = on_real_node(manifests.pod_spec(containers=containers, volumes=volumes, **spec))
    return manifests.deployment(name, spec=pod, annotations=annotations)


async def grant_in_force(
    kube: KubeClient, cluster: LocalCluster, namespace: str, pod: dict[str, Any], tmp: Path
) -> None:
    """Wait until the API server enforces the grant for a token bound to ``pod`` (RBAC and
    the policy load asynchronously, and the agent does not retry a 403): the agent's
    annotations pass, a label is refused by the policy (dry runs, nothing written)."""
    meta = pod["metadata"]
    review = await kube.create(SERVICEACCOUNTS.path(namespace, ACCOUNT, "token"), {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": meta["name"],
                                    "uid": meta["uid"]}},
    })  # fmt: skip
    config = json.loads(cluster.kubeconfig.read_text())
    config["users"] = [{"name": "sa", "user": {"token": review["status"]["token"]}}]
    config["contexts"][0]["context"]["user"] = "sa"
    kubeconfig = tmp / f"{meta['name']}.kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    client = KubeClient.from_config(kubeconfig)

    async def dry_run(change: dict[str, Any]) -> str | None:
        try:
            await client.request(
                "PATCH", PODS.path(namespace, meta["name"]), body={"metadata": change},
                params={"dryRun": "All"}, content_type=MERGE_PATCH,
            )  # fmt: skip
        except ApiError as exc:
            if exc.status != 403:
                raise
            return exc.message
        return None

    async def enforced() -> bool:
        if await dry_run({"annotations": {LOADED_AT: "1.000"}}) is not None:
            return False
        why = await dry_run({"labels": {"app": "elsewhere"}})
        return why is not None and "agent-own-pod-only" in why

    try:
        await until(enforced, 60)
    finally:
        await client.aclose()
