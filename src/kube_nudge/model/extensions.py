"""What a strategy package adds to the model, handed down as data and pure functions.

The model is the bottom layer: it never imports a strategy. The registry
(``strategies.registry.model_extensions``) gives each strategy's ``StrategyModel`` to the
model through ``WorkloadDefaults.extensions``, and the model asks them instead of naming a
strategy. Its data part (``model.shapes.StrategyShape``) is what parsing and projecting a
workload need:

- ``annotations``: the strategy's own declarations (parsed by the same loop as the model's,
  listed in the annotation table after them);
- ``settings``: builds its typed settings from its parsed workload annotations, kept in
  ``WorkloadSettings.extras`` under its name (read with ``Extras.of``);
- ``view``: what it needs of a workload's metadata annotations and pod spec, kept in
  ``WorkloadView.extras`` under its name;
- ``stand_ins`` and ``rolled_to``: the annotations in which it records the stand-ins its
  templates name in place of sources (``model.standins``) and the hash it last rolled to,
  so the projection sees through its stand-ins and records what only such a workload has;
- ``hold_reasons``, every reason it holds for (its own metric labels), and ``rolls_back``.

``StrategyModel`` adds its decisions, which need the view and the decision's types:

- ``hold``: a decision it vetoes (``model.decide`` asks the workload's strategy);
- ``status``: a state ``kube-nudge status`` gives a workload it is delivering to;
- ``delivery``: how it brings a decided change to the pods (roll, reload in place, only
  announce), what ``kube-nudge plan`` says it will do; the strategy carries out the same
  rule when it applies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kube_nudge.model.decide import Apply, Assessment, Hold
from kube_nudge.model.memory import WorkloadMemory
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.shapes import StrategyShape

__all__ = ["Delivery", "StrategyModel"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """How a strategy brings a decided change to the pods."""

    verb: str
    """``roll`` (the workload's own rollout), ``reload`` (in place, no restart) or
    ``notify`` (announced only)."""
    detail: str = ""
    """Why, in words (names and keys, never values); empty: the verb says it all."""


@dataclass(frozen=True, slots=True)
class StrategyModel(StrategyShape):
    """What one strategy adds to the model (see the module's documentation)."""

    hold: Callable[[WorkloadView, Assessment, WorkloadMemory], Hold | None] | None = None
    """Called for workloads using it once the config is complete: a hold, or None."""
    status: Callable[[WorkloadView, int], tuple[str, str] | None] | None = None
    """For an adopted workload using it whose hash matches, and how many pods run another
    config: its state and detail, or None."""
    delivery: Callable[[WorkloadView, Apply, Assessment], Delivery] | None = None
    """How it delivers ``Apply`` to the workload's pods; None: it rolls them."""
