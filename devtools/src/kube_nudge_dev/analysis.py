"""The analysis gate's parts that the integration tests and the benchmark share: kube-nudge's
AnalysisTemplate CRD as the chart ships it, the template of docs/analysis.md (the page's own
example), and an exporter of each Deployment's HTTP requests and their latency as an app
would export them, its error ratio and latency set by the caller (scraped by the dev tools'
real Prometheus, ``kube_nudge_dev.prometheus``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kube_nudge.kube.client import KubeClient
from kube_nudge_dev.chartapply import apply_crd
from kube_nudge_dev.cluster import free_port
from kube_nudge_dev.documents import between

__all__ = [
    "BUCKETS",
    "CRD",
    "PAGE",
    "REQUESTS_PER_SCRAPE",
    "App",
    "Exporter",
    "documented_template",
    "exporter_for",
    "install_template_crd",
]

REPO = Path(__file__).resolve().parents[3]
CRD = REPO / "deploy/helm/kube-nudge/crds/analysistemplates.yaml"
PAGE = REPO / "docs/analysis.md"
BEGIN, END = "<!-- analysis-example:begin -->", "<!-- analysis-example:end -->"
BUCKETS = (0.1, 0.25, 0.5, 1.0)
REQUESTS_PER_SCRAPE = 100


async def install_template_crd(kube: KubeClient) -> None:
    """The chart's CRD (crds/analysistemplates.yaml), Established."""
    await apply_crd(kube, yaml.safe_load(CRD.read_text()))


def documented_template() -> dict[str, Any]:
    """The AnalysisTemplate of docs/analysis.md, as the page shows it."""
    block = between(PAGE.read_text(), BEGIN, END).strip()
    return dict(yaml.safe_load(block.removeprefix("```yaml").removesuffix("```")))


@dataclass
class App:
    """What one Deployment's app does: the share of its requests that fail, and how long
    they take."""

    error_ratio: float = 0.01
    latency: float = 0.05
    served: float = 0.0
    failed: float = 0.0
    slower_than: dict[float, float] = field(default_factory=dict)


class Exporter:
    """``http_requests_total{namespace, deployment, code}`` and
    ``http_request_duration_seconds`` of each app, ``REQUESTS_PER_SCRAPE`` requests more at
    every scrape, failing and taking as long as the caller sets."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.apps: dict[str, App] = {}
        self.port = free_port()
        self.also: Callable[[], bytes] | None = None
        """More of the same scrape (the in-process controller's own metrics, so the chart's
        alert rules see them under the job they match)."""

    def app(self, name: str) -> App:
        """The app of Deployment ``name`` (exported from now on)."""
        return self.apps.setdefault(name, App())

    def render(self) -> str:
        """One scrape: every app's series, each app ``REQUESTS_PER_SCRAPE`` requests on."""
        lines = ["# TYPE http_requests_total counter",
                 "# TYPE http_request_duration_seconds histogram"]  # fmt: skip
        for name, app in sorted(self.apps.items()):
            app.served += REQUESTS_PER_SCRAPE * (1 - app.error_ratio)
            app.failed += REQUESTS_PER_SCRAPE * app.error_ratio
            labels = f'namespace="{self.namespace}",deployment="{name}"'
            lines.append(f'http_requests_total{{{labels},code="200"}} {app.served}')
            lines.append(f'http_requests_total{{{labels},code="500"}} {app.failed}')
            for le in BUCKETS:
                if app.latency <= le:
                    app.slower_than[le] = app.slower_than.get(le, 0.0) + REQUESTS_PER_SCRAPE
                count = app.slower_than.get(le, 0.0)
                lines.append(f'http_request_duration_seconds_bucket{{{labels},le="{le}"}} {count}')
            total = app.served + app.failed
            lines.append(f'http_request_duration_seconds_bucket{{{labels},le="+Inf"}} {total}')
            lines.append(f"http_request_duration_seconds_count{{{labels}}} {total}")
        text = "\n".join(lines) + "\n"
        if self.also is not None:
            text += self.also().decode()
        return text

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=self.render(), content_type="text/plain")


@contextlib.asynccontextmanager
async def exporter_for(namespace: str) -> AsyncIterator[Exporter]:
    """A running exporter on 127.0.0.1 (a free port), stopped on exit."""
    exporter = Exporter(namespace)
    app = web.Application()
    app.router.add_get("/metrics", exporter._metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", exporter.port).start()
    try:
        yield exporter
    finally:
        await runner.cleanup()
