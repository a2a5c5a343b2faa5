"""The analysis gate on the real node: a real app whose error rate depends on a key of its
ConfigMap (``ERROR_RATE``, read at start into its environment), scraped on the real node by
the dev tools' real Prometheus, and a fleet in waves judged by docs/analysis.md's template.

The first change after adoption is a bad one (``ERROR_RATE`` 0.5): it rolls wave 1 only,
its containers serve errors, its analysis fails, and strategy snapshot rolls it back onto
the copies of the config it made at adoption (the template before the change names the
ConfigMap itself, which holds the bad value by then): the running containers read
``ERROR_RATE`` 0 again, and wave 2 never rolls. Then a good change (``ERROR_RATE`` 0 and a
new ``GREETING``) passes both waves. Everything is observed from the cluster and the
containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import ANALYSISTEMPLATES, CONFIGMAPS, DEPLOYMENTS, PODS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.analysis import AnalysisPhase
from kube_nudge.model.annotations import BASELINE_HASH
from kube_nudge.runtime.prometheus import PrometheusAccess, normalised
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.node import RealNode
from kube_nudge_dev.nodepods import on_real_node, python_container, read_in_container
from kube_nudge_dev.waiting import wait_for_objects
from tests.integration.analysis_support import (
    analysis_run,
    example_template,
    install_template_crd,
)
from tests.integration.controller_support import (
    background,
    posted,
    running_controller,
    template_hash,
)
from tests.integration.prometheus_support import prometheus_for

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]
DEPLOYMENT = BUILTIN_KINDS[0]
WAVES = {"shop-1": 1, "shop-2": 2}
PORT = 8000
TIMEOUT = 180.0

#: The app: every request fails with probability ERROR_RATE (from its ConfigMap, read at
#: start); it serves what it counted, and 100 more requests at every scrape.
APP = """
import http.server, os
rate = float(os.environ["ERROR_RATE"])
labels = 'namespace="{}",deployment="{}"'.format(os.environ["NAMESPACE"], os.environ["DEPLOYMENT"])
counts = {"200": 0.0, "500": 0.0}
def line(name, more, value):
    return name + "{" + labels + more + "} " + str(value) + chr(10)
class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        counts["200"] += 100 * (1 - rate)
        counts["500"] += 100 * rate
        total = sum(counts.values())
        body = "".join(line("http_requests_total", ',code="' + c + '"', n)
                       for c, n in counts.items())
        body += line("http_request_duration_seconds_bucket", ',le="0.1"', total)
        body += line("http_request_duration_seconds_bucket", ',le="+Inf"', total)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *args):
        pass
http.server.HTTPServer(("", PORT), Metrics).serve_forever()
""".replace("PORT", str(PORT))


def app_spec(image: str, name: str) -> dict[str, Any]:
    env = [
        *({"name": key, "valueFrom": {"configMapKeyRef": {"name": "app", "key": key}}}
          for key in ("ERROR_RATE", "GREETING")),
        {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "DEPLOYMENT", "value": name},
    ]  # fmt: skip
    container = python_container(image, APP, env=env, ports=[{"containerPort": PORT}])
    return on_real_node(manifests.pod_spec(containers=[container], terminationGracePeriodSeconds=1))


async def fleet(kube: KubeClient, namespace: str, image: str, address: str) -> None:
    await install_template_crd(kube)
    await kube.create(ANALYSISTEMPLATES.path(namespace), example_template(address))
    data = {"ERROR_RATE": "0", "GREETING": "hello"}
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", data))
    for name, wave in WAVES.items():
        annotations = {**ENABLED, "kube-nudge.io/rollout-order": str(wave),
                       "kube-nudge.io/analysis": "web-health",
                       "kube-nudge.io/strategy": "snapshot",
                       "kube-nudge.io/on-failure": "rollback"}  # fmt: skip
        deployment = manifests.deployment(name, spec=app_spec(image, name), annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), deployment)


async def follow_pods(kube: KubeClient, namespace: str, targets: Path) -> None:
    """Keep Prometheus's file of scrape targets to the running pods' addresses."""
    written = ""
    while True:
        pods = (await kube.get(PODS.path(namespace)))["items"]
        ips = sorted(f"{p['status']['podIP']}:{PORT}" for p in pods
                     if p["status"].get("podIP") and p["status"].get("phase") == "Running"
                     and not p["metadata"].get("deletionTimestamp"))  # fmt: skip
        text = json.dumps([{"targets": ips}])
        if text != written:
            targets.write_text(text)
            written = text
        await asyncio.sleep(1)  # a poll of the pod list, not a wait for an outcome


@contextlib.asynccontextmanager
async def scraped(kube: KubeClient, namespace: str, into: Path) -> AsyncIterator[str]:
    """A Prometheus scraping the app's pods every second (their own labels kept); its URL."""
    targets = into / "targets.json"
    targets.write_text("[]")
    apps = {"job_name": "apps", "honor_labels": True, "scrape_interval": "1s",
            "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}]}  # fmt: skip
    async with (
        background(follow_pods(kube, namespace, targets)),
        prometheus_for(0, namespace, into, more=[apps]) as prometheus,
    ):
        yield prometheus.url


async def deployments(kube: KubeClient, namespace: str, condition: Any) -> dict[str, Any]:
    return await wait_for_objects(kube, DEPLOYMENTS.path(namespace), condition, timeout=TIMEOUT)


def analysed(obj: dict[str, Any], phase: AnalysisPhase) -> bool:
    record = analysis_run(obj)
    return record is not None and record.phase is phase


async def running_env(
    kube: KubeClient, cluster: LocalCluster, namespace: str, name: str
) -> set[str]:
    """ERROR_RATE as each running container of ``name`` read it."""
    pods = (await kube.get(PODS.path(namespace), labelSelector=f"app={name}"))["items"]
    return {
        read_in_container(cluster, namespace, p["metadata"]["name"], "/proc/1/environ")
        .split("ERROR_RATE=")[1]
        .split("\0")[0]
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


async def test_a_bad_config_fails_its_analysis_on_the_real_node_and_is_rolled_back(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
    tmp_path: Path,
) -> None:
    async with scraped(kube, namespace, tmp_path) as address:
        await fleet(kube, namespace, controller_image.ref, address)
        await deployments(kube, namespace, lambda objs: len(objs) == 2 and all(
            (o.get("status") or {}).get("availableReplicas") == 1
            for o in objs.values()))  # fmt: skip
        access = PrometheusAccess((normalised(address),))
        async with running_controller(cluster, namespace, prometheus=access):
            adopted = await deployments(kube, namespace, lambda objs: all(
                BASELINE_HASH in (o["metadata"].get("annotations") or {})
                for o in objs.values()))  # fmt: skip
            before = {name: template_hash(obj, DEPLOYMENT) for name, obj in adopted.items()}

            # The first change after adoption is bad: wave 1's containers serve errors; its
            # analysis fails, and it rolls back onto the config adopted.
            await kube.merge_patch(
                CONFIGMAPS.path(namespace, "app"), {"data": {"ERROR_RATE": "0.5"}}
            )
            found = await deployments(kube, namespace, lambda objs: analysed(
                objs["shop-1"], AnalysisPhase.FAILED))  # fmt: skip
            [failed] = await posted(kube, namespace, "AnalysisFailed", timeout=TIMEOUT)
            assert "metric error-ratio measured [0.5" in failed["message"]
            [rolled_back] = await posted(kube, namespace, "RolledBack", timeout=TIMEOUT)
            assert "with the copies of its config made at adoption" in rolled_back["message"]
            await deployments(kube, namespace, lambda objs: (
                (objs["shop-1"].get("status") or {}).get("updatedReplicas") == 1
                and (objs["shop-1"].get("status") or {}).get("availableReplicas") == 1
                and template_hash(objs["shop-1"], DEPLOYMENT) != found["shop-1"]))  # fmt: skip

            async def good_again() -> bool:
                return await running_env(kube, cluster, namespace, "shop-1") == {"0"}

            async with asyncio.timeout(TIMEOUT):
                while not await good_again():
                    await asyncio.sleep(1)  # polled: the old pods terminate at their pace
            latest = await kube.get(DEPLOYMENTS.path(namespace, "shop-2"))
            assert template_hash(latest, DEPLOYMENT) == before["shop-2"]  # wave 2 never rolled

            # A good change then passes both waves.
            await kube.merge_patch(
                CONFIGMAPS.path(namespace, "app"), {"data": {"ERROR_RATE": "0", "GREETING": "hi"}}
            )
            await deployments(kube, namespace, lambda objs: all(
                analysed(o, AnalysisPhase.SUCCESSFUL) for o in objs.values()))  # fmt: skip
