"""``kube-nudge run``: assemble client, controller, metrics/health server, leader election."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from kube_nudge import __version__
from kube_nudge.controller.controller import BUILTIN_KINDS, Controller, ControllerOptions
from kube_nudge.controller.hmackey import load_or_create_key, read_key_file
from kube_nudge.controller.views import Defaults, WorkloadKind
from kube_nudge.kube.client import ClientOptions, KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.resources import Resource
from kube_nudge.model import parse_duration, parse_path
from kube_nudge.ops.http import HealthServer, parse_address
from kube_nudge.ops.leader import LeaderElector, LeaseConfig
from kube_nudge.ops.metrics import Metrics

log = logging.getLogger(__name__)

_IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything ``kube-nudge run`` was asked to do, validated."""

    kubeconfig: str | None
    context: str | None
    controller: ControllerOptions
    client: ClientOptions
    metrics_addr: str | None
    leader_elect: bool
    state_namespace: str
    lease_name: str
    lease_timings: tuple[float, float, float]  # duration, renew deadline, retry period
    hmac_key_file: Path | None
    hmac_secret: str


def parse_workload_kind(text: str) -> WorkloadKind:
    """``group/version/plural=path`` (e.g. ``argoproj.io/v1alpha1/rollouts=spec.template``)."""
    gvr, sep, path = text.partition("=")
    parts = gvr.split("/")
    if not sep or len(parts) != 3 or not all(parts):
        raise ValueError(
            f"--workload {text!r}: want GROUP/VERSION/PLURAL=PATH, "
            "e.g. argoproj.io/v1alpha1/rollouts=spec.template"
        )
    group, version, plural = parts
    kind = plural[:-1].capitalize() if plural.endswith("s") else plural.capitalize()
    return WorkloadKind(Resource(group, version, plural, kind), parse_path(path))


def parse_max_rollouts(text: str) -> tuple[int, float]:
    """``N/DURATION`` (e.g. ``3/5m``) → (N, seconds)."""
    count, sep, window = text.partition("/")
    if not sep or not count.isdigit() or int(count) < 1:
        raise ValueError(f"--max-rollouts {text!r}: want N/DURATION, e.g. 3/5m")
    seconds = parse_duration(window)
    if seconds <= 0:
        raise ValueError(f"--max-rollouts {text!r}: the window must be positive")
    return int(count), seconds


def default_state_namespace() -> str:
    """The pod's own namespace in-cluster, else ``$POD_NAMESPACE``, else ``kube-nudge``."""
    with contextlib.suppress(OSError):
        return _IN_CLUSTER_NAMESPACE.read_text().strip()
    return os.environ.get("POD_NAMESPACE", "kube-nudge")


def make_defaults(debounce: str, max_rollouts: str, compat: bool) -> Defaults:
    """Controller-wide defaults from flag values."""
    count, window = parse_max_rollouts(max_rollouts)
    return Defaults(parse_duration(debounce), count, window, compat)


def builtin_and_custom(custom: list[str]) -> tuple[WorkloadKind, ...]:
    """The built-in workload kinds plus those registered with --workload."""
    return (*BUILTIN_KINDS, *(parse_workload_kind(text) for text in custom))


async def serve(config: RunConfig) -> None:
    """Run the controller until cancelled."""
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    # The identity in the user agent makes every write attributable to one replica in the
    # API server's audit log.
    client = KubeClient.from_config(
        config.kubeconfig,
        context=config.context,
        options=config.client,
        user_agent=f"kube-nudge/{__version__} {identity}",
    )
    metrics = Metrics()
    try:
        if config.hmac_key_file is not None:
            hmac_key = read_key_file(config.hmac_key_file)
        else:
            hmac_key = await load_or_create_key(client, config.state_namespace, config.hmac_secret)
        recorder = EventRecorder(client, instance=identity)
        controller = Controller(
            client, config.controller, hmac_key=hmac_key, metrics=metrics, recorder=recorder
        )
        server = None
        if config.metrics_addr:
            host, port = parse_address(config.metrics_addr)
            server = HealthServer(
                metrics, host=host, port=port, ready=lambda: controller.ready,
                healthy=lambda: controller.healthy,
            )  # fmt: skip
            await server.start()
        tasks = [asyncio.create_task(controller.run(), name="controller")]
        if config.leader_elect:
            elector = LeaderElector(
                client,
                LeaseConfig(
                    namespace=config.state_namespace,
                    name=config.lease_name,
                    identity=identity,
                    lease_duration=config.lease_timings[0],
                    renew_deadline=config.lease_timings[1],
                    retry_period=config.lease_timings[2],
                ),
                on_started=lambda: controller.set_leader(True),
                on_stopped=lambda: controller.set_leader(False),
            )
            tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
        else:
            controller.set_leader(True)
        log.info("kube-nudge %s started as %s", __version__, identity)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # surface the error that stopped a component
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # Events still queued behind their budget (e.g. after a 1,000-workload fan-out).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(controller.reconciler.flush_events(), 10)
            if server is not None:
                await server.stop()
    finally:
        await client.aclose()


def run_forever(config: RunConfig) -> int:
    """Serve until SIGINT/SIGTERM; exit code 0 on a requested stop."""

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None  # nosec B101 # type narrowing only: inside a task
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve(config)
        log.info("stopped")

    asyncio.run(main())
    return 0
