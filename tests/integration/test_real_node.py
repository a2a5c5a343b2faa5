"""The real node: real containers with real config volumes, env, probes, the `kubernetes`
Service, and a firewall that keeps every Service and pod address on the machine."""

from __future__ import annotations

import asyncio
import errno
import subprocess  # nosec B404 # iptables, to read the guard's counters
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS, SECRETS, Resource
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.node import GATEWAY, NODE_NAME, RealNode
from kube_nudge_dev.nodepods import kubectl, on_real_node, python_container, read_in_container
from kube_nudge_dev.waiting import wait_for_object, wait_for_objects

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]
SERVICES = Resource("", "v1", "services", "Service")


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


#: Reads the API server's version through the `kubernetes` Service with the pod's own
#: projected token and CA (what every in-cluster client does), then prints its config.
_IN_CLUSTER = """
import json, os, ssl, time, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
url = "https://%s:%s/version" % (os.environ["KUBERNETES_SERVICE_HOST"],
                                 os.environ["KUBERNETES_SERVICE_PORT"])
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + open(sa + "/token").read()})
print("api", json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["gitVersion"])
print("env", os.environ["LEVEL"], "uid", os.getuid(), flush=True)
while True:
    time.sleep(3600)
"""


async def test_a_pod_runs_with_real_volumes_env_probes_and_the_kubernetes_service(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(SECRETS.path(namespace), manifests.secret("creds", {"token": "s3"}))
    container = python_container(
        controller_image.ref, _IN_CLUSTER,
        env=[{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}}],
        volumeMounts=[{"name": "config", "mountPath": "/config"},
                      {"name": "creds", "mountPath": "/creds"}],
        # Real probes, run by the kubelet: exec and HTTP-less TCP would both do; exec reads
        # the mounted file, so the pod is Ready only once its volume is there.
        readinessProbe={"exec": {"command": ["cat", "/config/LEVEL"]}, "periodSeconds": 1},
        livenessProbe={"exec": {"command": ["cat", "/creds/token"]}, "periodSeconds": 5},
    )  # fmt: skip
    spec = on_real_node(manifests.pod_spec(
        containers=[container],
        volumes=[{"name": "config", "configMap": {"name": "app"}},
                 {"name": "creds", "secret": {"secretName": "creds"}}],
    ))  # fmt: skip
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"}, "spec": spec}
    await kube.create(PODS.path(namespace), pod)

    ready = await wait_for_object(kube, PODS.path(namespace), "app", _ready, timeout=120)
    assert ready["spec"]["nodeName"] == NODE_NAME
    assert ready["status"]["podIP"].startswith("10.245.0.")
    assert ready["status"]["hostIP"] == GATEWAY

    async def logged(line: str) -> None:
        while line not in kubectl(cluster, "logs", "-n", namespace, "app"):
            await asyncio.sleep(0.2)  # polling the container's log until the line is there

    await asyncio.wait_for(logged(f"api {cluster.kube_version}"), timeout=60)
    await asyncio.wait_for(logged("env info uid 65532"), timeout=60)
    assert read_in_container(cluster, namespace, "app", "/config/LEVEL") == "info"
    assert read_in_container(cluster, namespace, "app", "/creds/token") == "s3"

    # A change reaches the volume, never the env var; a pod update makes the kubelet
    # refresh the volume at once instead of at its next sync (up to a minute or more).
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
    await kube.merge_patch(PODS.path(namespace, "app"),
                     {"metadata": {"annotations": {"test/nudge": "1"}}})  # fmt: skip

    async def refreshed() -> None:
        while read_in_container(cluster, namespace, "app", "/config/LEVEL") != "debug":
            await asyncio.sleep(0.2)

    await asyncio.wait_for(refreshed(), timeout=60)
    assert kubectl(cluster, "exec", "-n", namespace, "app", "--", "printenv", "LEVEL") == "info\n"


def _chains_not_guarded_first() -> list[str]:
    """The rules of OUTPUT and FORWARD if either does not jump to the guard first."""
    for chain in ("OUTPUT", "FORWARD"):
        rules = subprocess.run(  # nosec B603 B607 # iptables from PATH, fixed argv
            ["iptables", "-S", chain], capture_output=True, text=True, check=True, timeout=10
        ).stdout.splitlines()  # fmt: skip
        if rules[1:2] != [f"-A {chain} -j KUBE-NUDGE-DEV-GUARD"]:
            return rules
    return []


def _kube_proxy_translates(cluster_ip: str) -> bool:
    """Whether kube-proxy sends ``cluster_ip`` to endpoints (a KUBE-SVC chain)."""
    rules = subprocess.run(  # nosec B603 B607 # iptables from PATH, fixed argv
        ["iptables", "-t", "nat", "-S", "KUBE-SERVICES"],
        capture_output=True, text=True, check=True, timeout=10,
    ).stdout  # fmt: skip
    return any(f"-d {cluster_ip}/32" in r and "-j KUBE-SVC-" in r for r in rules.splitlines())


def _guard_rejections() -> int:
    """Packets the node's guard chain has rejected so far."""
    out = subprocess.run(  # nosec B603 B607 # iptables from PATH, fixed argv
        ["iptables", "-L", "KUBE-NUDGE-DEV-GUARD", "-v", "-x", "-n"],
        capture_output=True, text=True, check=True, timeout=10,
    ).stdout  # fmt: skip
    return sum(int(line.split()[0]) for line in out.splitlines() if "REJECT" in line)


async def test_nothing_addressed_to_kwok_pods_leaves_the_machine(
    kube: KubeClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
) -> None:
    # A Service whose endpoints are kwok pods (fake addresses in 10.244/16): kube-proxy
    # translates its ClusterIP to them, and nothing on this machine owns them.
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("fake", replicas=1))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fake"},
               "spec": {"selector": {"app": "fake"}, "ports": [{"port": 80}]}}  # fmt: skip
    created = await kube.create(SERVICES.path(namespace), service)
    await wait_for_objects(
        kube, "/apis/discovery.k8s.io/v1/namespaces/" + namespace + "/endpointslices",
        lambda slices: any(s.get("endpoints") for s in slices.values()), timeout=60,
    )  # fmt: skip
    cluster_ip = created["spec"]["clusterIP"]

    async def translated() -> None:  # kube-proxy has synced the Service's endpoints
        while not await asyncio.to_thread(_kube_proxy_translates, cluster_ip):
            await asyncio.sleep(0.1)

    await asyncio.wait_for(translated(), timeout=60)
    # The guard must be in force before any packet is sent: never risk one leaving.
    assert _chains_not_guarded_first() == []
    before = _guard_rejections()
    # To the fake endpoints through their Service, and to a Service address nobody has.
    probe = (
        "import socket\n"
        f"for target in [({cluster_ip!r}, 80), ('10.0.0.250', 80)]:\n"
        "    s = socket.socket(); s.settimeout(5)\n"
        "    try:\n"
        "        s.connect(target); print('connected', flush=True)\n"
        "    except OSError as e:\n"
        "        print('failed', type(e).__name__, e.errno, flush=True)\n"
    )
    spec = on_real_node(
        manifests.pod_spec(
            containers=[python_container(controller_image.ref, probe)], restartPolicy="Never"
        )
    )
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": spec}
    await kube.create(PODS.path(namespace), pod)
    await wait_for_object(
        kube, PODS.path(namespace), "probe",
        lambda p: p.get("status", {}).get("phase") == "Succeeded", timeout=120,
    )  # fmt: skip
    lines = kubectl(cluster, "logs", "-n", namespace, "probe").splitlines()
    # Failed at once: no route to the fake pods, rejected by the guard for the unused
    # Service address (a timeout would mean a packet was sent out to wait for).
    assert lines == [
        f"failed OSError {errno.EHOSTUNREACH}",
        f"failed ConnectionRefusedError {errno.ECONNREFUSED}",
    ]
    assert _guard_rejections() > before
