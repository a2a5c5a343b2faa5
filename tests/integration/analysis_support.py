"""The analysis gate in integration tests: the template of docs/analysis.md made faster, and
what the tests read back. The CRD, the page's template and the exporter of each Deployment's
requests (scraped by the dev tools' real Prometheus, ``prometheus_support.prometheus_for``)
are the dev tools' (``kube_nudge_dev.analysis``), shared with the benchmark."""

from __future__ import annotations

import copy
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    ANALYSISTEMPLATES,
    ARGO_ANALYSISTEMPLATES,
    CONFIGMAPS,
    DEPLOYMENTS,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.analysis import AnalysisPhase, AnalysisRecord, parse_record
from kube_nudge.model.annotations import ANALYSIS_RUN
from kube_nudge_dev import manifests
from kube_nudge_dev.analysis import (
    Exporter,
    documented_template,
    exporter_for,
    install_template_crd,
)
from kube_nudge_dev.manifests import ENABLED
from tests.integration.controller_support import template_hash

__all__ = [
    "FASTER",
    "WINDOW",
    "Exporter",
    "analysed",
    "analysis_run",
    "example_template",
    "exporter_for",
    "fleet",
    "install_template_crd",
    "measured",
]

DEPLOYMENT = BUILTIN_KINDS[0]
#: What the test changes of the page's example, and nothing else: seconds, not minutes.
FASTER = {"initialDelay": "6s", "interval": "1s", "count": 2}
WINDOW = "5s"


def example_template(address: str) -> dict[str, Any]:
    """The page's template with the test's Prometheus, timing (``FASTER``) and window."""
    template = copy.deepcopy(documented_template())
    for arg in template["spec"]["args"]:
        if arg["name"] == "window":
            arg["value"] = WINDOW
    for metric in template["spec"]["metrics"]:
        metric.update(FASTER)
        metric["provider"]["prometheus"]["address"] = address
    return template


def analysis_run(obj: dict[str, Any]) -> AnalysisRecord | None:
    """The analysis recorded on a workload object."""
    return parse_record((obj["metadata"].get("annotations") or {}).get(ANALYSIS_RUN))


async def fleet(
    kube: KubeClient,
    namespace: str,
    template: dict[str, Any],
    waves: dict[str, int],
    analysis: str = "web-health",
) -> None:
    """ConfigMap `app`, ``template``, and a Deployment per wave consuming `app`."""
    await install_template_crd(kube)
    if template["apiVersion"].startswith(ANALYSISTEMPLATES.group):
        await kube.create(ANALYSISTEMPLATES.path(namespace), template)
    else:
        await kube.create(ARGO_ANALYSISTEMPLATES.path(namespace), template)
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"MODE": "v1"}))
    spec = manifests.pod_spec(containers=[{
        "name": "app", "image": "registry.invalid/app:1",
        "envFrom": [{"configMapRef": {"name": "app"}}],
    }])  # fmt: skip
    for name, wave in waves.items():
        annotations = {**ENABLED, "kube-nudge.io/rollout-order": str(wave),
                       "kube-nudge.io/analysis": analysis}  # fmt: skip
        deployment = manifests.deployment(name, spec=spec, annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), deployment)


def analysed(obj: dict[str, Any], phase: AnalysisPhase) -> bool:
    record = analysis_run(obj)
    return (
        record is not None
        and record.config_hash == template_hash(obj, DEPLOYMENT)
        and record.phase is phase
    )


def measured(obj: dict[str, Any], at_least: int, *, errors: int = 0) -> bool:
    """Whether every metric of ``obj``'s running analysis was measured ``at_least`` times,
    with ``errors`` errors at least among them."""
    record = analysis_run(obj)
    if record is None or record.config_hash != template_hash(obj, DEPLOYMENT):
        return False
    states = [record.state(name) for name in ("error-ratio", "p99-latency")]
    return all(s.taken >= at_least and s.errors >= errors for s in states)
