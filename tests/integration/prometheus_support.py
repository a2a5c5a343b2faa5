"""A real Prometheus (the pinned server, built from the Go module proxy like promtool) that
scrapes one `kube-nudge run` and evaluates the chart's alert rules, for the alert tests.

The rules are the chart's own (deploy/helm/kube-nudge/monitoring/alerts.yaml) with one
change, in this copy only: every ``for:`` is 0s, so an alert fires at the first evaluation
whose expression returns something instead of minutes or an hour later. The expressions,
their ranges and thresholds are unchanged. Scrapes and evaluations happen every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx
import yaml

from kube_nudge_dev.prometheus import prometheus_process
from tests.monitoring_support import rules_document

JOB = "kube-nudge"
"""The scrape job's name: the rules match ``job=~".*kube-nudge.*"``, as the chart's
ServiceMonitor and PodMonitor are named after the release."""
POD = "kube-nudge-0"
WAIT = 60.0
"""Seconds an alert or a series may take to show (never slept: polled)."""


@dataclass(frozen=True)
class Alert:
    """An active alert: its labels (``alertname`` among them) and state."""

    labels: Mapping[str, str]
    state: str  # pending | firing
    value: float
    """What its expression returned when it became active."""

    @property
    def name(self) -> str:
        return self.labels["alertname"]


class Prometheus:
    """The HTTP API of a running Prometheus."""

    def __init__(self, port: int, namespace: str, log: Path, pid: int = 0) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.namespace = namespace
        self.log = log
        """What Prometheus printed (rule evaluation errors among it)."""
        self.pid = pid

    def stop(self) -> None:
        """SIGSTOP the server: it accepts connections (the kernel does) but answers
        nothing, as a hung or overloaded Prometheus; ``resume`` brings it back."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a stopped server: it answers again, with what it scraped before."""
        os.kill(self.pid, signal.SIGCONT)

    async def _get(self, path: str, **params: str) -> Any:
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            response = await http.get(path, params=params)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` returns now."""
        data = await self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        result: list[dict[str, Any]] = data["result"]
        return result

    async def alerts(self) -> list[Alert]:
        """Every active (pending or firing) alert."""
        data = await self._get("/api/v1/alerts")
        return [Alert(a["labels"], a["state"], float(a["value"])) for a in data["alerts"]]

    async def rules(self) -> list[dict[str, Any]]:
        """Every rule with its health, last error and last evaluation."""
        data = await self._get("/api/v1/rules")
        return [
            {**rule, "group_evaluated": group["lastEvaluation"]}
            for group in data["groups"]
            for rule in group["rules"]
        ]

    async def firing(self, alert: str, timeout: float = WAIT, **labels: str) -> Alert:
        """Wait until ``alert`` fires with (at least) ``labels``; return it."""
        active: list[Alert] = []

        async def fired() -> bool:
            active[:] = await self.alerts()
            return any(_firing(a, alert, labels) for a in active)

        await poll(fired, timeout, lambda: f"{alert} {labels} never fired; active: {active}")
        return next(a for a in active if _firing(a, alert, labels))

    async def returns(self, expr: str, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Wait until ``expr`` returns a series (a scrape has brought it); return them."""
        found: list[dict[str, Any]] = []

        async def some() -> bool:
            found[:] = await self.query(expr)
            return bool(found)

        await poll(some, timeout, lambda: f"{expr} returned nothing")
        return found

    async def evaluated_after(self, when: float, timeout: float = WAIT) -> None:
        """Wait until every rule was evaluated again after ``when`` (Unix seconds), on
        samples scraped after it: two scrape intervals later."""

        async def evaluated() -> bool:
            return all(_unix(rule["group_evaluated"]) > when + 2 for rule in await self.rules())

        await poll(evaluated, timeout, lambda: f"rules not evaluated after {when}")


def _firing(alert: Alert, name: str, labels: Mapping[str, str]) -> bool:
    return (
        alert.name == name
        and alert.state == "firing"
        and all(alert.labels.get(k) == v for k, v in labels.items())
    )


def _unix(timestamp: str) -> float:
    """RFC 3339 with nanoseconds, as Prometheus writes ``lastEvaluation``, in Unix seconds."""
    head, _, fraction = timestamp.rstrip("Z").partition(".")
    seconds = datetime.fromisoformat(head + "+00:00").timestamp()
    return seconds + float(f"0.{fraction or 0}")


async def poll(
    check: Callable[[], Awaitable[bool]], timeout: float, why: Callable[[], str]
) -> None:
    """Wait until the async ``check`` passes, asking every 0.2 s; AssertionError with
    ``why()`` after ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.2)
    except TimeoutError:
        raise AssertionError(why()) from None


def rules_for_tests() -> dict[str, Any]:
    """The chart's rule groups with every ``for:`` at 0s (this copy only)."""
    spec = rules_document()["spec"]
    for group in spec["groups"]:
        for rule in group["rules"]:
            rule["for"] = "0s"
    return dict(spec)


def scrape_config(
    target_port: int, namespace: str, rules_file: Path, more: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """Scrape the replica at ``target_port`` every second as the chart's ServiceMonitor
    would label it (job, namespace, pod), and ``more`` scrape configs; evaluate
    ``rules_file`` every second."""
    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules_file)],
        "scrape_configs": [{
            "job_name": JOB,
            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"],
                                "labels": {"namespace": namespace, "pod": POD}}],
        }, *more],
    }  # fmt: skip


@contextlib.asynccontextmanager
async def prometheus_for(
    target_port: int, namespace: str, into: Path, more: Sequence[dict[str, Any]] = ()
) -> AsyncIterator[Prometheus]:
    """A Prometheus scraping ``127.0.0.1:target_port`` (labelled ``namespace``) and ``more``
    scrape configs, with the test's copy of the chart's rules, its data and log under
    ``into``; stopped on exit. ``$PROMETHEUS`` points at another binary than the pinned one."""
    rules_file = into / "rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules_for_tests()))
    config = scrape_config(target_port, namespace, rules_file, more)
    async with prometheus_process(config, into, ready_within=WAIT) as running:
        prometheus = Prometheus(running.port, namespace, running.log, running.pid)
        try:
            yield prometheus
        finally:
            prometheus.resume()  # a stopped process can't be terminated
