"""Argo Rollouts in the session cluster: its own CRDs, its controller, and the patches its
kubectl plugin makes (``promote``, ``abort``).

The controller and its CRDs come from the pinned Argo Rollouts module, built by
``kube-nudge-dev build rollouts-controller`` (``make rollouts-controller``); nothing of Argo's
is kept in this repository.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from kube_nudge.app.run import resolve_workloads
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, ROLLOUTS
from kube_nudge.kube.workloads import ARGO_ROLLOUTS, BUILTIN_KINDS, WorkloadKind, WorkloadSpec
from kube_nudge.model import BASELINE_HASH
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.build import argo_rollouts_binary, argo_rollouts_crds
from kube_nudge_dev.chartapply import apply_crd
from kube_nudge_dev.cluster import LocalCluster, free_port
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import (
    Running,
    expected_hash,
    template_hash,
)

TIMEOUT = 60


async def install_argo_rollouts_crds(kube: KubeClient) -> None:
    """Argo Rollouts' own CRDs (Rollout with its full schema and its status and scale
    subresources; the analysis and experiment kinds its controller also watches)."""
    for path in argo_rollouts_crds():
        await apply_crd(kube, yaml.safe_load(path.read_text()))


@contextlib.asynccontextmanager
async def argo_rollouts_controller(
    cluster: LocalCluster, namespace: str, log: Path
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Run the real Argo Rollouts controller on ``namespace`` only (``--namespaced``: the other
    tests' Rollouts, whose status they write themselves, stay theirs); stop it on exit."""
    with log.open("ab") as sink:
        proc = await asyncio.create_subprocess_exec(
            str(argo_rollouts_binary()), f"--kubeconfig={cluster.kubeconfig}",
            "--namespaced", f"--namespace={namespace}", "--leader-elect=false",
            f"--metricsPort={free_port()}", f"--healthzPort={free_port()}",
            stdout=sink, stderr=sink,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()


async def promote(kube: AdminClient, namespace: str, name: str) -> None:
    """``kubectl argo rollouts promote NAME`` at a pause step: clear the pause conditions."""
    await _status_patch(kube, namespace, name, {"pauseConditions": None})


async def abort(kube: AdminClient, namespace: str, name: str) -> None:
    """``kubectl argo rollouts abort NAME``: what a failed analysis does too."""
    await _status_patch(kube, namespace, name, {"abort": True})


async def _status_patch(kube: AdminClient, namespace: str, name: str, status: Any) -> None:
    await kube.merge_patch(ROLLOUTS.path(namespace, name) + "/status", {"status": status})


async def adopted(kube: KubeClient, path: str, name: str) -> None:
    """Wait until kube-nudge adopted workload ``name`` (its baseline recorded)."""
    await wait_for_object(
        kube, path, name,
        lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=TIMEOUT,
    )  # fmt: skip


async def rollout_kinds(kube: KubeClient) -> tuple[WorkloadKind, ...]:
    """What ``run --argo-rollouts`` watches once the CRD is served."""
    kinds, pending = await resolve_workloads(
        kube, (WorkloadSpec.of(ARGO_ROLLOUTS, "--argo-rollouts"),)
    )
    assert pending == ()
    assert kinds == (*BUILTIN_KINDS, ARGO_ROLLOUTS)
    return kinds


def rollout(name: str, annotations: dict[str, str], **spec: Any) -> dict[str, Any]:
    """A canary Rollout (a pause step: it waits for promotion) reading LEVEL of ``app``."""
    return {
        "apiVersion": ROLLOUTS.api_version, "kind": "Rollout",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}},
            **spec,
        },
    }  # fmt: skip


async def change_and_roll(
    kube: AdminClient, running: Running, kind: WorkloadKind, namespace: str, name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Change LEVEL of ConfigMap ``app``; ``name`` as it was before and once its template
    carries the hash of the new config."""
    before = await kube.get(kind.resource.path(namespace, name))
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": "debug"}})
    want = await expected_hash(kube, kind, before, running.hmac_key)
    rolled = await wait_for_object(
        kube, kind.resource.path(namespace), name,
        lambda o: template_hash(o, kind) == want, timeout=TIMEOUT,
    )  # fmt: skip
    return before, rolled
