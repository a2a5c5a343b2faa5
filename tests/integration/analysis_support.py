"""The analysis gate in integration tests: the template of docs/analysis.md made faster, and
what the tests read back. The CRD, the page's template and the exporter of each Deployment's
requests (scraped by the dev tools' real Prometheus, ``prometheus_support.prometheus_for``)
are the dev tools' (``kube_nudge_dev.analysis``), shared with the benchmark."""

from __future__ import annotations

import copy
from typing import Any

from kube_nudge.model.analysis import AnalysisRecord, parse_record
from kube_nudge.model.annotations import ANALYSIS_RUN
from kube_nudge_dev.analysis import (
    Exporter,
    documented_template,
    exporter_for,
    install_template_crd,
)

__all__ = [
    "FASTER",
    "WINDOW",
    "Exporter",
    "analysis_run",
    "example_template",
    "exporter_for",
    "install_template_crd",
]

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
