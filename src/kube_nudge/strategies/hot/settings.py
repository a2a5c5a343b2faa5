"""What strategy ``hot`` adds to the model (handed down through ``StrategyModel``): its
annotations, declared once here: ``kube-nudge.io/hot-fallback`` and
``kube-nudge.io/hot-deadline``, parsed by the model's loop into ``HotSettings``; the change it
is delivering in place, kept of a workload's ``kube-nudge.io/hot-reload`` (``hot_reload``),
and whether its pod template runs the reload agent (``hot_agent``); what the pods' reload
agents write (the names of their wire protocol, ``agentwire``); and
the state ``kube-nudge status`` gives a workload while its pods confirm it (``reloading``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kube_nudge.agentwire import LOADED_AT, LOADED_HASH, RELOAD_FAILED_AT
from kube_nudge.model.annotation_values import go_duration
from kube_nudge.model.annotations import PREFIX
from kube_nudge.model.decide import Apply, Assessment
from kube_nudge.model.extensions import Delivery, StrategyModel
from kube_nudge.model.parsing import duration_between, one_of
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.records import parse_hash_at
from kube_nudge.model.shapes import Annotation, By, On, WorkloadSettings
from kube_nudge.strategies.hot.verdicts import delivery, runs_agent

__all__ = [
    "DEFAULT_HOT_DEADLINE",
    "HOT_ANNOTATIONS",
    "HOT_DEADLINE",
    "HOT_FALLBACK",
    "HOT_MODEL",
    "HOT_RELOAD",
    "HotSettings",
    "HotView",
    "hot_agent",
    "hot_reload",
    "hot_settings",
]

NAME: Final = "hot"
DEFAULT_HOT_DEADLINE: Final = 120.0
MIN_HOT_DEADLINE: Final = 5.0
MAX_HOT_DEADLINE: Final = 3600.0
HOT_FALLBACK_ROLLOUT: Final = "rollout"
HOT_FALLBACK_WARN: Final = "warn"


@dataclass(frozen=True, slots=True)
class HotSettings:
    """What a workload's annotations ask of strategy ``hot``."""

    fallback_rollout: bool = True
    """Roll when a hot change isn't reloaded in time (else only warn)."""
    deadline: float = DEFAULT_HOT_DEADLINE
    """Seconds the pods have to report reloading a hot change."""


_DEFAULT = HotSettings()

# A table: one declaration a paragraph, as dense as the table row it makes.
# fmt: off
_FALLBACK = Annotation(
    PREFIX + "hot-fallback", On.WORKLOAD, By.USER,
    "strategy hot: when a pod reports a failed reload or stays silent past the deadline, "
    "roll the workload or only warn",
    values=f"{HOT_FALLBACK_ROLLOUT} or {HOT_FALLBACK_WARN}", shown_default=HOT_FALLBACK_ROLLOUT,
    field="fallback_rollout",
    parse=one_of({HOT_FALLBACK_ROLLOUT: True, HOT_FALLBACK_WARN: False}), default=True,
)
_DEADLINE = Annotation(
    PREFIX + "hot-deadline", On.WORKLOAD, By.USER,
    "strategy hot: how long the pods' agents have to report the reload",
    values=f"a duration from {go_duration(MIN_HOT_DEADLINE)} to {go_duration(MAX_HOT_DEADLINE)}",
    shown_default=go_duration(DEFAULT_HOT_DEADLINE), field="deadline",
    parse=duration_between(MIN_HOT_DEADLINE, MAX_HOT_DEADLINE, "5s and 1h", "2m"),
    default=DEFAULT_HOT_DEADLINE,
)
#: Removed once every pod reloaded it, or by the fallback (and by any rollout). The time is
#: when the change was delivered: a reload at or after it counts.
_RELOAD = Annotation(
    PREFIX + "hot-reload", On.WORKLOAD_METADATA, By.CONTROLLER,
    "strategy hot: a change delivered in place; on the workload until every pod confirmed "
    "it (or the fallback), on each pod as the nudge that makes its kubelet refresh volumes",
    values="HASH@UNIX_SECONDS",
)
# Written on pods by the `kube-nudge agent` sidecar (the names of its wire protocol, which
# the agent shares: `kube_nudge.agentwire`).
_AGENT_ANNOTATIONS = (
    Annotation(
        LOADED_AT, On.POD, By.AGENT, "when the app last reloaded successfully",
        values="Unix seconds",
    ),
    Annotation(
        LOADED_HASH, On.POD, By.AGENT,
        "what the app last reloaded: the files' hash under the agents' key, which strategy "
        "hot compares with the change it delivered",
        values="JSON",
    ),
    Annotation(
        RELOAD_FAILED_AT, On.POD, By.AGENT,
        "when a reload last failed (validation, signal or HTTP call)",
        values="Unix seconds",
    ),
)
# fmt: on
HOT_FALLBACK: Final = _FALLBACK.name
HOT_DEADLINE: Final = _DEADLINE.name
HOT_RELOAD: Final = _RELOAD.name
#: Its annotations users set on a workload, in the order of the annotation table.
HOT_ANNOTATIONS: Final = (_FALLBACK, _DEADLINE)


def hot_settings(settings: WorkloadSettings) -> HotSettings:
    """What ``settings`` ask of strategy ``hot`` (the defaults if it was not parsed)."""
    return settings.extras.of(NAME, HotSettings, _DEFAULT)


@dataclass(frozen=True, slots=True)
class HotView:
    """What strategy ``hot`` keeps of a workload (``WorkloadView.extras``): only when there
    is something to keep, so most views keep nothing."""

    reload: tuple[str, float] | None = None
    """(config hash, when delivered) of ``kube-nudge.io/hot-reload``."""
    agentless: bool = False
    """A workload using strategy ``hot`` whose pod template runs no reload agent."""


_NO_VIEW = HotView()


def hot_reload(view: WorkloadView) -> tuple[str, float] | None:
    """(config hash, when delivered) of a change delivered without a rollout that the pods
    have not all confirmed yet (``kube-nudge.io/hot-reload``), or None."""
    return view.extras.of(NAME, HotView, _NO_VIEW).reload


def hot_agent(view: WorkloadView) -> bool:
    """Whether ``view``'s pod template runs the reload agent (``verdicts.runs_agent``); True
    when it has no template of its own to tell."""
    return not view.extras.of(NAME, HotView, _NO_VIEW).agentless


def _view(
    annotations: Mapping[str, Any],
    settings: WorkloadSettings,
    pod_spec: Mapping[str, Any] | None,
) -> HotView | None:
    reload = parse_hash_at(annotations.get(HOT_RELOAD))
    agentless = settings.strategy == NAME and pod_spec is not None and not runs_agent(pod_spec)
    return HotView(reload, agentless) if reload is not None or agentless else None


def _delivery(view: WorkloadView, plan: Apply, assessment: Assessment) -> Delivery:
    """``verdicts.delivery`` with what ``view`` says of its agent and its fallback."""
    fallback = hot_settings(view.settings).fallback_rollout
    return delivery(view, plan, assessment, agent=hot_agent(view), fallback_rollout=fallback)


def _status(view: WorkloadView, running_other: int) -> tuple[str, str] | None:
    """``reloading`` while the pods confirm the change delivered in place."""
    delivered = hot_reload(view)
    if delivered is None or delivered[0] != view.applied_hash:
        return None
    return "reloading", (
        f"reloading {view.applied_hash} in place (strategy hot); {running_other} pod(s) "
        "have not confirmed it yet"
    )


HOT_MODEL: Final = StrategyModel(
    NAME,
    doc="hot reloads in place what refreshed volumes carry and rolls for the rest",
    annotations=(*HOT_ANNOTATIONS, _RELOAD, *_AGENT_ANNOTATIONS),
    settings=HotSettings,
    view=_view,
    status=_status,
    delivery=_delivery,
)
