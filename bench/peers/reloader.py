"""Stakater Reloader, run at its defaults.

Out of cluster it reads the kubeconfig from ``$KUBECONFIG`` (it has no flag for it) and
watches every namespace. Its default reload strategy, ``env-vars``, rolls a workload by
setting a ``STAKATER_<NAME>_CONFIGMAP`` (or ``_SECRET``) variable holding a SHA-1 of the data
on the container that uses the source; that variable is its marker here. It takes nothing
in at start (no write until a source changes) and serves ``/metrics`` on ``:9090`` (fixed)
before its informers have synced, so "ready" means: the informers have delivered an ``add``
event for every ConfigMap and Secret in the cluster (``reloader_events_received_total``).
Its client has client-go's default rate limit (5 requests/s, burst 10) and no flag to
raise it.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx2 as httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.peers.peer import PeerTool
from bench.tools import ToolError
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, SECRETS

ENV_PREFIX = "STAKATER_"
PORT = 9090
#: Namespace variables that would narrow what it watches or make it publish a ConfigMap.
_SCOPE_ENV = ("KUBERNETES_NAMESPACE", "RELOADER_NAMESPACE", "RELOADER_DEPLOYMENT_NAME")


class Reloader(PeerTool):
    """``reloader`` with ``KUBECONFIG`` set and no flags."""

    name = "reloader"
    fixed_port = PORT
    adopts = False
    marker_text = "container env `STAKATER_<NAME>_CONFIGMAP`/`_SECRET` (strategy env-vars)"
    _kube: KubeClient | None = None

    def argv(self, kubeconfig: Path) -> list[str]:
        """No flags: Reloader's defaults."""
        return [str(self.binary.path), *self.settings.extra_args]

    def env(self, kubeconfig: Path) -> dict[str, str]:
        """``KUBECONFIG`` points at the cluster; nothing scopes it to one namespace."""
        env = {k: v for k, v in os.environ.items() if k not in _SCOPE_ENV}
        env["KUBECONFIG"] = str(kubeconfig)
        return env

    async def prepare(self, kube: KubeClient) -> None:
        """Keep the admin client: readiness compares its counts with Reloader's metrics."""
        self._kube = kube

    async def wait_ready(self, timeout: float) -> float:
        """Until ``/metrics`` shows an ``add`` event for every ConfigMap and Secret."""
        if self._kube is None:
            raise ToolError("reloader: prepare() was not called")
        kube = self._kube
        expected = {
            "configmaps": await count(kube, CONFIGMAPS.path()),
            "secrets": await count(kube, SECRETS.path()),
        }
        url = f"http://127.0.0.1:{PORT}/metrics"
        async with httpx.AsyncClient(timeout=2.0) as http:

            async def synced() -> bool:
                try:
                    response = await http.get(url)
                except httpx.TransportError:
                    return False
                seen = adds_received(response.text)
                return all(seen.get(kind, 0) >= n for kind, n in expected.items())

            return await self.poll(synced, timeout)

    def opt_in(self) -> dict[str, str]:
        """``reloader.stakater.com/auto: "true"``."""
        return {"reloader.stakater.com/auto": "true"}

    def marker(self, workload: JSON) -> str | None:
        """The ``STAKATER_*`` variables on the template's containers (sorted, joined)."""
        spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
        pairs = sorted(
            f"{var.get('name')}={var.get('value', '')}"
            for container in (spec.get("containers") or [])
            for var in (container.get("env") or [])
            if str(var.get("name", "")).startswith(ENV_PREFIX)
        )
        return ";".join(pairs) or None

    def adopted(self, workload: JSON) -> bool:
        """Always: Reloader records nothing on a workload until a source changes."""
        return True


async def count(kube: KubeClient, path: str) -> int:
    """How many objects a collection holds (one small page and the remaining count)."""
    page = await kube.get(path, limit=1)
    metadata = page.get("metadata") or {}
    return len(page.get("items") or []) + int(metadata.get("remainingItemCount") or 0)


def adds_received(text: str) -> dict[str, float]:
    """``reloader_events_received_total{event_type="add"}`` by resource type."""
    lines = [
        line for line in text.splitlines() if line.startswith("reloader_events_received_total{")
    ]
    adds: dict[str, float] = {}
    for family in text_string_to_metric_families("\n".join(lines)):
        for sample in family.samples:
            if sample.labels.get("event_type") == "add":
                adds[sample.labels.get("resource_type", "")] = sample.value
    return adds
