"""A toy strategy that exists only in the tests: a package of its own and nothing else,
registered through the registry's public API (``strategies.registry.register``).

It writes nothing to the API: it records what it was asked to do, so a test can see it
chosen, decided for and acted on through the hooks alone. Its hooks: ``Maintaining``, its
own ConfigMaps (``OwnsSources``), one webhook (``ServesWebhooks``), what a pod runs
(``PodConfig``: the hash in its annotation ``toy.example/runs``) and what it adds to the
model (``ExtendsModel``): one annotation of its own, ``toy.example/greeting``, parsed into
its own settings (``ToySettings``, read with ``toy_settings``), and a hold: it holds the
changes of a workload that greets ``howdy``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kube_nudge.kube.workloads import Target
from kube_nudge.model import (
    Adopt,
    Apply,
    Assessment,
    Hold,
    WorkloadMemory,
    WorkloadSettings,
    WorkloadView,
)
from kube_nudge.model.extensions import StrategyModel
from kube_nudge.model.parsing import one_of
from kube_nudge.model.shapes import Annotation, By, On
from kube_nudge.runtime.http import HttpServer
from kube_nudge.strategies.base import Host, StrategyContext, Webhook
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = [
    "GREETING",
    "OWN_LABEL",
    "RUNS",
    "ToySettings",
    "ToyStrategy",
    "ToyWebhook",
    "toy_settings",
]

OWN_LABEL = "toy.example/own"
RUNS = "toy.example/runs"
GREETING = "toy.example/greeting"


@dataclass(frozen=True, slots=True)
class ToySettings:
    """What a workload's annotations ask of the toy strategy."""

    greeting: str = "hello"


_GREETING = Annotation(
    GREETING, On.WORKLOAD, By.USER, "strategy toy: how it greets",
    values="hello or howdy", shown_default="hello", field="greeting",
    parse=one_of({"hello": "hello", "howdy": "howdy"}), default="hello",
)  # fmt: skip


def toy_settings(settings: WorkloadSettings) -> ToySettings:
    """What ``settings`` ask of the toy strategy."""
    return settings.extras.of("toy", ToySettings, ToySettings())


def _hold(view: WorkloadView, assessment: Assessment, memory: WorkloadMemory) -> Hold | None:
    if toy_settings(view.settings).greeting != "howdy":
        return None
    return Hold("invalid", "ToyHowdy", "the toy holds whoever greets howdy")


class ToyWebhook:
    """A webhook that only remembers the server it was registered on."""

    def __init__(self, host: Host, hmac_key: Callable[[], bytes]) -> None:
        self.host = host
        self.hmac_key = hmac_key
        self.servers: list[HttpServer] = []

    def register(self, server: HttpServer) -> None:
        self.servers.append(server)


class ToyStrategy:
    """Records every call; one list shared by every instance (the test reads it)."""

    name = "toy"
    capped = True
    delivers = True
    owned_source_labels = frozenset({OWN_LABEL})
    model = StrategyModel(
        "toy", doc="toy only records", annotations=(_GREETING,), settings=ToySettings, hold=_hold
    )
    calls: list[str] = []  # shared on purpose: the controller makes the instance

    def __init__(self, context: StrategyContext) -> None:
        self._context = context

    @staticmethod
    def pod_config(annotations: Mapping[str, Any]) -> str | None:
        return annotations.get(RUNS)

    @staticmethod
    def webhooks(host: Host, hmac_key: Callable[[], bytes]) -> Sequence[Webhook]:
        return (ToyWebhook(host, hmac_key),)

    async def adopt(
        self, target: Target, plan: Adopt, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        self.calls.append(f"adopt {target.name} {plan.config_hash}")

    async def apply(
        self, target: Target, plan: Apply, assessment: Assessment, changes: WorkloadChanges
    ) -> None:
        self.calls.append(f"apply {target.name} {plan.config_hash}")

    async def maintain(
        self, target: Target, assessment: Assessment, changes: WorkloadChanges
    ) -> float | None:
        self.calls.append(f"maintain {target.name}")
        return None
