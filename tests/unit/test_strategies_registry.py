"""Strategies are chosen by name from one registry; the annotation accepts exactly those."""

from __future__ import annotations

from kube_nudge.model import parse_workload
from kube_nudge.model.annotations import STRATEGY
from kube_nudge.strategies.registry import (
    STRATEGIES,
    contract,
    delivers,
    product_defaults,
    strategy_names,
)


def test_the_default_comes_first_and_every_strategy_is_named() -> None:
    assert strategy_names()[0] == "rollout"
    assert set(strategy_names()) == set(STRATEGIES) == {"rollout", "notify", "snapshot", "hot"}
    for name, factory in STRATEGIES.items():
        assert factory.name == name


def test_the_annotation_table_names_the_registered_strategies() -> None:
    """The model cannot import the registry: the contract's `strategy` declaration names
    them, each in its own words."""
    [declared] = [a for a in contract() if a.name == STRATEGY]
    assert declared.values == "rollout, hot, notify or snapshot"
    assert declared.doc == (
        "how to apply a change: rollout writes the hash on the pod template; hot reloads in "
        "place what refreshed volumes carry and rolls for the rest; notify only posts an Event "
        "ConfigChanged; snapshot rolls onto immutable copies of the config"
    )


def test_the_annotation_accepts_registered_strategies_only() -> None:
    defaults = product_defaults()
    settings, errors = parse_workload({"kube-nudge.io/strategy": "notify"}, "ns", defaults)
    assert (settings.strategy, errors) == ("notify", [])
    settings, errors = parse_workload({"kube-nudge.io/strategy": "restart"}, "ns", defaults)
    assert settings.strategy == "rollout"
    names = '"rollout", "hot", "notify", "snapshot"'
    assert errors == [f'kube-nudge.io/strategy must be one of {names}, got "restart"']


def test_only_notify_announces_without_delivering_and_unknown_names_are_the_default() -> None:
    assert [name for name in strategy_names() if not delivers(name)] == ["notify"]
    assert delivers("restart") == delivers("rollout")
