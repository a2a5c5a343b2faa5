"""What a strategy package adds to the model, handed down as data and pure functions.

The model is the bottom layer: it never imports a strategy. The registry
(``strategies.registry.model_extensions``) gives each strategy's ``StrategyModel`` to the
model through ``WorkloadDefaults.extensions``, and the model asks them instead of naming a
strategy:

- ``annotations``: the strategy's own declarations (parsed by the same loop as the model's,
  listed in README's table after them);
- ``settings``: builds its typed settings from its parsed workload annotations, kept in
  ``WorkloadSettings.extras`` under its name (read with ``Extras.of``);
- ``view``: what it needs of a workload's metadata annotations, kept in
  ``WorkloadView.extras`` under its name;
- ``stand_ins`` and ``rolled_to``: the annotations in which it records the stand-ins its
  templates name in place of sources (``model.standins``) and the hash it last rolled to,
  so the projection sees through its stand-ins and records what only such a workload has;
- ``hold``: a decision it vetoes (``model.decide`` asks the workload's strategy), and
  ``hold_reasons``, every reason it holds for (its own metric labels);
- ``status``: a state ``kube-nudge status`` gives a workload it is delivering to.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kube_nudge.model.declarations import Annotation

if TYPE_CHECKING:
    from kube_nudge.model.annotations import WorkloadSettings
    from kube_nudge.model.decide import Assessment, Hold
    from kube_nudge.model.memory import WorkloadMemory
    from kube_nudge.model.projection import WorkloadView

__all__ = ["NO_EXTRAS", "Extras", "StrategyModel"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Extras:
    """Per-strategy values (settings or view facts) by strategy name: hashable, so settings
    and views stay comparable and shareable."""

    items: tuple[tuple[str, Hashable], ...] = ()

    def get(self, name: str) -> Hashable | None:
        """The value strategy ``name`` keeps here, or None."""
        for key, value in self.items:
            if key == name:
                return value
        return None

    def of(self, name: str, kind: type[T], default: T) -> T:
        """The value strategy ``name`` keeps here as ``kind``, else ``default`` (not
        registered with the model, or nothing to keep)."""
        value = self.get(name)
        return value if isinstance(value, kind) else default


NO_EXTRAS = Extras()


@dataclass(frozen=True, slots=True)
class StrategyModel:
    """What one strategy adds to the model (see the module's documentation)."""

    name: str
    doc: str = ""
    """What it does, for the documentation of ``kube-nudge.io/strategy``."""
    annotations: tuple[Annotation, ...] = ()
    settings: Callable[..., Hashable] | None = None
    """Called with the parsed values of its workload annotations, by field."""
    view: Callable[[Mapping[str, Any], WorkloadSettings], Hashable | None] | None = None
    """From a workload's metadata annotations and settings: its view extras, or None."""
    hold: Callable[[WorkloadView, Assessment, WorkloadMemory], Hold | None] | None = None
    """Called for workloads using it once the config is complete: a hold, or None."""
    hold_reasons: tuple[str, ...] = ()
    """Every ``Hold.reason`` the strategy gives (from ``hold`` or its own writes), beside the
    model's ``HOLD_REASONS``: the metrics export each at 0 from the start."""
    status: Callable[[WorkloadView, int], tuple[str, str] | None] | None = None
    """For an adopted workload using it whose hash matches, and how many pods run another
    config: its state and detail, or None."""
    rolls_back: bool = False
    """It keeps earlier configs, so ``kube-nudge.io/on-failure: rollback`` is valid with it."""
    stand_ins: str = ""
    """Set when its templates name stand-ins in place of sources: the pod-template
    annotation (one of its ``annotations``) recording which stands for which source
    (``model.standins``). The projection reads it on every workload, whichever strategy it
    uses now: what a template consumes are the sources behind its stand-ins. For its own
    workloads, sources a template names directly are to be pointed back at their stand-ins."""
    rolled_to: str = ""
    """With ``stand_ins``: the workload-metadata annotation (one of its ``annotations``)
    recording the hash it last rolled to, as an undo brings back earlier stand-ins on
    purpose (``WorkloadView.rolled_to``)."""
