"""Every alert of the chart fires in a real Prometheus from a real event, and a quiet
controller fires none.

Each test runs a real `kube-nudge run` process against the session cluster and a real
Prometheus (tests/integration/prometheus_support.py) that scrapes it every second and
evaluates the chart's rules, copied with every ``for:`` at 0s (the test's copy only: the
expressions, their ranges and thresholds are the chart's). The events are real: a config
that never becomes Ready, missing config, a flapping source, a receiver that refuses, an
account that may not write or take the Lease, watches whose history was compacted away,
a ``--workload`` whose CRD is not installed, and the process stopped.

KubeNudgeRolloutFailed, KubeNudgeWatchRestarts and KubeNudgeNotificationsFailing read
counters through ``increase()``: they fire only because those counters are exported at 0
from the start (a series born at its first event is born at 1, which ``increase()`` never
counts; issue 36).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until
from tests.integration.accounts import Rule, account_kubeconfig
from tests.integration.apiproxy import proxy_for
from tests.integration.controller_support import Replica, start_replica
from tests.integration.fakekubelet import FakeKubelet
from tests.integration.prometheus_support import JOB, Prometheus, prometheus_for
from tests.integration.rollout_timeline import (
    all_done,
    change,
    held_for,
    kubelet_fleet,
    node_for,
    valid,
    watching,
)
from tests.monitoring_support import dashboard, dashboard_exprs, rules, selectors
from tests.webhook_receiver import Answer, Server

pytestmark = pytest.mark.cluster

#: What the controller reads in a namespace: sources, pods, every built-in kind.
READS: list[Rule] = [
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "pods"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets",
                                          "replicasets", "controllerrevisions"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
]  # fmt: skip
#: Writing workloads, for an account that may do everything but take the Lease.
WRITES: list[Rule] = [
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"],
     "verbs": ["patch", "update"]},
    {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["patch", "update"]},
]  # fmt: skip


@contextlib.asynccontextmanager
async def watched(
    kubeconfig: Path, namespace: str, into: Path, *args: str
) -> AsyncIterator[tuple[Replica, Prometheus]]:
    """`kube-nudge run ARGS` on ``namespace`` and a Prometheus scraping it; both stopped on
    exit. The replica has been scraped once when this yields."""
    replica = await start_replica(kubeconfig, namespace, into / "replica.log", extra_args=args)
    try:
        async with prometheus_for(replica.port, namespace, into) as prometheus:
            await prometheus.returns(f'up{{job="{JOB}"}} == 1')
            yield replica, prometheus
    finally:
        await stop(replica)


async def stop(replica: Replica) -> None:
    """Stop the replica as Kubernetes would (SIGTERM), if it still runs."""
    if replica.proc.returncode is None:
        replica.proc.terminate()
        await asyncio.wait_for(replica.proc.wait(), 30)


def key_file(into: Path) -> str:
    """``--hmac-key-file`` of a fresh key: for accounts that may not read the key Secret."""
    path = into / "hmac.key"
    path.write_text(secrets.token_hex(32))
    return f"--hmac-key-file={path}"


async def test_a_quiet_controller_fires_no_alert_and_exports_every_series_the_rules_read(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """A workload rolls a change, its receiver takes every notification: no alert, and no
    rule in error. Before any event, every series a rule selects is there."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
        "web", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED))  # fmt: skip
    async with (
        receiving(tmp_path, {"ok": ["rolling", "complete", "failed"]}) as (_, receivers_file),
        watched(cluster.kubeconfig, namespace, tmp_path, "--leader-elect", "--debounce=0",
                f"--notify-receivers-file={receivers_file}") as (replica, prometheus),
    ):  # fmt: skip
        # Straight after the first scrape, before any event: every series a rule selects.
        for rule in rules():
            for selector in selectors(rule["expr"]):
                await prometheus.returns(f"count({selector})", timeout=10)
        await until(replica.leading, 30)
        await change_level(kube, namespace, "debug")
        await prometheus.returns('kube_nudge_rollouts_finished_total{outcome="complete"} == 1')
        await prometheus.evaluated_after(time.time())
        assert await prometheus.alerts() == []
        assert [r["name"] for r in await prometheus.rules() if r["health"] != "ok"] == []


async def change_level(kube: AdminClient, namespace: str, level: str) -> None:
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"LEVEL": level}})


async def test_the_first_failed_rollout_fires_its_alert_the_stopped_line_and_the_refused_receiver(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """One config that never becomes Ready, the first failure since the start: a1 fails
    its rollout, a2 (a later order) is held on the stopped line, and the receiver that
    refuses the announcements is given up on. Then every dashboard panel has data."""
    wanted = {"refuse": ["failed", "line-stopped"], "ok": ["rolling", "complete", "failed"]}
    async with (
        receiving(tmp_path, wanted) as (receivers, receivers_file),
        FakeKubelet(kube, node_for(namespace), valid),
    ):
        receivers.scripts["refuse"] = [Answer(403)]
        refusing = receivers.receiver("refuse", index=0)  # the first in the file
        await kubelet_fleet(kube, namespace, {"a1": 1, "a2": 2})
        async with (
            watching(kube, namespace) as timeline,
            watched(cluster.kubeconfig, namespace, tmp_path, "--leader-elect", "--debounce=0",
                    f"--notify-receivers-file={receivers_file}") as (replica, prometheus),
        ):  # fmt: skip
            await until(replica.leading, 30)
            start = len(timeline.entries)
            await change(kube, namespace, "v2")  # a good config: both roll, in order
            await timeline.until(lambda: all_done(timeline, start, ("a1", "a2")))
            await change(kube, namespace, "broken")
            await timeline.until(lambda: timeline.seen["a1"].failed)
            failed = await prometheus.firing("KubeNudgeRolloutFailed", kind="Deployment")
            assert failed.labels["namespace"] == namespace
            await held_for(kube, namespace, "LineStopped", "a2")
            await prometheus.firing("KubeNudgeLineStopped")
            await prometheus.firing("KubeNudgeNotificationsFailing", receiver=refusing.label)
            await every_panel_has_data(prometheus)


@contextlib.asynccontextmanager
async def receiving(into: Path, kinds: dict[str, list[str]]) -> AsyncIterator[tuple[Server, Path]]:
    """A webhook receiver for each path of ``kinds`` (taking those notification kinds), in
    that order in a ``--notify-receivers-file``; they answer 200 unless scripted."""
    server = Server()
    await server.start()
    path = into / "receivers.json"
    path.write_text(json.dumps([{"url": server.url(p), "on": on} for p, on in kinds.items()]))
    try:
        yield server, path
    finally:
        await server.close()


async def every_panel_has_data(prometheus: Prometheus) -> None:
    """Each query of the Grafana dashboard returns a series (a defined 0 counts), with the
    dashboard's variables as Grafana would fill them for this target."""
    empty = []
    for title, expr in dashboard_exprs(dashboard()):
        query = (
            expr.replace("$namespace", prometheus.namespace)
            .replace("$job", JOB)
            .replace("$__rate_interval", "1m")
        )
        if not await prometheus.query(query):
            empty.append(f"{title}: {query}")
    assert empty == []


def window_closed_now() -> str:
    """A one-hour rollout window (UTC) that opens two hours from now."""
    opens, closes = time.gmtime(time.time() + 7200), time.gmtime(time.time() + 10800)
    return f"{opens.tm_hour:02d}:{opens.tm_min:02d}-{closes.tm_hour:02d}:{closes.tm_min:02d} UTC"


async def test_held_for_missing_config_or_flapping_fires_but_not_for_approval_or_a_window(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    held = {
        "missing": ("absent", {}),
        "flapping": ("app", {"kube-nudge.io/max-rollouts": "1/10m"}),
        "approval": ("app", {"kube-nudge.io/approval": "required"}),
        "window": ("app", {"kube-nudge.io/rollout-window": window_closed_now()}),
    }
    for name, (source, more) in held.items():
        await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
            name, spec=manifests.env_consumer("LEVEL", source),
            annotations={**ENABLED, **more}))  # fmt: skip
    async with watched(cluster.kubeconfig, namespace, tmp_path, "--leader-elect",
                       "--debounce=0") as (replica, prometheus):  # fmt: skip
        await until(replica.leading, 30)
        await prometheus.firing("KubeNudgeWorkloadsHeld", state="held-missing")
        await prometheus.returns('kube_nudge_nudges_total{kind="Deployment"} == 0')
        await change_level(kube, namespace, "debug")  # flapping rolls, once
        await prometheus.returns('kube_nudge_nudges_total{kind="Deployment"} == 1')
        await change_level(kube, namespace, "trace")  # ... and is held the second time
        await prometheus.firing("KubeNudgeWorkloadsHeld", state="held-flapping")
        for state in ("held-approval", "held-window"):
            await prometheus.returns(f'kube_nudge_workloads{{state="{state}"}} == 1')
        await prometheus.evaluated_after(time.time())
        states = {a.labels.get("state") for a in await prometheus.alerts()}
        assert states == {"held-missing", "held-flapping"}


async def test_writes_the_account_may_not_make_fire_kube_nudge_errors(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """An account that may read but not write workloads (a Role missing its patch rule):
    every adoption of 20 workloads is refused and retried with backoff, well over the
    rule's 0.1 errors a second."""
    account = await account_kubeconfig(kube, cluster, namespace, "reader", tmp_path, rules=READS)
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    for index in range(20):
        await kube.create(DEPLOYMENTS.path(namespace), manifests.deployment(
            f"web-{index}", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED))  # fmt: skip
    async with watched(account, namespace, tmp_path, "--debounce=0", key_file(tmp_path)) as (
        _,
        prometheus,
    ):
        alert = await prometheus.firing("KubeNudgeErrors", stage="write")
        assert alert.labels["namespace"] == namespace


async def test_watches_restarted_after_compactions_fire_watch_restarts(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """Seven times, the watches go quiet, the history they would resume from is compacted
    away (the API server's 410 Expired, played by a proxy), and they are cut: each resource's
    watch restarts seven times, over the rule's six an hour."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"LEVEL": "info"}))
    async with proxy_for(cluster) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        async with watched(kubeconfig, namespace, tmp_path, "--debounce=0") as (_, prometheus):
            for restarts in range(1, 8):
                proxy.silence_watches()
                await change_level(kube, namespace, f"tick-{restarts}")
                latest = (await kube.get(CONFIGMAPS.path(namespace), limit=1))["metadata"]
                proxy.expire_before(int(latest["resourceVersion"]))
                proxy.cut_watches()
                await prometheus.returns(
                    'kube_nudge_watch_restarts_total{resource="configmaps", reason="expired"}'
                    f" >= {restarts}"
                )
            await prometheus.firing("KubeNudgeWatchRestarts", resource="configmaps")
            # The rule sees every restart the replica counted, the first one too: a counter
            # born at its first restart would show one fewer per reason (each cut is an error,
            # then the resumed watch is refused as expired).
            [counted] = await prometheus.query(
                'sum(kube_nudge_watch_restarts_total{resource="configmaps"})'
            )
            assert float(counted["value"][1]) == 14
            [rule] = [r for r in rules() if r["alert"] == "KubeNudgeWatchRestarts"]
            seen = {s["metric"]["resource"]: s for s in await prometheus.query(rule["expr"])}
            assert float(seen["configmaps"]["value"][1]) >= 14


async def test_a_workload_kind_not_served_fires_kind_unavailable(
    cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """``--workload`` for a custom resource whose CRD is not installed."""
    gizmos = "--workload=example.kube-nudge.io/v1/gizmos=spec.template"
    async with watched(cluster.kubeconfig, namespace, tmp_path, "--debounce=0", gizmos) as (
        _,
        prometheus,
    ):
        alert = await prometheus.firing("KubeNudgeWorkloadKindUnavailable")
        assert "gizmos" in alert.labels["resource"]


async def test_no_replica_leading_fires_no_leader_then_a_stopped_one_fires_down(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """A replica whose account may not take the Lease (its Role lacks the rule) runs, is
    scraped, and never leads; then it stops, and no target is up."""
    account = await account_kubeconfig(
        kube, cluster, namespace, "no-lease", tmp_path, rules=[*READS, *WRITES]
    )
    async with watched(account, namespace, tmp_path, "--leader-elect", key_file(tmp_path)) as (
        replica,
        prometheus,
    ):
        await prometheus.firing("KubeNudgeNoLeader")
        # KubeNudgeDown fired at every evaluation before the first scrape (no ``up`` yet,
        # and the test's rules fire at once). The evaluation that first fires NoLeader can
        # still have judged Down a moment before that scrape was stored (seen once, in a
        # TSDB dump: Down firing and NoLeader firing at the same evaluation): ask after the
        # next one.
        await prometheus.evaluated_after(time.time())
        assert not [a for a in await prometheus.alerts() if a.name == "KubeNudgeDown"]
        await stop(replica)
        await prometheus.firing("KubeNudgeDown")
