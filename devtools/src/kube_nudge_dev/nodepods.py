"""Pods on the real node: specs that land there (an app of the controller image, the reload
agent beside it as the chart's NOTES snippet adds it, the agent's grant), and reading back
what a container sees and prints. Shared by the real-node tests and the bench."""

from __future__ import annotations

import subprocess  # nosec B404 # the real kubectl the project builds, against the session cluster
from pathlib import Path
from typing import Any

from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.node import NODE_LABEL, TAINT_KEY

JSON = dict[str, Any]


def on_real_node(spec: JSON) -> JSON:
    """``spec`` (a pod spec) pinned to the real node: its selector and its taint's toleration."""
    spec = dict(spec)
    spec["nodeSelector"] = {NODE_LABEL: "real"}
    spec["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    return spec


def python_container(image: str, script: str, *, name: str = "app", **extra: Any) -> JSON:
    """A container of the controller image (it has Python) running ``script``."""
    container: JSON = {
        "name": name,
        "image": image,
        "imagePullPolicy": "Never",  # loaded into the node's runtime: no registry involved
        "command": ["python", "-c", script],
    }
    container.update(extra)
    return container


def kubectl(cluster: LocalCluster, *args: str, timeout: float = 60) -> str:
    """Run the project's kubectl against the session cluster; its stdout (raises on failure)."""
    binary = find_binary("kubectl")
    if binary is None:
        raise RuntimeError("kubectl is not built (make control-plane)")
    result = subprocess.run(  # nosec B603 # the pinned kubectl, argv from the test, no shell
        [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def read_in_container(cluster: LocalCluster, namespace: str, pod: str, path: str) -> str:
    """A file's content as the running container sees it (``kubectl exec``)."""
    return kubectl(cluster, "exec", "-n", namespace, pod, "--", "cat", path)


#: Where the chart's NOTES snippet mounts Secret ``kube-nudge-agent-key`` in the agent.
AGENT_KEY_MOUNT = "/var/run/secrets/kube-nudge.io/agent-key"
#: The uid of the controller image (``USER 65532``): the app's and the agent's.
IMAGE_UID = 65532


def agent_sidecar(image: str, *args: str, config_volume: str = "config") -> JSON:
    """``kube-nudge agent ARGS`` as the chart's NOTES snippet adds it: the app's config
    volume at /etc/app, the namespace's agent key, its pod from the downward API, its
    /healthz probed by the kubelet, the app's uid, nothing else."""
    return {
        "name": "kube-nudge-agent",
        "image": image,
        "imagePullPolicy": "Never",  # loaded into the node's runtime: no registry involved
        "args": ["agent", *args, "--listen", ":9090"],
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        ],
        "volumeMounts": [
            {"name": config_volume, "mountPath": "/etc/app", "readOnly": True},
            {"name": "kube-nudge-agent-key", "mountPath": AGENT_KEY_MOUNT, "readOnly": True},
        ],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9090}},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"memory": "64Mi"}},
        "securityContext": {
            "runAsNonRoot": True, "runAsUser": IMAGE_UID, "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
        },
    }  # fmt: skip


#: The agent key volume of the NOTES snippet (optional: pods start before the Secret exists).
AGENT_KEY_VOLUME: JSON = {
    "name": "kube-nudge-agent-key",
    "secret": {"secretName": "kube-nudge-agent-key", "optional": True},
}


def agent_grant_documents(repo: Path, namespace: str, account: str) -> list[JSON]:
    """What the chart of the checkout ``repo`` renders for ``agent.rbac.serviceAccounts:
    [{namespace, name: account}]``: its Role, RoleBinding and own-pod-only admission policy
    with its binding (the release is named after the namespace, so cluster-scoped names are
    unique)."""
    import yaml

    from kube_nudge_dev import chart

    sets = (f"agent.rbac.serviceAccounts[0].namespace={namespace}",
            f"agent.rbac.serviceAccounts[0].name={account}")  # fmt: skip
    rendered = chart.template(repo, release=namespace, namespace=namespace, sets=sets)
    prefix = f"{namespace}-kube-nudge-agent"
    return [d for d in yaml.safe_load_all(rendered)
            if d and d["metadata"]["name"].startswith(prefix)]  # fmt: skip


def container_log(cluster: LocalCluster, namespace: str, pod: str, container: str) -> list[str]:
    """The lines ``container`` of ``pod`` printed so far (``kubectl logs``)."""
    return kubectl(cluster, "logs", "-n", namespace, pod, "-c", container).splitlines()


def timestamped_log(
    cluster: LocalCluster, namespace: str, pod: str, container: str
) -> list[tuple[float, str]]:
    """Each line of ``container``'s log with the Unix time the runtime read it at."""
    import datetime

    out = kubectl(cluster, "logs", "--timestamps", "-n", namespace, pod, "-c", container)
    lines = []
    for line in out.splitlines():
        stamp, _, text = line.partition(" ")
        base, _, fraction = stamp.rstrip("Z").partition(".")
        at = datetime.datetime.fromisoformat(base).replace(tzinfo=datetime.UTC).timestamp()
        lines.append((at + float(f"0.{fraction or 0}"), text))
    return lines
