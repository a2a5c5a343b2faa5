"""The analysis gate, a step of the read (``reconciler.py``): after a workload's rollout of a
change completed, the metrics of its template (``kube-nudge.io/analysis``) are measured as
they fall due, each measurement recorded on the workload (``kube-nudge.io/analysis-run``),
until the analysis ends. The rules are the model's (``model/analysis.py``, pure); this reads
the template from the caches (``templates.py``: never from the API server, so an edit counts
from the next look), asks Prometheus (``runtime/prometheus.py``: only the allowed servers),
adds the record to the pass's one write (``WorkloadChanges``) and, once written, says what
happened.

Until the analysis is Successful the rollout counts as in progress (``model/tracking``): a
later ``rollout-order`` waits, no ``RolloutComplete``. Failed is a failed rollout (the
follower records it, stops the line, rolls back where it can). Error and Inconclusive hold
the line for a person (``kube-nudge release`` lets it go on). A template that can't be
evaluated, a server not allowed, a missing template, or analysis switched off (no
``--prometheus-url``) is an Error too: never proceeding blind.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kube_nudge.controller.options import ControllerOptions
from kube_nudge.controller.templates import Missing, TemplateReader
from kube_nudge.kube.events import NORMAL, WARNING
from kube_nudge.kube.workloads import Target
from kube_nudge.model.analysis import (
    AnalysisPhase,
    AnalysisRecord,
    AnalysisRef,
    Measurement,
    Template,
    TemplateError,
    due_metrics,
    measurement_phase,
    metric_phase,
    next_look,
    read_template,
    run_phase,
    shown,
)
from kube_nudge.model.annotations import ANALYSIS_RUN
from kube_nudge.model.query_scope import QueryScopeError, unscoped_selectors
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.runtime.prometheus import PrometheusClient, QueryError
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import WorkloadChanges

__all__ = ["TEMPLATE_WAIT", "Analyser"]

log = logging.getLogger(__name__)

TEMPLATE_WAIT = 1.0
"""Seconds before looking again at an analysis whose template's kind is still being
discovered or listed (a CRD installed after start): nothing is started or written meanwhile."""
_HELD = {
    AnalysisPhase.ERROR: "AnalysisError",
    AnalysisPhase.INCONCLUSIVE: "AnalysisInconclusive",
    AnalysisPhase.FAILED: "AnalysisFailed",
}


@dataclass(frozen=True, slots=True)
class Step:
    """What a look at an analysis found: when to look again (seconds), if it goes on."""

    next_look: float | None


class Analyser:
    """Measures the analyses of workloads whose rollouts completed."""

    def __init__(
        self,
        context: StrategyContext,
        prometheus: PrometheusClient | None,
        metrics: Metrics,
        options: ControllerOptions | None = None,
        templates: TemplateReader | None = None,
    ) -> None:
        """``options``: the analysis flags (``--analysis-error-interval``,
        ``--analysis-namespace-label``); their defaults when None. ``templates``: the
        caches' (``Cache.templates``), there when analysis is on."""
        self._context = context
        options = options or ControllerOptions()
        self._error_interval = options.analysis_error_interval
        self._namespace_label = options.analysis_namespace_label
        self._prometheus = prometheus
        self._metrics = metrics
        self._templates = templates

    async def step(
        self, target: Target, ref: AnalysisRef, config_hash: str, record: AnalysisRecord | None,
        changes: WorkloadChanges,
    ) -> Step:  # fmt: skip
        """Take the measurements due now, record them (in the pass's ``changes``), and end
        the analysis when its rules say so. ``record``: what the workload records of this
        config's analysis."""
        now = round(self._context.clock.now(), 3)
        if record is None or record.config_hash != config_hash or record.phase is not None:
            return Step(None)  # not a judged rollout (tracking says so too), or ended
        template = self._template(target, ref, config_hash)
        if template is None:
            return Step(TEMPLATE_WAIT)
        recorded = record
        if record.started is None:
            record = record.begun(now)
            changes.then(lambda: self._started(target, ref))
        if isinstance(template, str):
            self._end(target, record.ended(AnalysisPhase.ERROR, template), changes)
            return Step(None)
        measured = await self._measure(template, record, now)
        phase = run_phase(template, measured.metrics)
        if phase.completed:
            self._end(target, measured.ended(phase, _verdict(template, measured, phase)), changes)
            return Step(None)
        if measured != recorded:
            changes.annotate({ANALYSIS_RUN: measured.encode()})
        at = next_look(template, measured)
        return Step(None if at is None else max(at - self._context.clock.now(), 0.0))

    def _template(
        self, target: Target, ref: AnalysisRef, config_hash: str
    ) -> Template | str | None:
        """The template cached for ``target``, or why it can't be evaluated (one line); None
        while it may yet come (``Missing``)."""
        if self._prometheus is None or self._templates is None:
            return (
                "analysis is off: kube-nudge run was given no --prometheus-url, so no "
                "measurement can be taken"
            )
        raw = self._templates.get(ref, target.namespace)
        if isinstance(raw, Missing):
            return raw.why
        supplied = {
            "namespace": target.namespace,
            "kind": target.kind.resource.kind,
            "name": target.name,
            "config-hash": config_hash,
            "wave": str(target.view.settings.rollout_order or 0),
        }
        try:
            template = read_template(raw, supplied, error_interval=self._error_interval)
        except TemplateError as exc:
            return f"refused: {exc}"
        for metric in template.metrics:
            refused = self._prometheus.access.refusal(metric.provider.address) or self._unscoped(
                metric.provider.query, target.namespace
            )
            if refused is not None:
                return (
                    f"refused: {template.source}: metric {metric.name}: {refused} (nothing "
                    "was sent there)"
                )
        return template

    def _unscoped(self, query: str, namespace: str) -> str | None:
        """Why ``query`` may read series of other namespaces than ``namespace``
        (``--analysis-namespace-label``), or None."""
        label = self._namespace_label
        if label is None:
            return None
        try:
            found = unscoped_selectors(query, label, namespace)
        except QueryScopeError as exc:
            return f"its query can't be checked for --analysis-namespace-label: {exc}"
        if not found:
            return None
        return (
            f"its query may read series outside namespace {namespace}: "
            f'{"; ".join(found)[:300]}; every selector needs {label}="{namespace}" '
            "(--analysis-namespace-label)"
        )

    async def _measure(
        self, template: Template, record: AnalysisRecord, now: float
    ) -> AnalysisRecord:
        """``record`` after the measurements due at ``now``."""
        assert self._prometheus is not None  # nosec B101 # _template returned a template
        for metric in due_metrics(template, record, now):
            started = time.perf_counter()
            try:
                result = await self._prometheus.query(
                    metric.provider.address, metric.provider.query, timeout=metric.provider.timeout
                )
            except QueryError as exc:
                measurement = Measurement(AnalysisPhase.ERROR, now, str(exc))
            else:
                phase, why = measurement_phase(metric, result)
                measurement = Measurement(phase, now, why or shown(result))
            self._metrics.analysis_query_seconds.observe(time.perf_counter() - started)
            self._metrics.analysis_measurements.labels(phase=measurement.phase.value).inc()
            record = record.measured(metric.name, measurement)
        return record

    def _end(self, target: Target, record: AnalysisRecord, changes: WorkloadChanges) -> None:
        """Record the verdict; once written, say it."""
        changes.annotate({ANALYSIS_RUN: record.encode()})
        changes.then(lambda: self._ended(target, record))

    def _ended(self, target: Target, record: AnalysisRecord) -> None:
        """Say an analysis's verdict: an Event, a log line, the metric."""
        phase = record.phase or AnalysisPhase.ERROR
        self._metrics.analyses_finished.labels(phase=phase.value).inc()
        if phase is AnalysisPhase.SUCCESSFUL:
            log.info("%s: analysis successful: %s", target, record.verdict,
                     extra=target.log_fields("analysis-successful"))  # fmt: skip
            self._context.events.post(target.ref, NORMAL, "AnalysisSuccessful", record.verdict)
            return
        held = "" if phase is AnalysisPhase.FAILED else (
            "; the line is held until the analysis is run again or a person lets it go on "
            "(kube-nudge release)"
        )  # fmt: skip
        message = f"analysis {phase.value.lower()}: {record.verdict}{held}"
        log.warning("%s: %s", target, message, extra=target.log_fields("analysis-" + phase))
        self._context.events.post(target.ref, WARNING, _HELD[phase], message)

    def _started(self, target: Target, ref: AnalysisRef) -> None:
        log.info("%s: rollout complete; analysis %s starts", target, ref,
                 extra=target.log_fields("analysis-started"))  # fmt: skip
        self._context.events.post(
            target.ref, NORMAL, "AnalysisStarted",
            f"rollout complete; analysis {ref} starts: the rollout counts as complete once "
            "it is Successful",
        )  # fmt: skip


def _verdict(template: Template, record: AnalysisRecord, phase: AnalysisPhase) -> str:
    """The metric that decided, what it measured and its conditions (numbers only)."""
    counted = [m for m in template.metrics if not m.dry_run]
    if phase is AnalysisPhase.SUCCESSFUL:
        parts = [f"{m.name} {record.state(m.name).count}/{m.count}" for m in counted]
        return f"{template.source}: " + ", ".join(parts)
    decided = next(
        (m for m in counted if metric_phase(m, record.state(m.name)) is phase), counted[0]
    )
    state = record.state(decided.name)
    last = state.last.value if state.last is not None else "nothing measured"
    counts = (
        f"{state.failed} failed, {state.inconclusive} inconclusive, {state.errors} errors "
        f"of {state.taken}"
    )
    return (
        f"{template.source}: metric {decided.name} measured {last} ({counts}; "
        f"{decided.conditions()})"
    )
