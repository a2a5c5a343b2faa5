"""What strategy ``snapshot`` adds to the model (handed down through ``StrategyModel``): its
annotations in the contract (which copy stands for which source on a template, the hash it
last rolled a workload to, the labels of its copies), that its templates name stand-ins
(the copies), that it can roll back, and the hold of a workload someone rolled back to
earlier copies (``kubectl rollout undo``), and how it delivers a change (``kube-nudge plan``
says it rolls onto new copies)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kube_nudge.model.annotations import PREFIX
from kube_nudge.model.decide import Apply, Assessment, Hold
from kube_nudge.model.extensions import Delivery, StrategyModel
from kube_nudge.model.memory import WorkloadMemory
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.shapes import Annotation, By, On
from kube_nudge.model.standins import format_stand_ins, parse_stand_ins
from kube_nudge.strategies.snapshot.copies import COPY_ANNOTATIONS

__all__ = [
    "BASELINE_SNAPSHOTS",
    "NAME",
    "ROLLED_TO",
    "SNAPSHOTS",
    "SNAPSHOT_MODEL",
    "Baseline",
    "annotations_of",
    "baseline_of",
    "format_baseline",
    "parse_baseline",
]

NAME: Final = "snapshot"

# A table: one declaration a paragraph, as dense as the table row it makes.
# fmt: off
#: Which stand-in (an immutable copy) stands for which source in this template,
#: `{"configmap/app-1a2b3c4d5e6f": "app"}`. It travels with every revision, so an undo
#: brings back the copies of its time (see `model.standins`).
_SNAPSHOTS = Annotation(
    PREFIX + "snapshots", On.POD_TEMPLATE, By.CONTROLLER,
    "which copy stands for which source, on a template that names copies",
    values='JSON, e.g. {"configmap/app-1a2b3c4d5e6f":"app"}',
)
#: A template whose own hash differs while this one still equals the desired hash was
#: reverted on purpose (`kubectl rollout undo`): left alone until the config changes again.
_ROLLED_TO = Annotation(
    PREFIX + "rolled-to", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with strategies that name copies: the hash it last rolled to; a template that differs "
    "was reverted on purpose",
)
#: Copies of the config a workload ran when it was adopted, made then without touching its
#: template (opting in restarts nothing): what a failed first change rolls back onto, since
#: the revision before it names the sources themselves, which hold the failed config by then.
_BASELINE_SNAPSHOTS = Annotation(
    PREFIX + "baseline-snapshots", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with strategy snapshot: copies of the config adopted, for rolling back a failed first "
    "change; dropped by the next change after one rolled onto copies",
    values='JSON, e.g. {"hash":"v1-…","copies":{"configmap/app-1a2b3c4d5e6f":"app"}}',
)
# fmt: on
SNAPSHOTS: Final = _SNAPSHOTS.name
ROLLED_TO: Final = _ROLLED_TO.name
BASELINE_SNAPSHOTS: Final = _BASELINE_SNAPSHOTS.name


@dataclass(frozen=True, slots=True)
class Baseline:
    """``kube-nudge.io/baseline-snapshots``: the adopted config's hash, and which copy
    holds each of its sources (stand-in to source, as ``kube-nudge.io/snapshots``)."""

    config_hash: str
    copies: Mapping[tuple[SourceKind, str], str]


def format_baseline(baseline: Baseline) -> str:
    """The annotation's value (compact JSON)."""
    copies = json.loads(format_stand_ins(baseline.copies))
    return json.dumps({"hash": baseline.config_hash, "copies": copies}, separators=(",", ":"))


def parse_baseline(text: object) -> Baseline | None:
    """The annotation read back; None when absent or unreadable (nothing to roll back onto)."""
    if not isinstance(text, str):
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("hash"), str):
        return None
    copies = parse_stand_ins(json.dumps(raw.get("copies")))
    return Baseline(raw["hash"], copies) if copies else None


def baseline_of(workload: Mapping[str, Any]) -> Baseline | None:
    """``workload``'s ``kube-nudge.io/baseline-snapshots`` read back (``parse_baseline``)."""
    return parse_baseline(annotations_of(workload).get(BASELINE_SNAPSHOTS))


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj``'s metadata annotations (empty when it has none)."""
    return (obj.get("metadata") or {}).get("annotations") or {}


def _held_if_rolled_back(
    view: WorkloadView, assessment: Assessment, memory: WorkloadMemory
) -> Hold | None:
    """A template reverted to earlier copies while the config is still the one it was
    rolled away from: held (a restart still knows, from ``kube-nudge.io/rolled-to``)."""
    if view.rolled_back and memory.applied is None and assessment.desired == view.rolled_to:
        return _rolled_back(view)
    return None


def _rolled_back(view: WorkloadView) -> Hold:
    """Someone reverted the template to an earlier snapshot (kubectl rollout undo): a
    deliberate choice, surfaced and left alone until the config changes again."""
    if view.failed is not None and view.failed[0] == view.rolled_to:
        return Hold(
            "rolled-back",
            "ConfigRolledBack",
            f"rolled back to an earlier config snapshot ({view.template_hash}) after the "
            f"rollout to {view.rolled_to} failed; kube-nudge does not roll that config "
            "again: the next change of the source rolls",
        )
    return Hold(
        "rolled-back",
        "ConfigRolledBack",
        f"the pod template runs an earlier config snapshot ({view.template_hash}), not "
        f"the latest ({view.rolled_to}): reverted on purpose (kubectl rollout undo?), "
        "so kube-nudge leaves it until the config changes again",
    )


def _delivery(view: WorkloadView, plan: Apply, assessment: Assessment) -> Delivery:
    """It rolls onto new copies of the changed sources its template names (a source named
    only by annotation has none; one that went gets none): what ``apply`` makes."""
    if plan.changes is None:  # which changed is not known: every source gets its copy
        return Delivery("roll", f"rolls onto copies of its sources ({_SNAPSHOT_ROLL})")
    copied = [ref for ref in sorted(plan.changes) if _copied(ref, assessment)]
    if not copied:
        return Delivery("roll", f"its pod template gets the new hash: it rolls ({_SNAPSHOT_ROLL})")
    names = ", ".join(ref.display(view.namespace) for ref in copied)
    return Delivery("roll", f"rolls onto new copies of {names} ({_SNAPSHOT_ROLL})")


_SNAPSHOT_ROLL = (
    "strategy snapshot: its pod template is pointed at immutable copies, so pods of the old "
    "revision keep the config they run"
)


def _copied(ref: SourceRef, assessment: Assessment) -> bool:
    """Whether applying makes a copy of ``ref``: its template names it and it exists."""
    use = assessment.visible.get(ref)
    state = assessment.states.get(ref)
    named = use is not None and any(via != "annotation" for via in use.via)
    return named and state is not None and state.present


SNAPSHOT_MODEL: Final = StrategyModel(
    NAME,
    doc="snapshot rolls onto immutable copies of the config",
    annotations=(_SNAPSHOTS, _ROLLED_TO, _BASELINE_SNAPSHOTS, *COPY_ANNOTATIONS),
    hold=_held_if_rolled_back,
    hold_reasons=("rolled-back", "refused"),
    rolls_back=True,
    stand_ins=SNAPSHOTS,
    rolled_to=ROLLED_TO,
    delivery=_delivery,
)
