"""Analysis: whether a config change is healthy, judged on metrics after its rollout, with
Argo Rollouts' ``AnalysisTemplate`` names and meanings (pure: the clock is an argument).

A template (kube-nudge's own ``kube-nudge.io/v1alpha1`` ``AnalysisTemplate``, or Argo's
``AnalysisTemplate`` / ``ClusterAnalysisTemplate`` read as they are) lists metrics, each a
Prometheus query measured ``count`` times, ``interval`` apart, after ``initialDelay``.

Each measurement is judged as Argo judges it (``measurement_phase``): a true
``failureCondition`` is Failed; else a true ``successCondition`` is Successful, a false one
Failed; with only a ``failureCondition``, false is Successful; with both, neither true is
Inconclusive. A query or evaluation that fails is an Error. A metric with neither
condition is refused when its template is read (Argo's code calls every such measurement
Successful, its documentation leaves it open; a gate that can't fail is no gate).

A metric is Failed once more than ``failureLimit`` (default 0) measurements failed,
Inconclusive once more than ``inconclusiveLimit`` (default 0) were inconclusive, Error once
more than ``consecutiveErrorLimit`` (default 4) errors came in a row, and Successful once it
was measured ``count`` times without error (``metric_phase``, Argo's ``assessMetricStatus``).
The analysis takes the worst phase of its metrics (Failed over Error over Inconclusive over
Successful); the first metric to end otherwise than Successful ends it. ``dryRun`` metrics
(Argo's ``spec.dryRun[].metricName``) are measured and shown, never counted.

A metric must end: ``count`` is required where ``interval`` is set (Argo lets such a
metric run until its rollout ends; a gate would then never open), and defaults to 1
without one. The next measurement of a metric is due ``initialDelay`` after the analysis
started, then ``interval`` after the last one (Argo's rule): what is recorded on the
workload (``AnalysisRecord``) is all a restarted controller needs to go on without
measuring twice or skipping one. After an Error the next try waits the error interval
instead (``--analysis-error-interval``, 10 s by default: Argo's ``DefaultErrorRetryInterval``),
or ``interval`` where that is shorter, as Argo paces it: ``consecutiveErrorLimit`` then
reaches Error after about limit times that interval, not at once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Final

from kube_nudge.model.conditions import (
    Condition,
    ConditionError,
    MeasuredValue,
    compile_condition,
)
from kube_nudge.model.parsing import parse_duration

__all__ = [
    "DEFAULT_ERROR_INTERVAL",
    "KUBE_NUDGE_TEMPLATE",
    "SUPPLIED_ARGS",
    "TEMPLATE_KINDS",
    "AnalysisPhase",
    "AnalysisRecord",
    "AnalysisRef",
    "Measurement",
    "Metric",
    "MetricState",
    "Prometheus",
    "Template",
    "TemplateError",
    "due_metrics",
    "measure",
    "measurement_phase",
    "metric_phase",
    "next_due",
    "next_look",
    "parse_analysis_ref",
    "parse_record",
    "pending_record",
    "read_template",
    "run_phase",
    "shown",
]

#: What kube-nudge supplies as ``{{args.NAME}}``: one template serves a whole fleet.
SUPPLIED_ARGS: Final = ("namespace", "kind", "name", "config-hash", "wave")
DEFAULT_CONSECUTIVE_ERROR_LIMIT: Final = 4
#: Seconds before a measurement that errored is tried again (Argo's
#: ``DefaultErrorRetryInterval``); ``--analysis-error-interval`` sets it.
DEFAULT_ERROR_INTERVAL: Final = 10.0
MAX_COUNT: Final = 1000
_ARG = re.compile(r"\{\{\s*args\.([A-Za-z0-9_.-]+)\s*\}\}")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
KUBE_NUDGE_TEMPLATE: Final = "AnalysisTemplate.kube-nudge.io"
#: The kinds of template ``kube-nudge.io/analysis`` may name (``Kind.group/NAME``); a bare
#: NAME is kube-nudge's own, in the workload's namespace.
TEMPLATE_KINDS: Final = (
    KUBE_NUDGE_TEMPLATE,
    "AnalysisTemplate.argoproj.io",
    "ClusterAnalysisTemplate.argoproj.io",
)


@dataclass(frozen=True, slots=True)
class AnalysisRef:
    """The template ``kube-nudge.io/analysis`` names."""

    kind: str
    """One of ``TEMPLATE_KINDS``."""
    name: str

    def __str__(self) -> str:
        return self.name if self.kind == KUBE_NUDGE_TEMPLATE else f"{self.kind}/{self.name}"


def parse_analysis_ref(name: str, value: str) -> AnalysisRef:
    """``kube-nudge.io/analysis``: ``NAME``, or ``Kind.group/NAME`` for Argo's templates."""
    kind, slash, template = value.rpartition("/")
    kind = kind if slash else KUBE_NUDGE_TEMPLATE
    if kind not in TEMPLATE_KINDS or not _NAME.fullmatch(template):
        kinds = ", ".join(f"{k}/NAME" for k in TEMPLATE_KINDS[1:])
        raise ValueError(
            f"{name} must name an analysis template: NAME (kube-nudge's AnalysisTemplate in "
            f"the workload's namespace), {kinds}; got {value[:80]!r}"
        )
    return AnalysisRef(kind, template)


class AnalysisPhase(StrEnum):
    """Argo's analysis phases."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCESSFUL = "Successful"
    INCONCLUSIVE = "Inconclusive"
    ERROR = "Error"
    FAILED = "Failed"

    @property
    def completed(self) -> bool:
        """Whether nothing more is measured."""
        return self not in (AnalysisPhase.PENDING, AnalysisPhase.RUNNING)


#: Argo's order of worse phases (``analysisutil.IsWorse``): a later one outranks.
_WORSE: Final = tuple(AnalysisPhase)


class TemplateError(ValueError):
    """A template that can't be evaluated (one line naming the field)."""


@dataclass(frozen=True, slots=True)
class Prometheus:
    """``provider.prometheus``: where to send the query, and the query."""

    address: str
    query: str
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric of a template, its args substituted."""

    name: str
    provider: Prometheus
    success: Condition | None = None
    failure: Condition | None = None
    interval: float = 0.0
    initial_delay: float = 0.0
    count: int = 1
    failure_limit: int = 0
    inconclusive_limit: int = 0
    consecutive_error_limit: int = DEFAULT_CONSECUTIVE_ERROR_LIMIT
    dry_run: bool = False
    error_interval: float = DEFAULT_ERROR_INTERVAL
    """Seconds from an Error to the next try: the error interval, or ``interval`` where it
    is shorter (Argo's rule)."""

    def conditions(self) -> str:
        """The conditions, for messages: ``success: …; failure: …``."""
        parts = [f"success: {self.success.text}"] if self.success else []
        parts += [f"failure: {self.failure.text}"] if self.failure else []
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Template:
    """A template read for one workload: its metrics, args substituted."""

    source: str
    """``AnalysisTemplate shop/error-rate`` (its kind, namespace and name)."""
    metrics: tuple[Metric, ...]

    @property
    def duration(self) -> float:
        """The shortest time the analysis can take: the longest metric's
        ``initialDelay + (count - 1) * interval``."""
        return max((m.initial_delay + (m.count - 1) * m.interval for m in self.metrics), default=0)


# -- reading a template ----------------------------------------------------------------------


def read_template(
    obj: Mapping[str, Any],
    supplied: Mapping[str, str],
    *,
    error_interval: float = DEFAULT_ERROR_INTERVAL,
) -> Template:
    """``obj`` (an AnalysisTemplate or ClusterAnalysisTemplate, kube-nudge's or Argo's) for
    a workload whose ``supplied`` args (``SUPPLIED_ARGS``) are given, an Error retried after
    ``error_interval`` seconds (or a shorter ``interval``); ``TemplateError`` (one line) on
    anything that can't be evaluated."""
    metadata = obj.get("metadata") or {}
    where = "/".join(p for p in (metadata.get("namespace"), metadata.get("name")) if p)
    source = f"{obj.get('kind') or 'AnalysisTemplate'} {where}"
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise TemplateError(f"{source}: spec is missing")
    try:
        args = _args(spec.get("args"), supplied)
        dry = _dry_run(spec.get("dryRun"))
        metrics = spec.get("metrics")
        if not isinstance(metrics, list) or not metrics:
            raise TemplateError("spec.metrics: want a non-empty list")
        read = tuple(_metric(m, n, args, dry, error_interval) for n, m in enumerate(metrics))
    except TemplateError as exc:
        raise TemplateError(f"{source}: {exc}") from None
    names = [m.name for m in read]
    if len(set(names)) != len(names):
        raise TemplateError(f"{source}: spec.metrics: two metrics have the same name")
    if all(m.dry_run for m in read):
        raise TemplateError(f"{source}: every metric is dryRun: nothing would gate the rollout")
    return Template(source, read)


def _args(declared: object, supplied: Mapping[str, str]) -> dict[str, str]:
    """Each arg's value: kube-nudge's where it supplies one (as a Rollout's args override a
    template's), else the template's own ``value``."""
    values = dict(supplied)
    if declared is None:
        return values
    if not isinstance(declared, list):
        raise TemplateError("spec.args: want a list")
    for number, arg in enumerate(declared):
        if not isinstance(arg, Mapping) or not isinstance(arg.get("name"), str):
            raise TemplateError(f"spec.args[{number}]: want a name")
        name = arg["name"]
        if name in supplied:
            continue
        if "valueFrom" in arg:
            raise TemplateError(
                f"spec.args[{number}] ({name}): valueFrom is not supported; give a value"
            )
        value = arg.get("value")
        if not isinstance(value, str):
            raise TemplateError(
                f"spec.args[{number}] ({name}): no value, and kube-nudge supplies only "
                f"{', '.join(SUPPLIED_ARGS)}"
            )
        values[name] = value
    return values


def _dry_run(entries: object) -> set[str]:
    if entries is None:
        return set()
    if not isinstance(entries, list):
        raise TemplateError("spec.dryRun: want a list")
    names = set()
    for number, entry in enumerate(entries):
        name = entry.get("metricName") if isinstance(entry, Mapping) else None
        if not isinstance(name, str):
            raise TemplateError(f"spec.dryRun[{number}]: want metricName")
        names.add(name)
    return names


def _metric(
    raw: object, number: int, args: Mapping[str, str], dry: set[str], error_interval: float
) -> Metric:
    where = f"spec.metrics[{number}]"
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise TemplateError(f"{where}: want a name")
    name = raw["name"]
    where = f"{where} ({name})"
    metric = _substituted(raw, args, where)
    try:
        interval = _duration(metric.get("interval"), "interval")
        count = _int(metric.get("count"), "count", 1 if not interval else None)
        if count < 1 or count > MAX_COUNT:
            raise TemplateError(f"count must be between 1 and {MAX_COUNT}")
        success = _condition(metric.get("successCondition"), "successCondition")
        failure = _condition(metric.get("failureCondition"), "failureCondition")
        if success is None and failure is None:
            raise TemplateError("give a successCondition or a failureCondition (or both)")
        return Metric(
            name=name,
            provider=_prometheus(metric.get("provider")),
            success=success,
            failure=failure,
            interval=interval,
            initial_delay=_duration(metric.get("initialDelay"), "initialDelay"),
            count=count,
            failure_limit=_int(metric.get("failureLimit"), "failureLimit", 0),
            inconclusive_limit=_int(metric.get("inconclusiveLimit"), "inconclusiveLimit", 0),
            consecutive_error_limit=_int(
                metric.get("consecutiveErrorLimit"),
                "consecutiveErrorLimit",
                DEFAULT_CONSECUTIVE_ERROR_LIMIT,
            ),
            dry_run=name in dry or metric.get("dryRun") is True,
            error_interval=min(interval, error_interval) if interval else error_interval,
        )
    except TemplateError as exc:
        raise TemplateError(f"{where}: {exc}") from None


def _substituted(value: Any, args: Mapping[str, str], where: str) -> Any:
    """``value`` with every ``{{args.NAME}}`` in its strings replaced (Argo resolves args in
    the whole metric); an arg the template doesn't declare and kube-nudge doesn't supply is
    an error."""
    if isinstance(value, str):

        def arg(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in args:
                raise TemplateError(f"{where}: {{{{args.{name}}}}} names no arg")
            return args[name]

        return _ARG.sub(arg, value)
    if isinstance(value, Mapping):
        return {k: _substituted(v, args, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_substituted(v, args, where) for v in value]
    return value


def _prometheus(provider: object) -> Prometheus:
    prometheus = provider.get("prometheus") if isinstance(provider, Mapping) else None
    if not isinstance(prometheus, Mapping):
        others = ", ".join(provider) if isinstance(provider, Mapping) else "none"
        raise TemplateError(f"provider: only prometheus is supported (got {others})")
    address, query = prometheus.get("address"), prometheus.get("query")
    if not isinstance(address, str) or not address:
        raise TemplateError("provider.prometheus.address: want the Prometheus URL")
    if not isinstance(query, str) or not query.strip():
        raise TemplateError("provider.prometheus.query: want a PromQL query")
    for unsupported in ("authentication", "headers"):
        if prometheus.get(unsupported):
            raise TemplateError(
                f"provider.prometheus.{unsupported}: not supported; kube-nudge's credentials "
                "come from its own namespace (--prometheus-credentials)"
            )
    timeout = prometheus.get("timeout")
    if timeout is not None and not (isinstance(timeout, int) and 0 < timeout <= 300):
        raise TemplateError("provider.prometheus.timeout: want seconds, from 1 to 300")
    return Prometheus(address.rstrip("/"), query, float(timeout) if timeout else None)


def _duration(value: object, name: str) -> float:
    if value is None or value == "":
        return 0.0
    try:
        seconds = parse_duration(str(value))
    except ValueError:
        raise TemplateError(f'{name}: want a duration such as "1m" or "30s"') from None
    if seconds < 0 or seconds > 24 * 3600:
        raise TemplateError(f"{name}: want a duration from 0 to 24h")
    return seconds


def _int(value: object, name: str, default: int | None) -> int:
    if value is None or value == "":
        if default is None:
            raise TemplateError(f"{name}: required where interval is set (a gate must end)")
        return default
    if isinstance(value, bool) or not (isinstance(value, int) or str(value).lstrip("-").isdigit()):
        raise TemplateError(f"{name}: want a whole number")
    number = int(str(value))
    if number < 0:
        raise TemplateError(f"{name}: want 0 or more")
    return number


def _condition(value: object, name: str) -> Condition | None:
    if value is None or value == "":
        return None
    try:
        return compile_condition(str(value))
    except ConditionError as exc:
        raise TemplateError(f"{name}: {exc}") from None


# -- judging -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measurement of a metric: its phase, when, and what was measured (numbers, or
    why there is none)."""

    phase: AnalysisPhase
    at: float
    value: str


def measurement_phase(metric: Metric, result: MeasuredValue) -> tuple[AnalysisPhase, str]:
    """Argo's ``EvaluateResult``: the phase of one measurement of ``metric``, and for an
    Error, why (the conditions are evaluated; an error in either is an Error)."""
    try:
        failed = metric.failure.holds(result) if metric.failure else None
        succeeded = metric.success.holds(result) if metric.success else None
    except ConditionError as exc:
        return AnalysisPhase.ERROR, str(exc)
    if failed is None:
        failed = not succeeded
    elif succeeded is None:
        succeeded = not failed
    if failed:
        return AnalysisPhase.FAILED, ""
    return (AnalysisPhase.SUCCESSFUL if succeeded else AnalysisPhase.INCONCLUSIVE), ""


def shown(result: MeasuredValue) -> str:
    """A measured value for Events and status: ``0.012`` or ``[0.012, 0.3]``."""
    if isinstance(result, int | float):
        return _number(float(result))
    values = [_number(float(v)) for v in result[:5]]
    more = ", ..." if len(result) > 5 else ""
    return f"[{', '.join(values)}{more}]"


def _number(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return str(value)
    return f"{value:.6g}"


# -- counting --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricState:
    """What was counted of one metric (Argo's ``MetricResult``)."""

    count: int = 0
    """Measurements without an error."""
    failed: int = 0
    inconclusive: int = 0
    errors: int = 0
    consecutive_errors: int = 0
    last: Measurement | None = None

    @property
    def taken(self) -> int:
        """Every measurement, errors included (the schedule's count): derived, never
        stored, so a record can't disagree with itself."""
        return self.count + self.errors


def measure(state: MetricState, measurement: Measurement) -> MetricState:
    """``state`` after ``measurement``."""
    phase = measurement.phase
    errored = phase is AnalysisPhase.ERROR
    return MetricState(
        count=state.count + (not errored),
        failed=state.failed + (phase is AnalysisPhase.FAILED),
        inconclusive=state.inconclusive + (phase is AnalysisPhase.INCONCLUSIVE),
        errors=state.errors + errored,
        consecutive_errors=state.consecutive_errors + 1 if errored else 0,
        last=measurement,
    )


def metric_phase(metric: Metric, state: MetricState, *, terminating: bool = False) -> AnalysisPhase:
    """Argo's ``assessMetricStatus``: Failed, Inconclusive or Error once past a limit,
    Successful once measured ``count`` times (or, ``terminating``, as it stands)."""
    if state.taken == 0:
        return AnalysisPhase.SUCCESSFUL if terminating else AnalysisPhase.PENDING
    if state.failed > metric.failure_limit:
        return AnalysisPhase.FAILED
    if state.inconclusive > metric.inconclusive_limit:
        return AnalysisPhase.INCONCLUSIVE
    if state.consecutive_errors > metric.consecutive_error_limit:
        return AnalysisPhase.ERROR
    if state.count >= metric.count or terminating:
        return AnalysisPhase.SUCCESSFUL
    return AnalysisPhase.RUNNING


def run_phase(template: Template, states: Mapping[str, MetricState]) -> AnalysisPhase:
    """The analysis's phase: the worst of its counted metrics once one ended otherwise than
    Successful (the others stop: Argo's terminating run) or all ended; Running before."""
    counted = [m for m in template.metrics if not m.dry_run]
    phases = [metric_phase(m, states.get(m.name, MetricState())) for m in counted]
    ended_badly = [p for p in phases if p.completed and p is not AnalysisPhase.SUCCESSFUL]
    if ended_badly:
        return max(ended_badly, key=_WORSE.index)
    if all(p is AnalysisPhase.SUCCESSFUL for p in phases):
        return AnalysisPhase.SUCCESSFUL
    started = any(states.get(m.name, MetricState()).taken for m in template.metrics)
    return AnalysisPhase.RUNNING if started else AnalysisPhase.PENDING


def next_due(metric: Metric, state: MetricState, started: float) -> float | None:
    """When ``metric`` is next measured (Unix seconds), None once it has ended."""
    if metric_phase(metric, state).completed:
        return None
    if state.last is None:
        return started + metric.initial_delay
    if state.last.phase is AnalysisPhase.ERROR:
        return state.last.at + metric.error_interval
    return state.last.at + metric.interval


def due_metrics(template: Template, record: AnalysisRecord, now: float) -> list[Metric]:
    """The metrics to measure at ``now``: those due, unless the analysis has ended (or not
    started)."""
    if record.started is None or run_phase(template, record.metrics).completed:
        return []
    due = []
    for metric in template.metrics:
        at = next_due(metric, record.state(metric.name), record.started)
        if at is not None and at <= now:
            due.append(metric)
    return due


def next_look(template: Template, record: AnalysisRecord) -> float | None:
    """When the next measurement of a running analysis is due (Unix seconds)."""
    if record.started is None or run_phase(template, record.metrics).completed:
        return None
    started = record.started
    times = [next_due(m, record.state(m.name), started) for m in template.metrics]
    return min((t for t in times if t is not None), default=None)


# -- the record on the workload --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnalysisRecord:
    """An analysis of one config, as recorded on its workload
    (``kube-nudge.io/analysis-run``): enough for a restarted controller to go on."""

    config_hash: str
    started: float | None
    """When it started (its rollout completed); None: recorded by the rollout it judges,
    which has not completed yet."""
    metrics: Mapping[str, MetricState] = field(default_factory=dict)
    phase: AnalysisPhase | None = None
    """Its verdict once it ended (Successful, Failed, Error or Inconclusive)."""
    verdict: str = ""
    """Why, in a line: the metric, what it measured and the condition (numbers only)."""

    def state(self, name: str) -> MetricState:
        """What was counted of metric ``name``."""
        return self.metrics.get(name, MetricState())

    @property
    def last_at(self) -> float:
        """When it last measured (when it started, before that)."""
        times = [s.last.at for s in self.metrics.values() if s.last is not None]
        return max(times, default=self.started or 0.0)

    def measured(self, name: str, measurement: Measurement) -> AnalysisRecord:
        """The record after a measurement of metric ``name``."""
        states = dict(self.metrics)
        states[name] = measure(self.state(name), measurement)
        return replace(self, metrics=states)

    def encode(self) -> str:
        """The annotation's value: compact JSON, numbers and phases only."""
        metrics = {name: _encode_state(state) for name, state in sorted(self.metrics.items())}
        body: dict[str, Any] = {"hash": self.config_hash, "start": self.started}
        if metrics:
            body["metrics"] = metrics
        if self.phase is not None:
            body["phase"], body["verdict"] = self.phase.value, self.verdict
        return json.dumps(body, separators=(",", ":"))

    def begun(self, now: float) -> AnalysisRecord:
        """The record of an analysis that starts at ``now``."""
        return replace(self, started=now)

    def ended(self, phase: AnalysisPhase, verdict: str) -> AnalysisRecord:
        """The record with its verdict."""
        return replace(self, phase=phase, verdict=verdict[:512])

    def lets_line_go_on(self, released_at: float) -> bool:
        """Whether the line goes on past this analysis (the release rule, the one place it
        is written): it ended Successful, or it ended Error or Inconclusive and an operator
        ran ``kube-nudge release`` after its last measurement (``released_at``). A Failed
        analysis never lets it: it failed the rollout."""
        if self.phase is AnalysisPhase.SUCCESSFUL:
            return True
        ended_held = self.phase is not None and self.phase is not AnalysisPhase.FAILED
        return ended_held and released_at > self.last_at


def _encode_state(state: MetricState) -> dict[str, Any]:
    body: dict[str, Any] = {"ok": state.count, "failed": state.failed,
                            "inconclusive": state.inconclusive, "errors": state.errors,
                            "inRow": state.consecutive_errors}  # fmt: skip
    if state.last is not None:
        body["last"] = [state.last.phase.value, state.last.at, state.last.value]
    return body


def pending_record(config_hash: str) -> str:
    """What a rollout to ``config_hash`` of a workload with ``kube-nudge.io/analysis``
    records, in the same write: its analysis, not started. A rollout without one (the
    workload asked for analysis after it rolled) is not judged, so a record lost between two
    writes can never let a change through unanalysed."""
    return AnalysisRecord(config_hash, None).encode()


def parse_record(text: object) -> AnalysisRecord | None:
    """The record in ``kube-nudge.io/analysis-run``, or None when absent or unreadable
    (an unreadable record starts the analysis again: it measures, never skips)."""
    if not isinstance(text, str):
        return None
    try:
        body = json.loads(text)
        metrics = {
            str(name): _decode_state(state) for name, state in (body.get("metrics") or {}).items()
        }
        phase = body.get("phase")
        return AnalysisRecord(
            config_hash=str(body["hash"]),
            started=float(body["start"]) if body["start"] is not None else None,
            metrics=metrics,
            phase=AnalysisPhase(phase) if phase is not None else None,
            verdict=str(body.get("verdict") or ""),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _decode_state(body: Mapping[str, Any]) -> MetricState:
    # Records written by earlier releases also carry "n" (every measurement, errors
    # included): it is `taken`, derived, so it is not read.
    last = body.get("last")
    measurement = None
    if isinstance(last, Sequence) and len(last) == 3:
        measurement = Measurement(AnalysisPhase(last[0]), float(last[1]), str(last[2]))
    return MetricState(
        count=int(body["ok"]), failed=int(body["failed"]),
        inconclusive=int(body["inconclusive"]), errors=int(body["errors"]),
        consecutive_errors=int(body["inRow"]), last=measurement,
    )  # fmt: skip
