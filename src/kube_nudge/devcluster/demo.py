"""``make demo``: a local cluster, a Deployment rolled out, a summary, then a clean stop."""

from __future__ import annotations

import asyncio
import sys
import time

from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS, NAMESPACES, REPLICASETS
from kube_nudge.kube.waiting import wait_for_object, wait_for_objects

NAMESPACE = "demo"


def _say(text: str) -> None:
    print(f"[demo] {text}", flush=True)


def _available(replicas: int):  # type: ignore[no-untyped-def]
    def check(obj: dict) -> bool:  # type: ignore[type-arg]
        status = obj.get("status", {})
        return bool(
            status.get("observedGeneration") == obj["metadata"]["generation"]
            and status.get("updatedReplicas") == replicas
            and status.get("availableReplicas") == replicas
            and status.get("replicas") == replicas
        )

    return check


async def _run(cluster: LocalCluster) -> None:
    kube = KubeClient.from_config(cluster.kubeconfig)
    try:
        await kube.create(NAMESPACES.path(), {"metadata": {"name": NAMESPACE}})
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]},
                },
            },
        }
        started = time.monotonic()
        await kube.create(DEPLOYMENTS.path(NAMESPACE), deployment)
        done = await wait_for_object(
            kube, DEPLOYMENTS.path(NAMESPACE), "web", _available(2), timeout=120
        )
        _say(
            f"deployment/web available with {done['status']['availableReplicas']} ready pods "
            f"in {time.monotonic() - started:.1f} s"
        )
        replicasets = await wait_for_objects(
            kube, REPLICASETS.path(NAMESPACE), lambda found: len(found) >= 1, timeout=30
        )
        _say(f"replicasets: {', '.join(sorted(replicasets))}")
    finally:
        await kube.aclose()


def main() -> int:
    """Run the demo; exit non-zero if any step fails."""
    _say("starting the local control plane (the first run builds it: several minutes)")
    with LocalCluster() as cluster:
        _say(f"cluster ready in {cluster.startup_seconds:.1f} s at {cluster.server}")
        asyncio.run(_run(cluster))
    _say("cluster stopped; done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
