"""Metrics instances are independent and expose every instrument."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kube_nudge.runtime.metrics import INSTRUMENTS, Metrics

NAMES = {
    "kube_nudge_nudges",
    "kube_nudge_holds",
    "kube_nudge_errors",
    "kube_nudge_writes",
    "kube_nudge_reconcile_duration_seconds",
    "kube_nudge_watch_restarts",
    "kube_nudge_queue_depth",
    "kube_nudge_objects_tracked",
    "kube_nudge_leader",
    "kube_nudge_notifications",
    "kube_nudge_workloads",
}


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, _ = metrics.render()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def test_render_names_every_metric() -> None:
    body, content_type = Metrics().render()
    assert content_type.startswith("text/plain; version=0.0.4")
    families = {f.name for f in text_string_to_metric_families(body.decode())}
    assert families >= NAMES
    assert b"# TYPE kube_nudge_nudges_total counter" in body


def test_two_instances_do_not_collide() -> None:
    first, second = Metrics(), Metrics()
    first.nudges.labels(kind="Deployment").inc(3)
    first.is_leader.set(1)
    second.nudges.labels(kind="Deployment").inc()
    assert _samples(first)[("kube_nudge_nudges_total", (("kind", "Deployment"),))] == 3
    assert _samples(second)[("kube_nudge_nudges_total", (("kind", "Deployment"),))] == 1
    assert _samples(second)[("kube_nudge_leader", ())] == 0


def test_known_reasons_and_stages_start_at_zero() -> None:
    samples = _samples(Metrics())
    for reason in ("missing", "flapping", "invalid"):
        assert samples[("kube_nudge_holds_total", (("reason", reason),))] == 0
    for stage in ("reconcile", "write", "event", "watch"):
        assert samples[("kube_nudge_errors_total", (("stage", stage),))] == 0


def test_reconcile_buckets_span_half_a_millisecond_to_ten_seconds() -> None:
    metrics = Metrics()
    metrics.reconcile_seconds.observe(0.0003)
    metrics.reconcile_seconds.observe(7)
    samples = _samples(metrics)
    bucket = "kube_nudge_reconcile_duration_seconds_bucket"
    assert samples[(bucket, (("le", "0.0005"),))] == 1
    assert samples[(bucket, (("le", "5.0"),))] == 1
    assert samples[(bucket, (("le", "10.0"),))] == 2
    assert samples[(bucket, (("le", "+Inf"),))] == 2


def test_standard_process_metrics_are_exported() -> None:
    names = {name for name, _ in _samples(Metrics())}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total",
            "process_start_time_seconds", "process_open_fds"} <= names  # fmt: skip


def test_each_attribute_is_one_declared_instrument_of_its_type() -> None:
    """``Metrics`` is its table: every annotated attribute is declared once, with the type
    it is annotated with, and nothing is declared that no attribute holds."""
    annotated = Metrics.__annotations__
    declared = {d.attribute: d for d in INSTRUMENTS}
    assert len(declared) == len(INSTRUMENTS)
    assert set(declared) == set(annotated)
    metrics = Metrics()
    for name, instrument in declared.items():
        assert annotated[name] == instrument.make.__name__
        assert isinstance(getattr(metrics, name), instrument.make)
