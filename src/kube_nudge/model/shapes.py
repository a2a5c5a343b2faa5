"""The data shapes of the model, a leaf: the declaration of one annotation (``Annotation``:
its name, what it goes on, who writes it, its parser, default and one line of
documentation), the settings the declarations are parsed into (``WorkloadSettings``,
``SourceSettings``), the flags' defaults they fall back to (``WorkloadDefaults``), a
strategy's own values kept in them (``Extras``) and the data part of what a strategy adds
to the model (``StrategyShape``).

They refer to each other (a declaration's parser reads the defaults, the defaults hold the
strategies' shapes, a shape holds declarations), so they share this module, which imports
nothing of the model but the leaves it needs for field types. The table of declarations
is ``model.annotations``, their parsers ``model.annotation_values`` and ``model.parsing``,
the parsing of the settings ``model.settings``; a strategy's decisions ``model.extensions``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeVar

from kube_nudge.model.analysis import AnalysisRef
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.windows import RolloutWindow

__all__ = [
    "DEFAULT_DEBOUNCE",
    "DEFAULT_MAX_ROLLOUTS",
    "DEFAULT_ROLLOUT_WINDOW",
    "DEFAULT_STRATEGY",
    "DEFAULT_STRATEGY_NAMES",
    "NO_EXTRAS",
    "STRATEGY_ROLLOUT",
    "Annotation",
    "By",
    "Extras",
    "On",
    "ParseContext",
    "Parser",
    "SourceSettings",
    "StrategyShape",
    "WorkloadDefaults",
    "WorkloadSettings",
]

T = TypeVar("T")

DEFAULT_DEBOUNCE: Final[float | None] = None
"""``auto``: a short quiet window that extends while changes arrive (model/pacing.py)."""
DEFAULT_MAX_ROLLOUTS: Final = 3
DEFAULT_ROLLOUT_WINDOW: Final = 300.0
STRATEGY_ROLLOUT: Final = "rollout"
DEFAULT_STRATEGY: Final = STRATEGY_ROLLOUT
#: Strategy names the model accepts when no registry is given (the app passes the
#: registry's names, `strategies.registry.strategy_names()`, through
#: `WorkloadDefaults.strategies`).
DEFAULT_STRATEGY_NAMES: Final = (STRATEGY_ROLLOUT,)


# -- One declaration of the annotation contract --------------------------------------------

#: `(annotation name, stripped value) -> value`; raises ValueError with a readable message.
Parser = Callable[[str, str], Any]


class On(StrEnum):
    """The object an annotation (or label) goes on."""

    WORKLOAD = "workload"
    WORKLOAD_METADATA = "workload metadata"
    POD_TEMPLATE = "pod template"
    SOURCE = "ConfigMap/Secret"
    POD = "pods"
    COPY = "copies"
    """ConfigMaps/Secrets a strategy makes as copies of sources."""


class By(StrEnum):
    """Who writes an annotation."""

    USER = "user"
    CONTROLLER = "kube-nudge"
    AGENT = "kube-nudge agent"


@dataclass(frozen=True, slots=True)
class ParseContext:
    """What a parser may need besides the value: the workload's namespace, the flags."""

    namespace: str
    defaults: WorkloadDefaults


@dataclass(frozen=True, slots=True)
class Annotation:
    """One annotation (or label) of the contract, declared once."""

    name: str
    on: On
    by: By
    doc: str
    """One line: what it means."""
    values: str = ""
    """What it accepts, with its range (the table's "Values")."""
    shown_default: str = ""
    """The default as a user reads it (the table's "Default")."""
    field: str | tuple[str, ...] = ""
    """The settings attribute(s) the parsed value goes to; "" for one kube-nudge only writes
    or reads elsewhere. A tuple takes a tuple value, one item per attribute."""
    parse: Parser | None = None
    parse_in: Callable[[ParseContext], Parser] | None = None
    """A parser that needs the namespace or the flags (instead of `parse`)."""
    default: Any = None
    default_from: Callable[[WorkloadDefaults], Any] | None = None
    """The default taken from the flags (instead of `default`)."""
    label: bool = False
    """A label, not an annotation (on copies)."""

    def parser(self, context: ParseContext) -> Parser:
        """The parser of this annotation's value in `context`."""
        if self.parse_in is not None:
            return self.parse_in(context)
        if self.parse is None:
            raise ValueError(f"{self.name} is not parsed into settings")
        return self.parse

    def default_in(self, context: ParseContext) -> Any:
        """The value an unset or invalid annotation stands for in `context`."""
        if self.default_from is not None:
            return self.default_from(context.defaults)
        return self.default


# -- A strategy's values, and what it adds to parsing --------------------------------------


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
class StrategyShape:
    """The data part of what one strategy adds to the model: what parsing and projecting a
    workload need of it (``model.extensions.StrategyModel`` adds the decisions)."""

    name: str
    doc: str = ""
    """What it does, for the documentation of ``kube-nudge.io/strategy``."""
    annotations: tuple[Annotation, ...] = ()
    settings: Callable[..., Hashable] | None = None
    """Called with the parsed values of its workload annotations, by field."""
    view: (
        Callable[[Mapping[str, Any], WorkloadSettings, Mapping[str, Any] | None], Hashable | None]
        | None
    ) = None
    """From a workload's metadata annotations, settings and pod spec (None: it has no
    template of its own): its view extras, or None. Keep little: every cached view holds
    what it returns."""
    hold_reasons: tuple[str, ...] = ()
    """Every ``Hold.reason`` the strategy gives (from its ``hold`` or its own writes), beside
    the model's ``HOLD_REASONS``: the metrics export each at 0 from the start."""
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


# -- What the declarations are parsed into ------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadSettings:
    """What a workload's annotations ask of the controller (`WORKLOAD_ANNOTATIONS` name
    the field each fills)."""

    enabled: bool
    extra: tuple[SourceRef, ...]
    """Sources named by annotation, sorted: consumed whole and not optional."""
    exclude: frozenset[SourceRef]
    debounce: float | None
    """Seconds to wait for further changes before rolling (a fixed window from the first);
    None: ``auto``, a quiet window that extends while changes arrive (model/pacing.py)."""
    max_rollouts: int
    rollout_window: float
    """At most `max_rollouts` rollouts per `rollout_window` seconds."""
    strategy: str
    roll_stale_on_adoption: bool = True
    """`kube-nudge.io/adopt`: roll at first sight when the pods started before the config
    they consume last changed (`roll-stale`, the default), or never (`never-roll`)."""
    only_kinds: frozenset[SourceKind] | None = None
    """With --compat (Reloader's per-type auto): only sources of these kinds count."""
    only_named: frozenset[SourceRef] | None = None
    """With --compat (Reloader's reload lists): only these sources count."""
    only_matched: bool = False
    """With --compat (Reloader's search): only sources with Reloader's `match` count."""
    rollout_order: int | None = None
    """`kube-nudge.io/rollout-order`; None: not ordered (neither waits nor is waited for)."""
    progress_deadline: float | None = None
    """`kube-nudge.io/progress-deadline` in seconds; None: the workload's own, or 10 min."""
    approval_required: bool = False
    rollback_on_failure: bool = False
    window: RolloutWindow | None = None
    """`kube-nudge.io/rollout-window`: changes roll only while it is open."""
    analysis: AnalysisRef | None = None
    """`kube-nudge.io/analysis`: the template whose metrics judge a completed rollout."""
    extras: Extras = NO_EXTRAS
    """What the registered strategies parsed of their own annotations, by strategy name
    (each reads its own with an accessor of its package, through `Extras.of`)."""


@dataclass(frozen=True, slots=True)
class WorkloadDefaults:
    """Controller-wide defaults (from flags) that a workload's annotations override, and
    the strategy names that exist. Passed in once; nothing re-reads raw annotations later."""

    debounce: float | None = DEFAULT_DEBOUNCE
    max_rollouts: int = DEFAULT_MAX_ROLLOUTS
    rollout_window: float = DEFAULT_ROLLOUT_WINDOW
    strategy: str = DEFAULT_STRATEGY
    strategies: tuple[str, ...] = field(default=DEFAULT_STRATEGY_NAMES)
    compat: bool = False
    """Also opt in workloads annotated for Wave or Reloader."""
    csi_secrets: bool = False
    """Count the SecretProviderClasses of Secrets Store CSI volumes as sources (--csi-secrets);
    off, a template's CSI volumes consume nothing, as before."""
    extensions: tuple[StrategyShape, ...] = ()
    """What the registered strategies add to the model (each a `model.extensions.StrategyModel`),
    default first."""


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """What a ConfigMap's or Secret's annotations ask of the controller."""

    ignore: bool
    share_with: frozenset[str]
    """Namespaces whose workloads may name this source; `*` means all."""
    matched: bool = False
    """With --compat: Reloader's `match` annotation (counts for `search` workloads)."""
    pod_selector: str | None = None
    """`kube-nudge.io/pod-selector`: the pods to replace when the data changes; None: none."""
