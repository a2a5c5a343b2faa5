"""Wave (the Pusher / wave-k8s controller), run at its defaults.

It takes the kubeconfig from ``--kubeconfig`` (controller-runtime's flag); leader election
and webhooks are off by default. It writes a hash of the consumed config as the pod-template
annotation ``wave.pusher.com/config-hash`` as soon as it sees an opted-in workload (so its
adoption is one write per workload) and again on every change, through one global token
bucket: ``--update-rate`` (default 1 update/s) with ``--update-burst`` (default 100).
Its metrics server binds ``:8080`` (controller-runtime's default; Wave has no flag for it).
"Ready" means: each of its three controllers logged "Starting workers", which
controller-runtime does once the controller's caches have synced.
"""

from __future__ import annotations

from pathlib import Path

from bench.peers.peer import PeerTool, Variant
from bench.tools import DEPLOYMENT_TEMPLATE
from kube_nudge.kube.client import JSON
from kube_nudge.model import template_annotation

OPT_IN = "wave.pusher.com/update-on-config-change"
HASH = "wave.pusher.com/config-hash"
PORT = 8080
CONTROLLERS = 3  # deployment, statefulset, daemonset
#: The documented knob raised ("set updateRate to a very high value" in its chart's values).
UNTHROTTLED = ("--update-rate=10000", "--update-burst=10000")


class Wave(PeerTool):
    """``wave --kubeconfig=...`` with its defaults."""

    name = "wave"
    fixed_port = PORT
    marker_text = f"pod-template annotation `{HASH}`"
    variants = (
        Variant(
            "wave (rate 10000/s)", UNTHROTTLED, frozenset({"latency", "fanout", "burst"}),
            "its global update throttle (1/s, burst 100) raised, where it dominates",
        ),
    )  # fmt: skip

    def argv(self, kubeconfig: Path) -> list[str]:
        """Its defaults; throttle lifted only where a scenario asks (set-up phases)."""
        argv = [str(self.binary.path), f"--kubeconfig={kubeconfig}", *self.settings.extra_args]
        return argv + list(UNTHROTTLED) if self.settings.unthrottled else argv

    async def wait_ready(self, timeout: float) -> float:
        """Until every controller has logged "Starting workers" (its caches synced)."""

        async def synced() -> bool:
            return self.log_since_start().count("Starting workers") >= CONTROLLERS

        return await self.poll(synced, timeout)

    def opt_in(self) -> dict[str, str]:
        """``wave.pusher.com/update-on-config-change: "true"``."""
        return {OPT_IN: "true"}

    def marker(self, workload: JSON) -> str | None:
        """The template's ``wave.pusher.com/config-hash``."""
        return template_annotation(workload, DEPLOYMENT_TEMPLATE, HASH)

    def adopted(self, workload: JSON) -> bool:
        """Once it has written its hash."""
        return self.marker(workload) is not None
