"""``kube-nudge migrate`` before the switch, then the switch itself: what the report says
each Reloader or Wave workload will do is what kube-nudge --compat then does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import (
    change_after_pods_started,
    kube_nudge_cli,
    running_controller,
    template_hash,
)
from tests.schema_support import migrate_validator

pytestmark = pytest.mark.cluster

DEPLOYMENT = BUILTIN_KINDS[0]
AUTO = {"reloader.stakater.com/auto": "true"}


def consumer(name: str, annotations: dict[str, str], source: str = "app") -> dict[str, object]:
    return manifests.deployment(name, spec=manifests.env_consumer("LEVEL", source),
                                annotations=annotations)  # fmt: skip


def reloaders_leftovers() -> dict[str, object]:
    """What Reloader's defaults leave: pause-period and exclude lists on the workload, its
    env var (env-vars strategy) and its record on the template."""
    body = consumer("paused", {
        **AUTO, "deployment.reloader.stakater.com/pause-period": "5m",
        "configmaps.exclude.reloader.stakater.com/reload": "other",
    })  # fmt: skip
    template = body["spec"]["template"]  # type: ignore[index]
    template["metadata"]["annotations"] = {"reloader.stakater.com/last-reloaded-from": "{}"}
    template["spec"]["containers"][0]["env"].append(
        {"name": "STAKATER_APP_CONFIGMAP", "value": "6e4b1b0"}
    )
    return body


async def test_the_report_is_what_the_switch_does(
    kube: AdminClient, cluster: LocalCluster, namespace: str
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("old", {"LEVEL": "info"}))
    for body in [
        consumer("auto", AUTO),
        consumer("wave", {"wave.pusher.com/update-on-config-change": "true"}),
        reloaders_leftovers(),
        consumer("search", {"reloader.stakater.com/search": "true"}),
        consumer("plain", {}),  # no peer annotation: not in the report
        consumer("stale", AUTO, source="old"),
    ]:
        await kube.create(DEPLOYMENTS.path(namespace), body)
    # Its pods start, then its config changes: it runs stale config at the switch.
    await change_after_pods_started(kube, namespace, "debug", configmap="old")

    code, out = await kube_nudge_cli(cluster, namespace, "migrate", "-o", "json")
    assert code == 1, out  # something rolls at the switch
    document = json.loads(out)
    assert list(migrate_validator().iter_errors(document)) == []
    rows = {w["name"]: w for w in document["workloads"]}
    assert {n: (w["optedIn"], w["atSwitch"]) for n, w in rows.items()} == {
        "auto": (True, "none"), "wave": (True, "none"), "paused": (True, "none"),
        "search": (True, "none"), "stale": (True, "roll"),
    }  # fmt: skip
    assert rows["search"]["counts"].startswith("only sources annotated reloader.stakater.com/match")
    unmapped = rows["paused"]["unmapped"]
    assert [u.split(" → ")[0] for u in unmapped] == [
        "configmaps.exclude.reloader.stakater.com/reload",
        "deployment.reloader.stakater.com/pause-period",
        "reloader.stakater.com/last-reloaded-from",
        "env STAKATER_APP_CONFIGMAP (Reloader's env-vars strategy)",
    ]
    assert unmapped[0].endswith("kube-nudge.io/exclude: configmap/NAME,...")

    # The switch: kube-nudge --compat adopts what the report said, and rolls only `stale`.
    async with running_controller(cluster, namespace, compat=True) as running:
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "stale",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=60,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
    for name in ("auto", "wave", "paused", "search", "plain"):
        body = await kube.get(DEPLOYMENTS.path(namespace, name))
        assert template_hash(body, DEPLOYMENT) is None, name  # not rolled
    _, table = await kube_nudge_cli(cluster, namespace, "migrate")
    assert table.splitlines()[0].startswith("5 workload(s) with Reloader or Wave annotations")


async def test_markdown_for_a_migration_ticket(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(DEPLOYMENTS.path(namespace), reloaders_leftovers())
    code, out = await kube_nudge_cli(cluster, namespace, "migrate", "-o", "markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (
        "**kube-nudge migrate:** 1 workload(s) with Reloader or Wave annotations: 0 roll at the "
        "switch, 1 with settings that have no meaning here"
    )
    assert lines[4].startswith(f"| `{namespace}/Deployment/paused` | reloader |")
