"""The snapshot strategy's mutating admission webhook, served in-process for a test and
registered with the session's API server as the chart registers it (fail open)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator

from kube_nudge.kube.client import MERGE_PATCH, KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS, Resource
from kube_nudge.runtime.http import HttpServer, TlsFiles
from kube_nudge.strategies.snapshot import WEBHOOK_PATH, SnapshotWebhook
from kube_nudge_dev.cluster import LocalCluster
from tests.integration.controller_support import Running

WEBHOOKS = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration", namespaced=False,
)  # fmt: skip


@contextlib.asynccontextmanager
async def serving_snapshot_webhook(
    kube: KubeClient, cluster: LocalCluster, namespace: str, running: Running, probe: str
) -> AsyncIterator[asyncio.Task[None]]:
    """Serve the webhook of ``running``'s controller for Deployments in ``namespace`` until
    the block ends; it is registered once the API server reaches it (a dry-run update of
    Deployment ``probe`` is reviewed). Yields the serving task: cancelling it takes the
    webhook down while it stays registered."""
    pki = cluster.pki
    server = HttpServer(
        "127.0.0.1", 0, tls=TlsFiles(pki.serving_cert, pki.serving_key), name="webhook"
    )
    SnapshotWebhook(running.controller, hmac_key=lambda: running.hmac_key).register(server)
    serving = asyncio.create_task(server.run())
    await asyncio.wait_for(server.started.wait(), 10)
    name = f"kube-nudge-{namespace}"
    await kube.create(WEBHOOKS.path(), {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "snapshot.kube-nudge.io",
            "clientConfig": {
                "url": f"https://127.0.0.1:{server.port}{WEBHOOK_PATH}",
                "caBundle": base64.b64encode(pki.ca_cert.read_bytes()).decode(),
            },
            "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                       "resources": ["deployments"], "operations": ["CREATE", "UPDATE"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 5,
            "admissionReviewVersions": ["v1"],
        }],
    })  # fmt: skip
    try:
        await _reached(kube, namespace, running, probe)
        yield serving
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await kube.request("DELETE", WEBHOOKS.path(None, name))


async def _reached(kube: KubeClient, namespace: str, running: Running, probe: str) -> None:
    """The API server picks new webhook configurations up within a moment: dry-run
    updates of ``probe`` until one reaches the webhook."""
    reviewed = running.metrics.admission.labels(result="unchanged")
    async with asyncio.timeout(30):
        while reviewed._value.get() == 0:
            await kube.request(
                "PATCH", DEPLOYMENTS.path(namespace, probe), params={"dryRun": "All"},
                body={"metadata": {"labels": {"probe": "1"}}}, content_type=MERGE_PATCH,
            )  # fmt: skip
