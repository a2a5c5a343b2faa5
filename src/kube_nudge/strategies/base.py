"""The strategy contract: how a decided change reaches a workload.

The reconciler decides (pure, in ``model.decide``) *whether* and *what*; a strategy,
chosen per workload by ``kube-nudge.io/strategy``, carries out *how*. A new strategy is a
new package with a class satisfying ``Strategy`` plus one entry in ``registry.py``.

What a strategy needs beyond adopting and applying is an optional hook here, which the
registry or the reconciler looks for, so a strategy has only the hooks it uses (the shared
writes, ``writes.py``, reach theirs through ``StrategyContext.rollouts``, which the registry
fills in):

- ``Maintaining``: objects of its own to keep in order on every pass (snapshot, hot);
- ``RollingBack``: puts a workload whose rollout failed back on an earlier config;
- ``OwnsSources``: ConfigMaps/Secrets it makes itself, which the source watches leave out;
- ``ServesWebhooks``: admission webhooks it serves, from the controller's caches (``Host``);
- ``PodConfig``: the config a pod runs when the strategy delivered it in place (status);
- ``PodReloads``: when a pod last re-read its config in place (status);
- ``SupersededByRollouts``: what it records of a change it is delivering without a rollout,
  which any rollout removes;
- ``NamesStandIns``: how a rollout by another strategy takes its stand-ins (snapshot's
  copies) off a template, naming the sources again;
- ``ExtendsModel``: its annotations, settings, view extras, holds and status states, which
  the registry hands to the model (``model.extensions.StrategyModel``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.workloads import Target, WorkloadKey, WorkloadKind
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    Hold,
    SourceRef,
    SourceView,
    WorkloadDefaults,
)
from kube_nudge.model.extensions import StrategyModel
from kube_nudge.notifications.model import Notification, NotificationKind
from kube_nudge.runtime.clock import SYSTEM_CLOCK, Clock
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge.runtime.expectations import WriteExpectations
from kube_nudge.runtime.http import HttpServer
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = [
    "CannotRollBack",
    "ExtendsModel",
    "Host",
    "Maintaining",
    "NamesStandIns",
    "NotYet",
    "OwnsSources",
    "PodConfig",
    "PodReloads",
    "Refused",
    "RollingBack",
    "RolloutDuties",
    "ServesWebhooks",
    "Strategy",
    "StrategyContext",
    "SupersededByRollouts",
    "Webhook",
    "notification",
]


def notification(
    target: Target,
    kind: NotificationKind,
    reason: str,
    message: str,
    config_hash: str,
    now: float,
    change: str = "",
) -> Notification:
    """The notification that goes with an Event about ``target`` (the same words)."""
    return Notification(
        kind=kind,
        namespace=target.namespace,
        workload_kind=target.kind.resource.kind,
        workload=target.name,
        uid=target.view.uid,
        reason=reason,
        message=message,
        config_hash=config_hash,
        time=now,
        change=change,
    )


@runtime_checkable
class NamesStandIns(Protocol):
    """Optional, on the strategy class: a strategy whose templates name stand-ins in place
    of sources (snapshot's copies) says how a rollout by another strategy names the sources
    again (stand-ins would keep old data forever)."""

    @staticmethod
    def leave_stand_ins(
        target: Target, workload: JSON, plan: Apply, recorded: Mapping[str, str | None]
    ) -> dict[str, Any] | None:
        """The rollout patch of ``workload`` (read in full: the patch carries its
        resourceVersion) that points its template back at the sources, with ``recorded``
        (what every rollout records) on its metadata; None when nothing of this strategy's
        is on it."""
        ...


@dataclass(frozen=True, slots=True)
class RolloutDuties:
    """What every rollout owes the registered strategies, whichever strategy makes it (the
    registry's ``build_strategies`` fills it in from their hooks)."""

    superseded: tuple[str, ...] = ()
    """Annotations a rollout removes from the workload's metadata (``SupersededByRollouts``)."""
    stand_ins: tuple[NamesStandIns, ...] = ()
    """The strategies whose stand-ins a rollout by another takes off the template
    (``NamesStandIns``), asked in order."""


@dataclass(frozen=True, slots=True)
class StrategyContext:
    """What every strategy may use: the API client, Events, metrics, and the installation
    key (never logged; snapshot names are keyed with it)."""

    client: KubeClient
    events: BackgroundEvents
    metrics: Metrics
    hmac_key: bytes = field(default=b"", repr=False)
    notify: Callable[[Notification], None] = field(default=lambda _: None, repr=False)
    """Sends a notification to the configured receivers; never blocks, never raises."""
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False)
    rollouts: RolloutDuties = field(default=RolloutDuties(), repr=False)
    """What every rollout owes the registered strategies (``build_strategies`` sets it)."""
    expectations: WriteExpectations[WorkloadKey] = field(
        default_factory=WriteExpectations, repr=False
    )
    """Each workload write's resourceVersion, until the caches show it: a pass reading
    them earlier would act on what was there before the write. On the system clock by
    default: built on ``clock`` where a clock is injected."""


class Refused(Exception):
    """A strategy will not carry out a plan as things stand: the reconciler holds the
    workload with ``hold`` (a Warning Event and a log line), remembering nothing."""

    def __init__(self, hold: Hold) -> None:
        super().__init__(hold.message)
        self.hold = hold


class NotYet(Exception):
    """What the strategy just read is newer than the caches the plan was made from: the
    reconciler tries again shortly (backoff), without an Event."""


class Strategy(Protocol):
    """How a decided change is carried out. What it writes to the workload it adds to the
    pass's ``WorkloadChanges`` (``changes.py``), which the reconciler sends as one PATCH,
    then running the effects added with it. Methods raise ``ApiError`` when the API
    refuses; the reconciler turns that into a retry with backoff and a Warning Event."""

    @property
    def name(self) -> str:
        """The value of ``kube-nudge.io/strategy`` that selects it."""
        ...

    @property
    def capped(self) -> bool:
        """Whether the flap cap (``kube-nudge.io/max-rollouts``) limits it."""
        ...

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Remember ``plan.config_hash`` as what ``target``'s pods run, restarting nothing
        (first sight, or re-baselining after a key change): added to ``changes``."""
        ...

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        """Bring ``target``'s pods to ``plan.config_hash`` (or announce the change): what to
        write to ``target`` is added to ``changes``, never sent."""
        ...


@runtime_checkable
class Maintaining(Protocol):
    """Optional: a strategy with objects of its own to keep in order (the snapshot copies'
    owners) is called on every reconcile that applied or found nothing to do."""

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        """Keep ``target``'s own objects in order (what to write to ``target`` itself is
        added to ``changes``); seconds until it wants another look."""
        ...


class CannotRollBack(Exception):
    """A rollback that would not restore the earlier config (no earlier revision, or one
    whose config nothing holds any more): nothing is written, and the workload stays held
    on the failed config; the message (one line) says why."""


@runtime_checkable
class RollingBack(Protocol):
    """Optional: a strategy that keeps earlier configs (snapshot copies) can put a
    workload whose rollout failed back on the previous one."""

    #: What it goes back to, for the RolloutFailed Event ("rolling back to ...").
    rolls_back_to: str

    async def rollback(self, target: Target, failed_hash: str, changes: WorkloadChanges) -> str:
        """Go back to the latest revision not running ``failed_hash``, with the config it
        ran (added to ``changes``); what it does. ``CannotRollBack`` when that config can't
        be restored."""
        ...


@runtime_checkable
class OwnsSources(Protocol):
    """Optional, on the strategy class: ConfigMaps and Secrets carrying one of these labels
    are the strategy's own objects (the snapshot copies), never sources: the source watches
    leave them out."""

    owned_source_labels: frozenset[str]


@runtime_checkable
class ExtendsModel(Protocol):
    """Optional, on the strategy class: what it adds to the model (its own annotations and
    settings, view extras, holds, status states), as data and pure functions; the registry
    hands it down through ``WorkloadDefaults.extensions``."""

    model: StrategyModel


@runtime_checkable
class PodConfig(Protocol):
    """Optional, on the strategy class: a strategy that delivers config to running pods
    without a rollout tells which config a pod runs by the pod's own annotations."""

    @staticmethod
    def pod_config(annotations: Mapping[str, Any]) -> str | None:
        """The hash of the config delivered in place that the pod confirmed, or None: it
        runs its template's."""
        ...


@runtime_checkable
class PodReloads(Protocol):
    """Optional, on the strategy class: a strategy whose pods re-read their config while
    running (hot's reload agent) tells when a pod last did, by the pod's own annotations:
    ``kube-nudge status`` counts a pod stale only for a change after it."""

    @staticmethod
    def pod_reloaded_at(annotations: Mapping[str, Any]) -> float | None:
        """When the pod last re-read its config in place (Unix seconds), or None."""
        ...


@runtime_checkable
class SupersededByRollouts(Protocol):
    """Optional, on the strategy class: annotations on a workload's metadata that record a
    change the strategy is delivering without a rollout (hot's ``kube-nudge.io/hot-reload``).
    A rollout by any strategy supersedes that change: its patch removes them."""

    superseded_by_rollouts: tuple[str, ...]


class HostOptions(Protocol):
    """What a webhook reads of the controller's options."""

    @property
    def kinds(self) -> Sequence[WorkloadKind]:
        """The workload kinds watched."""
        ...

    @property
    def defaults(self) -> WorkloadDefaults:
        """The defaults a workload's annotations override."""
        ...


class Host(Protocol):
    """What a strategy's webhook may read of the running controller: its caches, whether
    they are filled, its options and metrics (the narrow interface; never its reconciler)."""

    @property
    def options(self) -> HostOptions:
        """The controller's options."""
        ...

    @property
    def metrics(self) -> Metrics:
        """The controller's metrics."""
        ...

    @property
    def ready(self) -> bool:
        """Whether the caches are filled."""
        ...

    def source(self, ref: SourceRef) -> SourceView | None:
        """The cached view of one ConfigMap or Secret."""
        ...


class Webhook(Protocol):
    """An admission webhook: its routes on the webhook server."""

    def register(self, server: HttpServer) -> None:
        """Serve its routes on ``server``."""
        ...


@runtime_checkable
class ServesWebhooks(Protocol):
    """Optional, on the strategy class: the admission webhooks it serves (on every replica,
    from the caches ``host`` keeps; ``hmac_key`` gives the installation key)."""

    @staticmethod
    def webhooks(host: Host, hmac_key: Callable[[], bytes]) -> Sequence[Webhook]:
        """Its webhooks, ready to register."""
        ...
