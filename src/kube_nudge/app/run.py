"""``kube-nudge run``: assemble client, controller, HTTP server and leader election into
one manager of runnables, and serve until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kube_nudge import __version__
from kube_nudge.app.errors import CommandError, api_failure
from kube_nudge.app.serverversion import log_server_version
from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.kube.client import ApiError, ClientOptions, KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.resources import SECRETPROVIDERCLASSPODSTATUSES, Resource
from kube_nudge.kube.workloads import WorkloadKind, WorkloadSpec, registry, resolve
from kube_nudge.notifications.model import Notification, Receiver
from kube_nudge.reporting.audit import Audit
from kube_nudge.reporting.hmackey import load_or_create_key, read_key_file
from kube_nudge.runtime.gcfreeze import GcFreezer
from kube_nudge.runtime.heap import HeapTrimmer
from kube_nudge.runtime.http import HttpServer, TlsFiles, add_probes
from kube_nudge.runtime.leader import LeaderElector, LeaseConfig
from kube_nudge.runtime.manager import Elector, ElectorFactory, Manager, Runnable
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.tlsbuffers import use_small_tls_buffers
from kube_nudge.strategies.registry import webhooks

if TYPE_CHECKING:
    from kube_nudge.notifications.delivery import Notifier

log = logging.getLogger(__name__)

_IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
EVENT_FLUSH_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Where and with which certificate the snapshot admission webhook is served."""

    address: tuple[str, int]
    tls: TlsFiles


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything ``kube-nudge run`` was asked to do, validated."""

    kubeconfig: str | None
    context: str | None
    controller: ControllerOptions
    client: ClientOptions
    metrics_addr: tuple[str, int] | None
    state_namespace: str
    lease: LeaseConfig | None
    """None without --leader-elect; its identity is replaced by the replica's at start."""
    hmac_key_file: Path | None
    hmac_secret: str
    custom_workloads: tuple[WorkloadSpec, ...] = ()
    webhook: WebhookConfig | None = None
    audit_interval: float = 0.0  # 0: no drift audit
    receivers: tuple[Receiver, ...] = ()
    """Where notifications go (none: not sent)."""
    cluster_name: str | None = None


def default_state_namespace() -> str:
    """The pod's own namespace in-cluster, else ``$POD_NAMESPACE``, else ``kube-nudge``."""
    with contextlib.suppress(OSError):
        return _IN_CLUSTER_NAMESPACE.read_text().strip()
    return os.environ.get("POD_NAMESPACE", "kube-nudge")


async def resolve_workloads(
    client: KubeClient, specs: tuple[WorkloadSpec, ...]
) -> tuple[tuple[WorkloadKind, ...], tuple[WorkloadSpec, ...]]:
    """Built-in kinds plus every ``--workload`` the API serves, and those it doesn't serve
    yet: each of these is logged and retried while running; it never stops the others."""
    custom, pending = [], []
    for spec in specs:
        try:
            custom.append(await resolve(client, spec))
        except ValueError as exc:
            log.warning("not watching yet, retrying until served: %s", exc)
            pending.append(spec)
    return registry(custom), tuple(pending)


async def csi_served(
    client: KubeClient,
    options: ControllerOptions,
    resource: Resource = SECRETPROVIDERCLASSPODSTATUSES,
) -> ControllerOptions:
    """``options`` as they can be served: with --csi-secrets but no Secrets Store CSI CRD
    served (``resource``), CSI volumes consume nothing (logged) until a restart finds it."""
    if not options.defaults.csi_secrets:
        return options
    try:
        found = await client.get(f"/apis/{resource.api_version}")
    except ApiError as exc:
        if not exc.not_found:
            raise
        found = {}
    if any(entry.get("name") == resource.plural for entry in found.get("resources") or []):
        return options
    log.warning(
        "--csi-secrets: the API server does not serve %s/%s (is the Secrets Store CSI driver "
        "installed?); CSI volumes count as no source until kube-nudge restarts with it served",
        resource.plural, resource.api_version,
    )  # fmt: skip
    defaults = dataclasses.replace(options.defaults, csi_secrets=False)
    return dataclasses.replace(options, defaults=defaults)


async def serve(config: RunConfig) -> None:
    """Run the controller until cancelled."""
    use_small_tls_buffers()  # before the first connection (runtime/tlsbuffers.py)
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
        await log_server_version(client)
        if config.hmac_key_file is not None:
            hmac_key = read_key_file(config.hmac_key_file)
        else:
            hmac_key = await _state_key(client, config)
        options = await csi_served(client, config.controller)
        if config.custom_workloads:
            kinds, pending = await resolve_workloads(client, config.custom_workloads)
            options = dataclasses.replace(options, kinds=kinds, pending_kinds=pending)
        notifier = _notifier(config, metrics)
        controller = Controller(
            client, options, hmac_key=hmac_key, metrics=metrics,
            recorder=EventRecorder(client, instance=identity),
            notify=_stamped(notifier, config.cluster_name) if notifier is not None else None,
        )  # fmt: skip
        runnables: list[Runnable] = [
            *controller.runnables,
            HeapTrimmer(controller.synced),
            GcFreezer(controller.synced),
        ]
        if notifier is not None:
            runnables.append(notifier)
        runnables += _beside(config, controller, hmac_key)
        elector = None
        if config.lease is not None:
            elector = _elector(client, dataclasses.replace(config.lease, identity=identity))
        manager = Manager(
            runnables, elector=elector,
            on_leading=lambda leading: metrics.is_leader.set(1 if leading else 0),
        )  # fmt: skip
        log.info("kube-nudge %s started as %s", __version__, identity)
        try:
            await manager.run()
        finally:
            # Events still queued behind their budget (e.g. after a 1,000-workload fan-out).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(controller.events.flush(), EVENT_FLUSH_TIMEOUT)
            if notifier is not None:
                await notifier.drain(EVENT_FLUSH_TIMEOUT)
    except ApiError as exc:  # one line naming the server, the request and why
        raise api_failure(exc, client) from None
    finally:
        await client.aclose()


def _beside(config: RunConfig, controller: Controller, hmac_key: bytes) -> list[Runnable]:
    """What runs beside the controller as configured: the metrics and probes server, the
    audit, and the webhook server with every strategy's webhooks."""
    runnables: list[Runnable] = []
    client, metrics, options = controller.client, controller.metrics, controller.options
    if config.metrics_addr is not None:
        server = HttpServer(*config.metrics_addr)
        add_probes(
            server, render_metrics=metrics.render, ready=lambda: controller.ready,
            healthy=lambda: controller.healthy,
        )  # fmt: skip
        runnables.append(server)
    if config.audit_interval > 0:
        runnables.append(Audit(
            client, metrics, interval=config.audit_interval,
            namespaces=options.namespaces, kinds=options.kinds, hmac_key=hmac_key,
            compat=options.defaults.compat, csi_secrets=options.defaults.csi_secrets,
        ))  # fmt: skip
    if config.webhook is not None:
        webhook_server = HttpServer(*config.webhook.address, tls=config.webhook.tls,
                                    name="webhook")  # fmt: skip
        for webhook in webhooks(controller, hmac_key=lambda: hmac_key):
            webhook.register(webhook_server)
        runnables.append(webhook_server)
    return runnables


def _notifier(config: RunConfig, metrics: Metrics) -> Notifier | None:
    """The sender to the configured receivers, or None when there are none."""
    if not config.receivers:
        return None
    # Imported only with receivers to send to: most installations have none.
    from kube_nudge.notifications.delivery import Notifier, NotifierHooks

    hooks = NotifierHooks.from_counters(
        metrics.notifications_sent, metrics.notifications_failed, metrics.notifications_dropped,
        receivers=config.receivers,
    )  # fmt: skip
    log.info("notifications go to %s", ", ".join(receiver.label for receiver in config.receivers))
    return Notifier(config.receivers, hooks=hooks)


def _stamped(notifier: Notifier, cluster: str | None) -> Callable[[Notification], None]:
    """``notifier.notify``, naming this cluster in each notification when it has a name."""
    if cluster is None:
        return notifier.notify
    return lambda item: notifier.notify(dataclasses.replace(item, cluster=cluster))


async def _state_key(client: KubeClient, config: RunConfig) -> bytes:
    """The HMAC key from the state namespace; a ``CommandError`` that says how to fix it
    when that namespace doesn't exist (a bare 404 said nothing) or its Secret holds no key."""
    namespace = config.state_namespace
    try:
        return await load_or_create_key(client, namespace, config.hmac_secret)
    except ApiError as exc:
        if exc.not_found:
            raise CommandError(
                f"state namespace {namespace!r} does not exist: create it "
                f"(kubectl create namespace {namespace}) or pass --state-namespace"
            ) from None
        raise
    except ValueError as exc:  # the Secret is there without the key
        raise CommandError(
            f"{exc}: delete it and kube-nudge makes a new key (workloads are adopted again, "
            "restarting nothing), or pass --hmac-secret with another Secret's name"
        ) from None


def _elector(client: KubeClient, lease: LeaseConfig) -> ElectorFactory:
    def build(on_started: Callable[[], None], on_stopped: Callable[[], None]) -> Elector:
        return LeaderElector(client, lease, on_started=on_started, on_stopped=on_stopped)

    return build


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
