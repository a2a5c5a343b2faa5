"""Every strategy, by the name ``kube-nudge.io/strategy`` selects it with, and what the
rest of kube-nudge asks of them all: their names, which deliver, the labels of the objects
they own, the webhooks they serve, the config a pod runs when one delivered it in place and
when it last re-read it, what every rollout owes them, what they add to the model and the
annotation contract as a whole.

Adding a strategy: a new package with a class satisfying ``strategies.base.Strategy``
(plus the optional hooks there it needs), and one entry here (or ``register`` for one
that lives elsewhere, such as a test's). Its name then validates in annotations
automatically; the controller and the app never name a strategy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from kube_nudge.model import WorkloadDefaults, WorkloadView
from kube_nudge.model.annotations import ANNOTATIONS, DEFAULT_STRATEGY, STRATEGY
from kube_nudge.model.extensions import StrategyModel
from kube_nudge.model.shapes import Annotation
from kube_nudge.strategies.base import (
    ExtendsModel,
    Host,
    NamesStandIns,
    OwnsSources,
    PodConfig,
    PodReloads,
    RolloutDuties,
    ServesWebhooks,
    Strategy,
    StrategyContext,
    SupersededByRollouts,
    Webhook,
)
from kube_nudge.strategies.hot import HotStrategy
from kube_nudge.strategies.notify import NotifyStrategy
from kube_nudge.strategies.rollout import RolloutStrategy
from kube_nudge.strategies.snapshot import SnapshotStrategy

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "Strategies",
    "StrategyFactory",
    "build_strategies",
    "capped_by_name",
    "contract",
    "delivers",
    "model_extensions",
    "owned_source_labels",
    "pod_config",
    "pod_reloaded_at",
    "product_defaults",
    "register",
    "rollout_duties",
    "strategy_names",
    "unregister",
    "webhooks",
]


class StrategyFactory(Protocol):
    """A strategy class: what it is called and does, before any instance exists."""

    @property
    def name(self) -> str:
        """The value of ``kube-nudge.io/strategy`` that selects it."""
        ...

    @property
    def delivers(self) -> bool:
        """Whether it brings a changed config to the pods (False: it only announces it)."""
        ...

    def __call__(self, context: StrategyContext) -> Strategy:
        """One instance, sharing ``context``."""
        ...


_REGISTERED: dict[str, StrategyFactory] = {
    RolloutStrategy.name: RolloutStrategy,
    NotifyStrategy.name: NotifyStrategy,
    SnapshotStrategy.name: SnapshotStrategy,
    HotStrategy.name: HotStrategy,
}
#: Every strategy by name (read-only; ``register`` adds one).
STRATEGIES: Mapping[str, StrategyFactory] = _REGISTERED


def register(factory: StrategyFactory) -> None:
    """Add a strategy under ``factory.name``: from now on the annotation accepts it and
    every controller built afterwards has one. A name taken already is a ValueError."""
    if factory.name in _REGISTERED:
        raise ValueError(f"a strategy named {factory.name!r} is registered already")
    _REGISTERED[factory.name] = factory


def unregister(name: str) -> None:
    """Remove the strategy ``name`` (a test's, once it is done); never the default."""
    if name == DEFAULT_STRATEGY:
        raise ValueError("the default strategy stays registered")
    _REGISTERED.pop(name, None)


def strategy_names() -> tuple[str, ...]:
    """The names ``kube-nudge.io/strategy`` accepts, default first."""
    return (DEFAULT_STRATEGY, *sorted(name for name in STRATEGIES if name != DEFAULT_STRATEGY))


def capped_by_name() -> dict[str, bool]:
    """Whether each strategy restarts pods (its rollouts count against the flap cap), by
    name, before any instance exists (``kube-nudge plan``)."""
    return {name: bool(getattr(factory, "capped", True)) for name, factory in STRATEGIES.items()}


def delivers(name: str) -> bool:
    """Whether the strategy called ``name`` brings a changed config to the pods (an unknown
    name is the default's, as the annotation parser makes it)."""
    return STRATEGIES.get(name, STRATEGIES[DEFAULT_STRATEGY]).delivers


class Strategies(dict[str, Strategy]):
    """The strategy instances one controller built, by name."""

    def capped(self, view: WorkloadView) -> bool:
        """Whether ``view``'s strategy restarts pods (its rollouts are followed and count
        against the flap cap)."""
        return self[view.settings.strategy].capped


def build_strategies(context: StrategyContext) -> Strategies:
    """One instance of every strategy, sharing ``context`` with what every rollout owes
    them all (``rollout_duties``)."""
    context = replace(context, rollouts=rollout_duties())
    return Strategies({name: factory(context) for name, factory in STRATEGIES.items()})


def rollout_duties() -> RolloutDuties:
    """What every rollout, by whichever strategy, owes the registered strategies: the
    records of changes delivered in place it supersedes, and who takes stand-ins off."""
    factories = [STRATEGIES[name] for name in strategy_names()]
    return RolloutDuties(
        superseded=tuple(
            annotation
            for factory in factories
            if isinstance(factory, SupersededByRollouts)
            for annotation in factory.superseded_by_rollouts
        ),
        stand_ins=tuple(factory for factory in factories if isinstance(factory, NamesStandIns)),
    )


def owned_source_labels() -> frozenset[str]:
    """Labels of the ConfigMaps/Secrets some strategy makes itself: never sources."""
    return frozenset(
        label
        for factory in STRATEGIES.values()
        if isinstance(factory, OwnsSources)
        for label in factory.owned_source_labels
    )


def webhooks(host: Host, hmac_key: Callable[[], bytes]) -> list[Webhook]:
    """The admission webhooks every strategy serves, over ``host``'s caches."""
    return [
        webhook
        for factory in STRATEGIES.values()
        if isinstance(factory, ServesWebhooks)
        for webhook in factory.webhooks(host, hmac_key)
    ]


def pod_config(annotations: Mapping[str, Any]) -> str | None:
    """The config a pod runs by its own annotations when some strategy delivered it in
    place (the first that says), else None: its template's."""
    for factory in STRATEGIES.values():
        if isinstance(factory, PodConfig) and (found := factory.pod_config(annotations)):
            return found
    return None


def pod_reloaded_at(annotations: Mapping[str, Any]) -> float | None:
    """When a pod last re-read its config in place, by its own annotations (the latest any
    strategy tells), else None: at its start."""
    return max(
        (
            found
            for factory in STRATEGIES.values()
            if isinstance(factory, PodReloads)
            and (found := factory.pod_reloaded_at(annotations)) is not None
        ),
        default=None,
    )


def model_extensions() -> tuple[StrategyModel, ...]:
    """What the strategies add to the model, in ``strategy_names`` order (for
    ``WorkloadDefaults.extensions``)."""
    return tuple(
        factory.model
        for name in strategy_names()
        if isinstance(factory := STRATEGIES[name], ExtendsModel)
    )


def product_defaults(**changes: Any) -> WorkloadDefaults:
    """The product's workload defaults with every registered strategy accepted, and what
    each adds to the model. Here rather than in the controller, so the CLI's readers
    (``kube_nudge.reporting``) parse annotations as the controller does without importing it."""
    return WorkloadDefaults(strategies=strategy_names(), extensions=model_extensions(), **changes)


def contract() -> tuple[Annotation, ...]:
    """The whole annotation contract in the order of the annotation table: the model's own (the
    strategy annotation naming every registered strategy), then each strategy's (in
    ``strategy_names`` order)."""
    return (
        *(_naming_strategies(a) if a.name == STRATEGY else a for a in ANNOTATIONS),
        *(annotation for model in model_extensions() for annotation in model.annotations),
    )


def _naming_strategies(declared: Annotation) -> Annotation:
    """The strategy annotation's declaration with every registered strategy's name among
    its values and its words in its documentation."""
    names = strategy_names()
    values = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    docs = (model.doc for model in model_extensions() if model.doc)
    return replace(declared, doc="; ".join((declared.doc, *docs)), values=values)
