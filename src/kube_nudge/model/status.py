"""The state ``kube-nudge status`` gives a workload (pure: the time is passed in).

``classify`` reads the workload's own annotations, the hash it should run (None without the
installation key), and what its pods tell; ``reporting/status.py`` gathers those from the
API. Without the key, only facts that need no key count: a workload is ``current`` only when
every pod was created in a later second than its sources' data last changed, else
``unverified`` (never ``current``, never ``drift``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kube_nudge.model.analysis import AnalysisPhase
from kube_nudge.model.extensions import StrategyModel
from kube_nudge.model.projection import WorkloadView

__all__ = ["DRIFT_STATES", "UNVERIFIED", "PodFacts", "classify"]

#: States that make ``kube-nudge status`` exit with code 1.
DRIFT_STATES = frozenset({"drift", "held", "stale", "rolled-back", "failed"})
#: The state of a workload that can't be verified without what the reader may not read:
#: the installation key (to compare hashes), a source, or its pods.
UNVERIFIED = "unverified"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What a workload's pods tell about the config they run."""

    counts: Mapping[str, int] | None
    """Pod count by the config hash each runs; None when the pods may not be listed."""
    stale: int = 0
    """Pods that started before the data they consume last changed."""
    unproven: int = 0
    """Pods not stale that still don't prove they read the config after its last change."""
    never_refreshed: Sequence[str] = ()
    """Sources whose change no running pod ever sees (env, subPath, init containers)."""


def classify(
    view: WorkloadView,
    desired: str | None,
    missing: tuple[str, ...],
    pods: PodFacts,
    *,
    now: float,
    delivers: bool = True,
    without: str | None = None,
    extensions: Sequence[StrategyModel] = (),
) -> tuple[str, str]:
    """The state and its detail at time ``now``. ``desired``: the hash the workload should
    run (None: the key could not be read, so no hash is compared); ``missing``: what it
    lacks; ``delivers``: False for a strategy that only announces changes; ``without``
    (``get on secret NS/NAME``): what comparing hashes needs when the key could not be
    read; ``extensions``: the registered strategies, asked for states of their own."""
    if not view.settings.enabled:
        return _audited(pods)
    if missing:
        return "held", "missing: " + "; ".join(missing)
    if not delivers:
        strategy = view.settings.strategy
        return "notify-only", f"changes are announced, never rolled (strategy {strategy})"
    if view.applied_hash is None:
        return "not-adopted", "kube-nudge has not seen it yet (is it running and in scope?)"
    if desired is not None and view.applied_hash != desired:
        return "drift", "its config changed and it has not rolled yet" + _waiting(view, now)
    if view.failed is not None and view.failed[0] == view.applied_hash:
        return "failed", (
            f"its rollout to {view.applied_hash} failed (kube-nudge.io/failed); workloads "
            "rolling the same change are held until the source changes or kube-nudge release"
        )
    if (judged := _analysis(view)) is not None:
        return judged
    if view.rolled_back:
        return "rolled-back", (
            "its template was reverted to an earlier config (kubectl rollout undo?); "
            "kube-nudge leaves it until the config changes again"
        )
    if without is not None and (unsure := _unverified(pods, without)) is not None:
        return UNVERIFIED, unsure
    return _running(view, pods, keyless=without is not None, extensions=extensions)


def _analysis(view: WorkloadView) -> tuple[str, str] | None:
    """The state its analysis (``kube-nudge.io/analysis``) of the config it runs gives it,
    or None when that passed, was let go on, or isn't judged."""
    record = view.analysis_run
    if record is None or record.config_hash != view.applied_hash:
        return None
    phase = record.phase
    if phase is None:
        if record.started is None:
            return "rolling", "its analysis starts once its rollout completes"
        measured = "; ".join(
            f"{name} last measured {state.last.value} ({state.taken} measured)"
            for name, state in sorted(record.metrics.items())
            if state.last is not None
        )
        return "rolling", "its rollout completed; its analysis is running" + (
            f": {measured}" if measured else ""
        )
    if phase is AnalysisPhase.FAILED:
        return "failed", f"its analysis failed: {record.verdict}"
    if record.lets_line_go_on(view.released_at):
        return None
    return "held", (
        f"its analysis ended {phase.value}: {record.verdict}; the line waits for a person "
        "(kube-nudge release lets it go on)"
    )


def _audited(pods: PodFacts) -> tuple[str, str]:
    """The state of a workload that never opted in: stale pods or not."""
    if pods.counts is None:
        return UNVERIFIED, "cannot verify: its pods may not be listed here"
    if pods.stale:
        why = f"{pods.stale} pod(s) started before their config last changed"
        if pods.never_refreshed:
            names = ", ".join(sorted(pods.never_refreshed))
            why += f"; certainly stale (env, subPath or init container): {names}"
        return "stale", why
    return "current", "pods started after their config last changed"


def _running(
    view: WorkloadView, pods: PodFacts, *, keyless: bool, extensions: Sequence[StrategyModel]
) -> tuple[str, str]:
    """The state of an adopted workload whose hash matches: what its pods run (first, a
    state a strategy gives it, such as a change it is delivering in place)."""
    counts = pods.counts or {}
    running_other = sum(n for h, n in counts.items() if h != view.applied_hash)
    for extension in extensions:
        if extension.status is not None and (own := extension.status(view, running_other)):
            return own
    if view.template_hash is not None and running_other:
        return "rolling", f"{running_other} pod(s) still run an older config"
    if view.template_hash is None and pods.stale:
        return "stale", f"{pods.stale} pod(s) started before their config last changed"
    if keyless:
        return "current", (
            "every pod was created after its config last changed (checked without "
            "the key, from pod start times)"
        )
    return "current", "pods run the config in the cluster"


def _unverified(pods: PodFacts, without: str) -> str | None:
    """Why a workload can't be verified without the key, or None when its pods tell: each
    read its config (or will, not started yet) in a later second than its last change."""
    needs = f"comparing its hash needs {without}"
    if pods.counts is None:
        return f"cannot verify: its pods may not be listed here, and {needs}"
    if not pods.counts:
        return f"cannot verify: no pod tells which config it runs, and {needs}"
    if pods.stale:
        return (
            f"cannot verify: {pods.stale} pod(s) started before its config last changed (a "
            f"change of keys it doesn't read counts too); {needs}"
        )
    if pods.unproven:
        return (
            f"cannot verify: {pods.unproven} pod(s) created in the second of its config's last "
            f"change or before it (a reload by its agent doesn't tell which data it read); "
            f"{needs}"
        )
    return None


def _waiting(view: WorkloadView, now: float) -> str:
    """What a drifting workload may be waiting for at ``now``, as far as its own
    annotations tell (the controller's Events say which gate holds it)."""
    reasons = []
    if view.settings.approval_required:
        reasons.append("approval (kube-nudge.io/approval: required; kube-nudge approve)")
    window = view.settings.window
    if window is not None and not window.is_open(now):
        opens = window.next_open(now)
        at = f", opening at {window.describe_time(opens)}" if math.isfinite(opens) else ""
        reasons.append(f"its rollout window ({window.describe()}{at})")
    if view.settings.rollout_order is not None:
        order = view.settings.rollout_order
        reasons.append(f"lower rollout orders (kube-nudge.io/rollout-order: {order})")
    return f"; it may wait for {' and '.join(reasons)}" if reasons else ""
