"""Every strategy, by the name ``kube-nudge.io/strategy`` selects it with.

Adding a strategy: a new module with a class satisfying ``strategies.base.Strategy``,
and one entry here. Its name then validates in annotations automatically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kube_nudge.model.annotations import DEFAULT_STRATEGY
from kube_nudge.strategies.base import Strategy, StrategyContext
from kube_nudge.strategies.hot import HotStrategy
from kube_nudge.strategies.notify import NotifyStrategy
from kube_nudge.strategies.rollout import RolloutStrategy
from kube_nudge.strategies.snapshot import SnapshotStrategy

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "build_strategies", "delivers", "strategy_names"]


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


STRATEGIES: Mapping[str, StrategyFactory] = {
    RolloutStrategy.name: RolloutStrategy,
    NotifyStrategy.name: NotifyStrategy,
    SnapshotStrategy.name: SnapshotStrategy,
    HotStrategy.name: HotStrategy,
}


def strategy_names() -> tuple[str, ...]:
    """The names ``kube-nudge.io/strategy`` accepts, default first."""
    return (DEFAULT_STRATEGY, *sorted(name for name in STRATEGIES if name != DEFAULT_STRATEGY))


def delivers(name: str) -> bool:
    """Whether the strategy called ``name`` brings a changed config to the pods (an unknown
    name is the default's, as the annotation parser makes it)."""
    return STRATEGIES.get(name, STRATEGIES[DEFAULT_STRATEGY]).delivers


def build_strategies(context: StrategyContext) -> dict[str, Strategy]:
    """One instance of every strategy, sharing ``context``."""
    return {name: factory(context) for name, factory in STRATEGIES.items()}
