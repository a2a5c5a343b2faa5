"""What the controller is told to watch and how hard to work (from ``kube-nudge run``'s
flags, validated there)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, WorkloadSpec
from kube_nudge.model import WorkloadDefaults
from kube_nudge.model.analysis import DEFAULT_ERROR_INTERVAL
from kube_nudge.model.pacing import DEFAULT_QUIET_WINDOW
from kube_nudge.runtime.prometheus import PrometheusAccess
from kube_nudge.strategies.registry import product_defaults

__all__ = ["ControllerOptions"]


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    """What to watch and how hard to work."""

    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    kinds: tuple[WorkloadKind, ...] = BUILTIN_KINDS
    # --workload kinds the API server did not serve at start: retried, watched once served.
    pending_kinds: tuple[WorkloadSpec, ...] = ()
    defaults: WorkloadDefaults = field(default_factory=product_defaults)
    workers: int = 64
    source_selector: str | None = None
    workload_selector: str | None = None
    page_size: int = 500
    # Watchdog: re-list when a watch brings no byte (not even a bookmark) for this long.
    watch_inactivity: float = 90.0
    # Rollouts in progress at once, cluster-wide (None: no limit).
    max_concurrent_rollouts: int | None = None
    # The quiet window of `debounce: auto` for writers not known to be slower (pacing.py).
    quiet_window: float = DEFAULT_QUIET_WINDOW
    # The Prometheus servers analyses may query (--prometheus-url; None: analysis is off).
    prometheus: PrometheusAccess | None = None
    # Also read Argo Rollouts' AnalysisTemplates (and, cluster-wide, ClusterAnalysisTemplates)
    # once the API serves them (--argo-analysis-templates).
    argo_analysis_templates: bool = False
    # Seconds before a measurement that errored is tried again (--analysis-error-interval).
    analysis_error_interval: float = DEFAULT_ERROR_INTERVAL
    # A label every series selector of an analysis query must set to the workload's namespace
    # (--analysis-namespace-label; None: queries may read any series).
    analysis_namespace_label: str | None = None
