"""At kube-nudge's defaults (``debounce: auto``), the writes of one command coalesce: a
ConfigMap and a Secret changed by one ``kubectl apply -f`` of a multi-document file, or by
one ``helm upgrade``, roll their consumer exactly once, with the real kubectl and helm the
project builds. They run as subprocesses, so the controller (in this event loop) sees their
writes as they happen, not all at once after them.

The writer windows are sized for an API server ``ASSUMED_RTT`` away (model/pacing.py), so the
same commands also run through a proxy that holds each of their requests that long: the
writes then reach the API server as far apart as from a runner that far away, and still roll
once. The controller talks to the API server directly, as it does from inside the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge.model import BASELINE_HASH
from kube_nudge.model.pacing import ASSUMED_RTT
from kube_nudge_dev import manifests
from kube_nudge_dev.build import find_binary, helm_binary
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import wait_for_objects
from tests.integration.apiproxy import ApiProxy, proxy_for
from tests.integration.controller_support import expected_hash, running_controller
from tests.integration.rollout_timeline import DEPLOYMENT, Timeline, watching

pytestmark = pytest.mark.cluster

NAME = "app"


def config_documents(namespace: str, level: str) -> list[dict[str, Any]]:
    """The ConfigMap and the Secret of one release, both changed by ``level``."""
    configmap = manifests.configmap("app", {"LEVEL": level})
    secret: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app-secret"},
        "stringData": {"TOKEN": f"token-{level}"},
    }  # fmt: skip
    for doc in (configmap, secret):
        doc["metadata"]["namespace"] = namespace
    return [configmap, secret]


def consumer() -> dict[str, Any]:
    """A Deployment reading the ConfigMap's and the Secret's keys into env vars."""
    spec = manifests.env_consumer()
    spec["containers"][0]["env"].append(
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "TOKEN"}}}
    )
    return manifests.deployment(NAME, spec=spec, annotations=ENABLED)


async def run(
    cluster: LocalCluster, home: Path, argv: list[str], stdin: str = "", via: Path | None = None
) -> None:
    """Run a command against the cluster without blocking the controller's event loop;
    ``via``: the kubeconfig it uses instead of the cluster's (a proxy's)."""
    env = {"KUBECONFIG": str(via or cluster.kubeconfig), "HOME": str(home)}
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(stdin.encode()), 120)
    assert process.returncode == 0, f"{argv[0]}: {err.decode()[-2000:]}"


def kubectl() -> str:
    binary = find_binary("kubectl")
    assert binary is not None, "kubectl is not built (make control-plane)"
    return str(binary)


def adopted(found: dict[str, dict[str, Any]]) -> bool:
    obj = found.get(NAME)
    return obj is not None and BASELINE_HASH in (obj["metadata"].get("annotations") or {})


async def rollouts_after(
    kube: KubeClient, cluster: LocalCluster, namespace: str, change: Callable[[], Awaitable[None]]
) -> int:
    """Template changes of the consumer caused by ``change()``, once the controller, running
    at its defaults, has rolled to the final config and has nothing left queued."""
    async with (
        watching(kube, namespace) as timeline,
        running_controller(cluster, namespace, debounce=None) as running,
    ):
        await wait_for_objects(kube, DEPLOYMENTS.path(namespace), adopted, timeout=30)
        await running.controller.settled(timeout=30)
        start = len(timeline.entries)
        await change()
        obj = await kube.get(DEPLOYMENTS.path(namespace, NAME))
        final = await expected_hash(kube, DEPLOYMENT, obj, running.hmac_key)
        await timeline.until(lambda: timeline.seen[NAME].template == final, timeout=30)
        await running.controller.settled(timeout=30)  # nothing left queued that could roll
        return count_templates(timeline, start)


def count_templates(timeline: Timeline, start: int) -> int:
    return sum(1 for _, name, what in timeline.entries[start:] if what == "template")


def writes_apart(proxy: ApiProxy, namespace: str) -> float:
    """Seconds between the ConfigMap's and the Secret's writes as the proxy forwarded them
    (helm writes the Secret first, kubectl in the file's order)."""
    base = f"/api/v1/namespaces/{namespace}/"
    at = {r.path: r.at for r in proxy.requests if r.method in ("PATCH", "PUT")}
    return abs(at[base + "secrets/app-secret"] - at[base + "configmaps/app"])


Writer = Callable[[str, Path | None], Awaitable[None]]


async def rolls_once_from_far(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path, write: Writer
) -> float:
    """Assert that ``write`` of the next config, through a proxy ``ASSUMED_RTT`` away from
    the API server, rolls the consumer once; return how far apart its writes arrived."""
    async with proxy_for(cluster) as proxy:
        far = proxy.write_kubeconfig(tmp_path / "far.kubeconfig")
        proxy.delay_requests(ASSUMED_RTT)
        assert await rollouts_after(kube, cluster, namespace, lambda: write("debug", far)) == 1
        return writes_apart(proxy, namespace)


def kubectl_apply(cluster: LocalCluster, namespace: str, tmp_path: Path) -> Writer:
    """``kubectl apply -f`` of both documents at a level, through ``via`` if given."""

    async def apply(level: str, via: Path | None = None) -> None:
        text = yaml.safe_dump_all(config_documents(namespace, level))
        await run(cluster, tmp_path, [kubectl(), "apply", "-f", "-"], text, via)

    return apply


async def test_one_kubectl_apply_of_a_configmap_and_a_secret_rolls_once(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    apply = kubectl_apply(cluster, namespace, tmp_path)
    await apply("info", None)
    await kube.create(DEPLOYMENTS.path(namespace), consumer())
    assert await rollouts_after(kube, cluster, namespace, lambda: apply("debug", None)) == 1


async def test_one_kubectl_apply_still_rolls_once_against_an_api_server_100_ms_away(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Client-side apply reads each object, then patches it: its two writes arrive two
    round trips apart at least, within its quiet window."""
    apply = kubectl_apply(cluster, namespace, tmp_path)
    await apply("info", None)
    await kube.create(DEPLOYMENTS.path(namespace), consumer())
    apart = await rolls_once_from_far(kube, cluster, namespace, tmp_path, apply)
    assert apart >= 2 * ASSUMED_RTT, f"the writes were only {apart:.3f} s apart"


def helm_chart(namespace: str, tmp_path: Path) -> Path:
    """A chart of the ConfigMap and the Secret, their level a value."""
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: config\nversion: 0.1.0\n")
    documents = config_documents(namespace, "LEVEL_VALUE")
    template = yaml.safe_dump_all(documents).replace("LEVEL_VALUE", "{{ .Values.level }}")
    (chart / "templates" / "config.yaml").write_text(template)
    return chart


def helm_upgrade(cluster: LocalCluster, namespace: str, tmp_path: Path) -> Writer:
    """``helm upgrade --install`` of the chart at a level, through ``via`` if given."""
    chart, helm = helm_chart(namespace, tmp_path), str(helm_binary())

    async def upgrade(level: str, via: Path | None = None) -> None:
        argv = [helm, "upgrade", "--install", "config", str(chart), "-n", namespace,
                "--set", f"level={level}"]  # fmt: skip
        await run(cluster, tmp_path, argv, via=via)

    return upgrade


async def test_one_helm_upgrade_of_a_configmap_and_a_secret_rolls_once(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    upgrade = helm_upgrade(cluster, namespace, tmp_path)
    await upgrade("info", None)
    await kube.create(DEPLOYMENTS.path(namespace), consumer())
    assert await rollouts_after(kube, cluster, namespace, lambda: upgrade("debug", None)) == 1


async def test_one_helm_upgrade_still_rolls_once_against_an_api_server_100_ms_away(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """helm writes each object with one request at least: a round trip apart at least."""
    upgrade = helm_upgrade(cluster, namespace, tmp_path)
    await upgrade("info", None)
    await kube.create(DEPLOYMENTS.path(namespace), consumer())
    apart = await rolls_once_from_far(kube, cluster, namespace, tmp_path, upgrade)
    assert apart >= ASSUMED_RTT, f"the writes were only {apart:.3f} s apart"
