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

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import ROLLOUTS
from kube_nudge_dev.build import argo_rollouts_binary, argo_rollouts_crds
from kube_nudge_dev.cluster import LocalCluster, free_port
from tests.integration.controller_support import apply_crd


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


async def promote(kube: KubeClient, namespace: str, name: str) -> None:
    """``kubectl argo rollouts promote NAME`` at a pause step: clear the pause conditions."""
    await _status_patch(kube, namespace, name, {"pauseConditions": None})


async def abort(kube: KubeClient, namespace: str, name: str) -> None:
    """``kubectl argo rollouts abort NAME``: what a failed analysis does too."""
    await _status_patch(kube, namespace, name, {"abort": True})


async def _status_patch(kube: KubeClient, namespace: str, name: str, status: Any) -> None:
    await kube.merge_patch(ROLLOUTS.path(namespace, name) + "/status", {"status": status})
