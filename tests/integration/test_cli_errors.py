"""The commands against a real API server, as a user with too few rights or a typo runs
them: one line naming the verb and the resource (exit code 5 or 1), and a `wait` with
nothing to wait for ends at once (exit code 4), not at --timeout."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.reporting.hmackey import load_or_create_key
from kube_nudge_dev import manifests
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from tests.integration.accounts import account_kubeconfig
from tests.integration.controller_support import HMAC_SECRET

pytestmark = pytest.mark.cluster


async def cli(kubeconfig: Path, namespace: str, *args: str) -> tuple[int, str]:
    """Run ``kube-nudge ARGS`` in ``namespace``: exit code, stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_nudge", *args, f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    text = err.decode()
    assert "Traceback" not in text, text
    return proc.returncode, text


async def test_forbidden_names_the_verb_and_the_resource(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment("web", annotations=ENABLED))
    config = await account_kubeconfig(kube, cluster, namespace, "ci", tmp_path)
    key = f"--hmac-key-file={__file__}"
    user = f'User "system:serviceaccount:{namespace}:ci" cannot'
    server = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    for args, code, says in [
        (("status", key), 5, f"list deployments.apps in namespace '{namespace}'"),
        (("wait", "deployment/web", key), 5, f"list deployments.apps in namespace '{namespace}'"),
        (
            ("release", "deployment/web"),
            1,
            f"patch deployments.apps 'web' in namespace '{namespace}'",
        ),
        (
            ("approve", "deployment/web"),
            1,
            f"patch deployments.apps 'web' in namespace '{namespace}'",
        ),
    ]:
        exit_code, err = await cli(config, namespace, *args)
        assert exit_code == code, (args, err)
        [line] = err.splitlines()
        assert f"forbidden: may not {says} on {server}: " in line and user in line, line


async def test_wait_with_nothing_to_wait_for_ends_at_once(
    kube: KubeClient, cluster: LocalCluster, namespace: str
) -> None:
    await load_or_create_key(kube, namespace, HMAC_SECRET)  # as an installed kube-nudge has
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(
        DEPLOYMENTS.path(namespace),
        manifests.deployment("legacy", spec=manifests.env_consumer("LEVEL"), annotations={}),
    )
    state = f"--state-namespace={namespace}"
    for targets, says in [
        (("deployment/wbe",), f"{namespace}/Deployment/wbe: not found"),
        (("deployment/legacy",), f"{namespace}/Deployment/legacy: not opted in"),
        (("configmap/ap",), f"{namespace}/configmap/ap: not found"),
        (("configmap/app",), f"{namespace}/configmap/app: no opted-in workload consumes it"),
    ]:
        # With --timeout=10m, a wait that waited would outlast cli's own 120 s limit.
        code, err = await cli(
            cluster.kubeconfig, namespace, "wait", *targets, "--timeout=10m", state
        )
        assert code == 4, err
        assert err.startswith("kube-nudge: nothing to wait for: ") and says in err, err
        assert err.count("\n") == 1
