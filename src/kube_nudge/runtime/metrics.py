"""Prometheus instruments of the controller, each set in its own registry.

Label values are only kinds, reasons, stages and resource names, never object names or
values, so the series count stays bounded and nothing sensitive is exported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import (
    CONTENT_TYPE_PLAIN_0_0_4,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from kube_nudge.kube.informer import RESTART_REASONS
from kube_nudge.model.decide import HOLD_REASONS

ERROR_STAGES = ("reconcile", "write", "event", "watch", "replace", "audit")
EVICTION_OUTCOMES = ("evicted", "blocked")
ROLLOUT_OUTCOMES = ("complete", "failed")
#: The phases an analysis measurement or verdict can have (model/analysis.py).
ANALYSIS_PHASES = ("Successful", "Failed", "Inconclusive", "Error")
#: A workload's state after a pass besides ``held-<reason>`` (one per hold reason).
WORKLOAD_STATES = ("current", "applied", "failed")
RECONCILE_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Instrument:
    """One metric, declared: the ``Metrics`` attribute that holds it, its type, name, help
    and labels, and the values of its one label known before any event (``seed``)."""

    attribute: str
    make: type[Counter] | type[Gauge] | type[Histogram]
    name: str
    documentation: str
    labels: Sequence[str] = ()
    buckets: Sequence[float] | None = None
    seed: Sequence[str] = ()
    """Started at 0 at once (a counter born at its first event is born at 1, and
    increase()/rate() would never see that first one)."""

    def register(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
        """The instrument, in ``registry``, with its seeded label values at 0."""
        if self.make is Histogram:
            buckets = self.buckets or Histogram.DEFAULT_BUCKETS
            made: Counter | Gauge | Histogram = Histogram(
                self.name, self.documentation, self.labels, registry=registry, buckets=buckets
            )
        else:
            made = self.make(self.name, self.documentation, self.labels, registry=registry)
        for value in self.seed:
            made.labels(value)
        return made


#: Every metric of the controller, in the order /metrics shows them.
INSTRUMENTS: tuple[Instrument, ...] = (
    Instrument(
        "nudges",
        Counter,
        "kube_nudge_nudges",
        "Rollouts started, by workload kind.",
        ["kind"],
    ),
    Instrument(
        "holds",
        Counter,
        "kube_nudge_holds",
        "Rollouts held back, by reason.",
        ["reason"],
    ),
    Instrument(
        "notifications",
        Counter,
        "kube_nudge_notifications",
        "Config changes announced without touching the workload (strategy notify), by kind.",
        ["kind"],
    ),
    Instrument(
        "rollouts_finished",
        Counter,
        "kube_nudge_rollouts_finished",
        "Rollouts started by kube-nudge that completed or failed (its progress deadline, "
        "or the workload's), by kind and outcome.",
        ["kind", "outcome"],
    ),
    Instrument(
        "hot_reloads",
        Counter,
        "kube_nudge_hot_reloads",
        "Changes strategy hot delivered without a rollout, by outcome: reloaded (every "
        "pod's agent confirmed), failed or timed-out (then the fallback), rolled (a "
        "changed key reaches the pods only at a restart: env, subPath, init container; or "
        "no reload agent in the pod template), or unconfirmed (no reload agent, with "
        "hot-fallback warn: delivered in place, warned at once).",
        ["outcome"],
    ),
    Instrument(
        "notifications_sent",
        Counter,
        "kube_nudge_notifications_sent",
        "Notifications delivered to a chat/webhook receiver, by receiver label and kind.",
        ["receiver", "kind"],
    ),
    Instrument(
        "notifications_failed",
        Counter,
        "kube_nudge_notifications_failed",
        "Notifications given up on, by receiver label and reason of the last attempt: "
        "timeout, network, rate-limited, server-error, rejected (3xx/4xx, not retried), "
        "error.",
        ["receiver", "reason"],
    ),
    Instrument(
        "notifications_dropped",
        Counter,
        "kube_nudge_notifications_dropped",
        "Notifications dropped unsent, by receiver label and reason: queue-full (the "
        "oldest made room), shutdown (still queued when the drain timed out).",
        ["receiver", "reason"],
    ),
    Instrument(
        "pod_evictions",
        Counter,
        "kube_nudge_pod_evictions",
        "Evictions of pods matching a ConfigMap's or Secret's kube-nudge.io/pod-selector "
        "that started before its data changed, by outcome: evicted, blocked (refused with "
        "429, a PodDisruptionBudget allowing no more now; tried again later).",
        ["outcome"],
        seed=EVICTION_OUTCOMES,
    ),
    Instrument(
        "pods_not_replaced",
        Counter,
        "kube_nudge_pods_not_replaced",
        "Stale pods matching a kube-nudge.io/pod-selector left alone because no controller "
        "would replace them (counted once per change of the source, with a Warning Event).",
    ),
    Instrument(
        "errors",
        Counter,
        "kube_nudge_errors",
        "Errors, by stage.",
        ["stage"],
        seed=ERROR_STAGES,
    ),
    Instrument(
        "writes",
        Counter,
        "kube_nudge_writes",
        "API writes to workloads, by kind.",
        ["kind"],
    ),
    Instrument(
        "reconcile_seconds",
        Histogram,
        "kube_nudge_reconcile_duration_seconds",
        "Time to reconcile one workload.",
        buckets=RECONCILE_BUCKETS,
    ),
    Instrument(
        "watch_restarts",
        Counter,
        "kube_nudge_watch_restarts",
        "Watch streams restarted, by resource and reason.",
        ["resource", "reason"],
    ),
    Instrument(
        "queue_depth",
        Gauge,
        "kube_nudge_queue_depth",
        "Work queue length.",
    ),
    Instrument(
        "objects_tracked",
        Gauge,
        "kube_nudge_objects_tracked",
        "Objects in the caches, by resource.",
        ["resource"],
    ),
    Instrument(
        "workloads",
        Gauge,
        "kube_nudge_workloads",
        "Opted-in workloads by the outcome of their last reconcile on this replica.",
        ["state"],
        seed=WORKLOAD_STATES,
    ),
    Instrument(
        "kind_available",
        Gauge,
        "kube_nudge_workload_kind_available",
        "1 while a workload kind is watched, 0 while the API server does not serve it "
        "(a --workload whose CRD is not installed yet; retried).",
        ["resource"],
    ),
    Instrument(
        "admission",
        Counter,
        "kube_nudge_admission_reviews",
        "Snapshot webhook reviews, by result: restored (a re-applied manifest kept its "
        "copies), unchanged, not-ready (caches not filled yet), error (allowed as is).",
        ["result"],
    ),
    Instrument(
        "audit_workloads",
        Gauge,
        "kube_nudge_audit_workloads",
        "Workloads by state at the last drift audit (--audit-interval), opted in or not "
        "(not opted in: only those with stale pods are counted, as state stale).",
        ["state", "opted_in"],
    ),
    Instrument(
        "audit_stale_pods",
        Gauge,
        "kube_nudge_audit_stale_pods",
        "Pods that started before the config they consume last changed, at the last drift audit.",
    ),
    Instrument(
        "audit_timestamp",
        Gauge,
        "kube_nudge_audit_last_run_timestamp_seconds",
        "When the last drift audit finished (Unix seconds; 0: none yet).",
    ),
    Instrument(
        "is_leader",
        Gauge,
        "kube_nudge_leader",
        "1 while this replica leads.",
    ),
    Instrument(
        "analysis_measurements",
        Counter,
        "kube_nudge_analysis_measurements",
        "Measurements of the metrics of analyses (kube-nudge.io/analysis), by phase: "
        "Successful, Failed, Inconclusive, or Error (the query or the condition failed).",
        ["phase"],
        seed=ANALYSIS_PHASES,
    ),
    Instrument(
        "analyses_finished",
        Counter,
        "kube_nudge_analyses_finished",
        "Analyses of completed rollouts that ended, by phase: Successful (the rollout "
        "counts as complete), Failed (a failed rollout), Error or Inconclusive (held for a "
        "person).",
        ["phase"],
        seed=ANALYSIS_PHASES,
    ),
    Instrument(
        "analysis_query_seconds",
        Histogram,
        "kube_nudge_analysis_query_duration_seconds",
        "Time to query Prometheus for one measurement of an analysis metric.",
        buckets=RECONCILE_BUCKETS,
    ),
)


class Metrics:
    """All kube-nudge metrics, registered in ``registry`` (a fresh one by default): one
    attribute per entry of ``INSTRUMENTS``."""

    nudges: Counter
    holds: Counter
    notifications: Counter
    rollouts_finished: Counter
    hot_reloads: Counter
    notifications_sent: Counter
    notifications_failed: Counter
    notifications_dropped: Counter
    pod_evictions: Counter
    pods_not_replaced: Counter
    errors: Counter
    writes: Counter
    reconcile_seconds: Histogram
    watch_restarts: Counter
    queue_depth: Gauge
    objects_tracked: Gauge
    workloads: Gauge
    kind_available: Gauge
    admission: Counter
    audit_workloads: Gauge
    audit_stale_pods: Gauge
    audit_timestamp: Gauge
    is_leader: Gauge
    analysis_measurements: Counter
    analyses_finished: Counter
    analysis_query_seconds: Histogram

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        for declared in INSTRUMENTS:
            setattr(self, declared.attribute, declared.register(r))
        # process_cpu_seconds_total, process_resident_memory_bytes, open fds, start time:
        # what dashboards and the kubelet-independent memory alerts expect of any exporter.
        ProcessCollector(registry=r)
        # Known label values start at 0: a counter whose series is born at its first event
        # is born at 1, and increase()/rate() see no increase in it (so the first failed
        # rollout after a start would never alert). The rest are known only once configured:
        # kinds and watched resources (seed_* below, by the controller), the receivers
        # (NotifierHooks.from_counters) and strategies' own labels (their constructors).
        self.seed_holds(HOLD_REASONS)

    def seed_holds(self, reasons: Iterable[str]) -> None:
        """Start the holds of each reason, and the workloads held for it, at 0."""
        for reason in reasons:
            self.holds.labels(reason=reason)
            self.workloads.labels(state=f"held-{reason}")

    def seed_kind(self, kind: str) -> None:
        """Start every per-kind counter of workload kind ``kind`` (a Kind, e.g.
        ``Deployment``) at 0."""
        self.nudges.labels(kind=kind)
        self.notifications.labels(kind=kind)
        self.writes.labels(kind=kind)
        for outcome in ROLLOUT_OUTCOMES:
            self.rollouts_finished.labels(kind=kind, outcome=outcome)

    def seed_watch(self, resource: str) -> None:
        """Start the watch restarts of ``resource`` at 0, for every reason."""
        for reason in RESTART_REASONS:
            self.watch_restarts.labels(resource=resource, reason=reason)

    def render(self) -> tuple[bytes, str]:
        """The text exposition of every metric, and its content type."""
        # 0.0.4 is what every Prometheus understands; our names need no 1.0.0 escaping.
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4
