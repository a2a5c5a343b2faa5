"""The annotation contract: every annotation kube-nudge reads or writes, declared once as
data in `ANNOTATIONS` (name, what it goes on, who writes it, parser, default, range, one
line of documentation), with the name constants the declarations make and the values some
of them choose between.

Adding an annotation a user sets on a workload takes its declaration below (which also
makes its name constant) and the field of `WorkloadSettings` it fills; the annotation table
(`tools/readme_annotations.py`) and `kube-nudge annotations` follow from the declaration.
The shapes (`Annotation`, the settings, `WorkloadDefaults`) are `model.shapes`, a leaf,
re-exported here with what they are parsed from. The parsers of one annotation each and
their limits are `model.annotation_values`, those several share `model.parsing`; the
parsing of a workload's and a source's settings by these declarations is `model.settings`;
the formats of kube-nudge's records on a workload (`rolled-at`, `failed`) are
`model.records`.
"""

from __future__ import annotations

from typing import Final

from kube_nudge.model import compat
from kube_nudge.model.analysis import TEMPLATE_KINDS, parse_analysis_ref
from kube_nudge.model.annotation_values import (
    MAX_DEBOUNCE,
    MAX_MAX_ROLLOUTS,
    MAX_ROLLOUT_ORDER,
    MAX_ROLLOUT_WINDOW,
    MIN_ROLLOUT_WINDOW,
    SHARE_ALL,
    go_duration,
    parse_debounce,
    parse_exclude,
    parse_max_rollouts,
    parse_order,
    parse_share_with,
    parse_sources,
    parse_strategy,
)
from kube_nudge.model.parsing import duration_between, one_of, parse_bool
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.selectors import check_label_selector
from kube_nudge.model.shapes import (
    DEFAULT_DEBOUNCE,
    DEFAULT_MAX_ROLLOUTS,
    DEFAULT_ROLLOUT_WINDOW,
    DEFAULT_STRATEGY,
    DEFAULT_STRATEGY_NAMES,
    STRATEGY_ROLLOUT,
    Annotation,
    By,
    On,
    SourceSettings,
    WorkloadDefaults,
    WorkloadSettings,
)
from kube_nudge.model.windows import parse_window

# The annotation and label names (ENABLED, DEBOUNCE, ...) are module constants too, made by
# their declarations below; `ANNOTATIONS` lists them all.
__all__ = [
    "ANALYSIS",
    "ANALYSIS_RUN",
    "ANNOTATIONS",
    "DEFAULT_DEBOUNCE",
    "DEFAULT_MAX_ROLLOUTS",
    "DEFAULT_ROLLOUT_WINDOW",
    "DEFAULT_STRATEGY",
    "DEFAULT_STRATEGY_NAMES",
    "ON_FAILURE_ROLLBACK",
    "PREFIX",
    "SOURCE_ANNOTATIONS",
    "WORKLOAD_ANNOTATIONS",
    "Annotation",
    "By",
    "On",
    "SourceSettings",
    "WorkloadDefaults",
    "WorkloadSettings",
]

PREFIX: Final = "kube-nudge.io/"

MIN_PROGRESS_DEADLINE: Final = 1.0
MAX_PROGRESS_DEADLINE: Final = 86400.0
ADOPT_ROLL_STALE: Final = "roll-stale"
ADOPT_NEVER_ROLL: Final = "never-roll"
APPROVAL_REQUIRED: Final = "required"
ON_FAILURE_HOLD: Final = "hold"
ON_FAILURE_ROLLBACK: Final = "rollback"
COMPAT_WAVE: Final = compat.WAVE_ON  # opt-ins honoured with --compat (see model/compat.py)
COMPAT_RELOADER: Final = compat.AUTO

_NO_REFS: frozenset[SourceRef] = frozenset()
_NO_NAMESPACES: frozenset[str] = frozenset()

_go = go_duration


# -- The contract: every annotation, declared once (the annotation table has this order; a
# workload's error messages come in it)

_DECLARED: list[Annotation] = []


def _declare(annotation: Annotation) -> str:
    """Add `annotation` to the contract; its name (for the module constant)."""
    _DECLARED.append(annotation)
    return annotation.name


_BOOLEAN: Final = "true or false"

# A table: one declaration a paragraph, its fields as dense as the table row they make.
# fmt: off

# Set by users on the workload.
ENABLED: Final = _declare(Annotation(
    PREFIX + "enabled", On.WORKLOAD, By.USER,
    "opt in; every ConfigMap/Secret the pod template uses is discovered",
    values=_BOOLEAN, shown_default="false", field="enabled", parse=parse_bool,
))
CONFIGMAPS: Final = _declare(Annotation(
    PREFIX + "configmaps", On.WORKLOAD, By.USER,
    "also consume these ConfigMaps (all keys), e.g. for apps reading them through the API",
    values="names, comma-separated; ns/name for another namespace (see share-with)",
    shown_default="none", field="configmaps",
    parse_in=parse_sources(SourceKind.CONFIGMAP), default=(),
))
SECRETS: Final = _declare(Annotation(
    PREFIX + "secrets", On.WORKLOAD, By.USER, "the same for Secrets",
    values="names, comma-separated; ns/name for another namespace (see share-with)",
    shown_default="none", field="secrets",
    parse_in=parse_sources(SourceKind.SECRET), default=(),
))
EXCLUDE: Final = _declare(Annotation(
    PREFIX + "exclude", On.WORKLOAD, By.USER, "never roll for these sources",
    values="configmap/NAME or secret/NAME, comma-separated; NAME may be ns/name",
    shown_default="none", field="exclude", parse_in=parse_exclude, default=_NO_REFS,
))
DEBOUNCE: Final = _declare(Annotation(
    PREFIX + "debounce", On.WORKLOAD, By.USER,
    "how long a change waits for further changes before rolling: auto waits until the "
    "workload's sources were quiet for 50 ms (1 s after client-side kubectl apply), at most "
    "2 s; a duration is a fixed window from the first change; 0 rolls at once",
    values=f"auto, or a duration from 0s to {_go(MAX_DEBOUNCE)}",
    shown_default="auto (--debounce)", field="debounce",
    parse=parse_debounce, default_from=lambda defaults: defaults.debounce,
))
MAX_ROLLOUTS: Final = _declare(Annotation(
    PREFIX + "max-rollouts", On.WORKLOAD, By.USER,
    "flap cap: at most N rollouts per window; beyond it the workload is held",
    values=f"N/WINDOW: N from 1 to {MAX_MAX_ROLLOUTS}, a window from "
    f"{_go(MIN_ROLLOUT_WINDOW)} to {_go(MAX_ROLLOUT_WINDOW)}",
    shown_default=f"{DEFAULT_MAX_ROLLOUTS}/{_go(DEFAULT_ROLLOUT_WINDOW)} (--max-rollouts)",
    field=("max_rollouts", "rollout_window"), parse=parse_max_rollouts,
    default_from=lambda defaults: (defaults.max_rollouts, defaults.rollout_window),
))
STRATEGY: Final = _declare(Annotation(
    PREFIX + "strategy", On.WORKLOAD, By.USER,
    # The registry's contract adds each registered strategy's name and words to these.
    "how to apply a change: rollout writes the hash on the pod template",
    values=STRATEGY_ROLLOUT,
    shown_default=f"{DEFAULT_STRATEGY} (--strategy)", field="strategy",
    parse_in=parse_strategy, default_from=lambda defaults: defaults.strategy,
))
ADOPT: Final = _declare(Annotation(
    PREFIX + "adopt", On.WORKLOAD, By.USER,
    "at first sight, roll pods that started before their config last changed, or never",
    values=f"{ADOPT_ROLL_STALE} or {ADOPT_NEVER_ROLL}", shown_default=ADOPT_ROLL_STALE,
    field="roll_stale_on_adoption",
    parse=one_of({ADOPT_ROLL_STALE: True, ADOPT_NEVER_ROLL: False}), default=True,
))
ROLLOUT_ORDER: Final = _declare(Annotation(
    PREFIX + "rollout-order", On.WORKLOAD, By.USER,
    "for one source change, lower orders roll first; a higher order starts only when every "
    "lower-order consumer of the same changed source completed healthy",
    values=f"0 to {MAX_ROLLOUT_ORDER}", shown_default="unset: not ordered",
    field="rollout_order", parse=parse_order,
))
PROGRESS_DEADLINE: Final = _declare(Annotation(
    PREFIX + "progress-deadline", On.WORKLOAD, By.USER,
    "how long a rollout may take before kube-nudge calls it failed",
    values=f"a duration from {_go(MIN_PROGRESS_DEADLINE)} to {_go(MAX_PROGRESS_DEADLINE)}",
    shown_default="the Deployment's progressDeadlineSeconds, else 10m",
    field="progress_deadline",
    parse=duration_between(MIN_PROGRESS_DEADLINE, MAX_PROGRESS_DEADLINE, "1s and 24h", "10m"),
))
APPROVAL: Final = _declare(Annotation(
    PREFIX + "approval", On.WORKLOAD, By.USER,
    "required: a change waits for kube-nudge approve before rolling",
    values=f"{APPROVAL_REQUIRED} or none", shown_default="none", field="approval_required",
    parse=one_of({APPROVAL_REQUIRED: True, "none": False}), default=False,
))
ROLLOUT_WINDOW: Final = _declare(Annotation(
    PREFIX + "rollout-window", On.WORKLOAD, By.USER,
    "changes roll only while the window is open",
    values="[DAYS] HH:MM-HH:MM[; ...] [ZONE], e.g. Mon-Fri 09:00-17:00 Europe/Berlin",
    shown_default="always open", field="window", parse=parse_window,
))
ON_FAILURE: Final = _declare(Annotation(
    PREFIX + "on-failure", On.WORKLOAD, By.USER,
    "when a rollout fails: hold (stop the line) or rollback (strategies that keep earlier "
    "configs only: back to the previous revision's copies)",
    values=f"{ON_FAILURE_HOLD} or {ON_FAILURE_ROLLBACK}", shown_default=ON_FAILURE_HOLD,
    field="rollback_on_failure",
    parse=one_of({ON_FAILURE_HOLD: False, ON_FAILURE_ROLLBACK: True}), default=False,
))
ANALYSIS: Final = _declare(Annotation(
    PREFIX + "analysis", On.WORKLOAD, By.USER,
    "after its rollout of a change completes, the metrics of this analysis template are "
    "measured; the rollout counts as complete (for the next rollout-order, RolloutComplete) "
    "only once they pass, and as failed when they fail",
    values=f"NAME (kube-nudge's AnalysisTemplate), or {TEMPLATE_KINDS[1]}/NAME or "
    f"{TEMPLATE_KINDS[2]}/NAME (Argo Rollouts')",
    shown_default="none: judged by readiness only", field="analysis",
    parse=parse_analysis_ref,
))
APPROVED_AT: Final = _declare(Annotation(
    PREFIX + "approved-at", On.WORKLOAD_METADATA, By.USER,
    "written by kube-nudge approve KIND/NAME: changes of the data made before it (or in the "
    "same whole second) are approved",
    values="Unix seconds",
))
RELEASED_AT: Final = _declare(Annotation(
    PREFIX + "released-at", On.WORKLOAD_METADATA, By.USER,
    "written by kube-nudge release KIND/NAME: the flap cap counts only rollouts after it, "
    "so a held workload rolls its latest config now",
    values="Unix seconds",
))

# Set by users on a ConfigMap or Secret.
IGNORE: Final = _declare(Annotation(
    PREFIX + "ignore", On.SOURCE, By.USER,
    "changes to it never trigger anything (it is left out of every hash, so adding or "
    "removing this annotation is itself one change)",
    values=_BOOLEAN, shown_default="false", field="ignore", parse=parse_bool,
))
SHARE_WITH: Final = _declare(Annotation(
    PREFIX + "share-with", On.SOURCE, By.USER,
    "namespaces whose workloads may name it in configmaps/secrets",
    values=f"namespaces, comma-separated; {SHARE_ALL} for all",
    shown_default="its own namespace only", field="share_with", parse=parse_share_with,
    default=_NO_NAMESPACES,
))
POD_SELECTOR: Final = _declare(Annotation(
    PREFIX + "pod-selector", On.SOURCE, By.USER,
    "when its data changes, evict the matching pods of its namespace that started before "
    "the change (PodDisruptionBudgets respected); no workload annotation needed",
    values="a label selector, e.g. app=web", shown_default="none", field="pod_selector",
    parse=check_label_selector,
))

# Written by the controller.
ANALYSIS_RUN: Final = _declare(Annotation(
    PREFIX + "analysis-run", On.WORKLOAD_METADATA, By.CONTROLLER,
    "the analysis of the config last rolled: when it started, what each metric measured and "
    "counted, and its verdict (a restarted controller goes on from it)",
    values="JSON",
))
CONFIG_HASH: Final = _declare(Annotation(
    PREFIX + "config-hash", On.POD_TEMPLATE, By.CONTROLLER,
    "the hash of the consumed config the pods run; writing it rolls the workload",
))
#: Adoption never touches the pod template, so opting in (or migrating hundreds of workloads
#: with --compat) restarts nothing; the first rollout removes it.
BASELINE_HASH: Final = _declare(Annotation(
    PREFIX + "baseline-hash", On.WORKLOAD_METADATA, By.CONTROLLER,
    "on adoption: the hash of the config the pods already run; removed when the template "
    "first gets its hash",
))
#: The flap cap reads it, so a restart or a new leader does not forget how often a
#: flapping config has already rolled the workload.
ROLLED_AT: Final = _declare(Annotation(
    PREFIX + "rolled-at", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each rollout: the recent rollout times, for the flap cap",
    values="Unix seconds, comma-separated, oldest first",
))
#: A workload whose hashes were made under another key (the key Secret was lost or
#: replaced) is re-baselined, not rolled: its hash changed, its config did not.
KEY_ID: Final = _declare(Annotation(
    PREFIX + "key-id", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each adoption and rollout: which installation key made the recorded hashes "
    "(reveals nothing about the key)",
    values="8 hex digits of an HMAC under the key",
))
#: Kept on the workload so that a restart or a new leader still stops the line (and
#: notifies once).
FAILED: Final = _declare(Annotation(
    PREFIX + "failed", On.WORKLOAD_METADATA, By.CONTROLLER,
    "when a rollout fails, so a restart or a new leader keeps the line stopped and "
    "announces nothing twice",
    values="HASH@UNIX_SECONDS",
))
#: Copied by the Deployment controller onto the new ReplicaSet, where
#: `kubectl rollout history` shows it in its CHANGE-CAUSE column.
CHANGE_CAUSE: Final = _declare(Annotation(
    "kubernetes.io/change-cause", On.WORKLOAD_METADATA, By.CONTROLLER,
    "with each rollout: why, so kubectl rollout history shows it",
    values="e.g. kube-nudge: secret/db keys [password] changed",
))

# fmt: on

#: Every annotation and label of the contract, in the order of the annotation table.
ANNOTATIONS: Final = tuple(_DECLARED)
#: What `settings.parse_workload` reads, in the order its messages come.
WORKLOAD_ANNOTATIONS: Final = tuple(a for a in ANNOTATIONS if a.on is On.WORKLOAD and a.field)
#: What `settings.parse_source` reads.
SOURCE_ANNOTATIONS: Final = tuple(a for a in ANNOTATIONS if a.on is On.SOURCE and a.field)
