"""GitOps never fights kube-nudge. A manifest (ConfigMap `app`, and Deployment `web`
reading it through an env var and a mounted volume, opted in) is re-applied every
``CADENCE`` seconds with the real kubectl, as Argo CD's self-heal or Flux's reconcile does,
while its ConfigMap's data changes; by client-side apply (Argo CD's default) and by
server-side apply under a GitOps field manager with ``--force-conflicts`` (Flux's
kustomize-controller, Argo CD with server-side apply); for strategies rollout, snapshot
(with its webhook) and hot (the pods' agents played by the test).

Throughout, a watch of the Deployment checks that no version loses what kube-nudge wrote;
re-applies that change no config change no template and get no write from kube-nudge; each
config change changes the template exactly once (hot: a volume key not at all, it is
reloaded in place); and the drift checks of both apply styles (``kubectl diff`` and
``kubectl diff --server-side``) find nothing."""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.agentwire import LOADED_AT
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import deployment_complete, until, wait_for_object
from tests.integration.controller_support import (
    Running,
    eventually,
    expected_hash,
    running_controller,
    template_hash,
)
from tests.integration.gitops_support import (
    APPLIERS,
    CLIENT_SIDE,
    SERVER_SIDE,
    Applier,
    Reapplier,
    Watched,
    deployment_writes,
    kubectl,
    manifest_drift,
    reapplying,
    watching_deployment,
    write_manifest,
)
from tests.integration.hot_support import (
    DATA,
    agent_key_secret,
    agent_reports,
    hot_consumer,
    nudged,
    replicasets,
)
from tests.integration.snapshot_support import serving_snapshot_webhook

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]
#: Where a snapshot workload's template names copies instead of the manifest's sources.
COPY_NAMES = [
    '.spec.template.spec.containers[?(@.name=="app")].env[?(@.name=="LEVEL")]'
    ".valueFrom.configMapKeyRef.name",
    '.spec.template.spec.volumes[?(@.name=="cfg")].configMap.name',
]
#: Seconds between two syncs (Argo CD retries self-heal after 5 s by default, Flux
#: reconciles every few minutes: shorter here, to keep the test in seconds).
CADENCE = 2.0
#: Re-applies that change nothing, before the first change and after each.
QUIET = 2
#: The changes a GitOps commit makes to the ConfigMap, in order, and the template changes
#: each must cause, by strategy: with hot, app.conf reaches the pods only through the
#: volume and is reloaded in place; LEVEL is an env var and rolls.
CHANGES: dict[str, list[tuple[dict[str, str], int]]] = {
    "rollout": [({"app.conf": "port 81"}, 1), ({"LEVEL": "debug"}, 1)],
    "snapshot": [({"app.conf": "port 81"}, 1), ({"LEVEL": "debug"}, 1)],
    "hot": [({"app.conf": "port 81"}, 0), ({"LEVEL": "debug"}, 1)],
}


def documents(
    namespace: str, strategy: str, data: dict[str, str], template: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The manifest in Git: the ConfigMap and its consumer, opted in with ``strategy``,
    its pod template annotated with ``template``."""
    annotations = {**ENABLED, "kube-nudge.io/strategy": strategy}
    configmap = manifests.configmap("app", data)
    deployment = manifests.deployment(
        "web", replicas=2, spec=hot_consumer(), annotations=annotations,
        template_annotations=template,
    )  # fmt: skip
    for document in (configmap, deployment):
        document["metadata"]["namespace"] = namespace
        if not document["metadata"]["annotations"]:
            del document["metadata"]["annotations"]  # as a manifest without any reads
    return [configmap, deployment]


@pytest.mark.parametrize("strategy", sorted(CHANGES))
@pytest.mark.parametrize("applier", APPLIERS, ids=lambda a: a.name)
async def test_a_reapplied_manifest_never_fights_kube_nudge(
    kube: AdminClient,
    cluster: LocalCluster,
    namespace: str,
    tmp_path: Path,
    applier: Applier,
    strategy: str,
) -> None:
    write_manifest(tmp_path / "app.yaml", documents(namespace, strategy, DATA))
    if strategy == "hot":
        await kube.create(SECRETS.path(namespace), agent_key_secret())
    code, _, err = await kubectl(cluster, tmp_path, *applier.apply, str(tmp_path / "app.yaml"))
    assert code == 0, err
    await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web", deployment_complete, timeout=60)
    async with running_controller(cluster, namespace, debounce=None) as running:
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: BASELINE_HASH in (o["metadata"].get("annotations") or {}), timeout=30,
        )  # fmt: skip
        sync = Sync(kube, cluster, namespace, tmp_path, applier, strategy, running)
        if strategy == "snapshot":
            async with serving_snapshot_webhook(kube, cluster, namespace, running, "web"):
                rolls = await sync.run()
        else:
            rolls = await sync.run()
    assert await replicasets(kube, namespace) == 1 + rolls


@dataclass
class Sync:
    """One GitOps repository, its manifest in ``home``/app.yaml, synced by ``applier``."""

    kube: AdminClient
    cluster: LocalCluster
    namespace: str
    home: Path
    applier: Applier
    strategy: str
    running: Running

    async def run(self) -> int:
        """Re-apply the manifest on the cadence through quiet spells and each change of
        ``CHANGES``; returns the template changes seen."""
        manifest = self.home / "app.yaml"
        data = dict(DATA)
        rolls = 0
        async with (
            watching_deployment(self.kube, self.namespace, "web") as watched,
            reapplying(self.cluster, self.home, self.applier, manifest, CADENCE) as (loop, task),
        ):
            await self.quiet(loop, task, watched, rolls)
            for change, template_changes in CHANGES[self.strategy]:
                data.update(change)  # a commit, synced at the next tick
                write_manifest(manifest, documents(self.namespace, self.strategy, data))
                await wait_for_object(
                    self.kube, CONFIGMAPS.path(self.namespace), "app",
                    lambda o: o.get("data") == data, timeout=30,
                )  # fmt: skip
                if self.strategy == "hot" and not template_changes:
                    await agents_reload(self.kube, self.namespace, data)
                await self.converged()
                rolls += template_changes
                await self.quiet(loop, task, watched, rolls)
                await self.no_drift()
            assert watched.lost == [], f"kube-nudge's annotations were removed: {watched.lost}"
        self.report(loop, watched)
        return rolls

    async def quiet(
        self, loop: Reapplier, task: asyncio.Task[None], watched: Watched, rolls: int
    ) -> None:
        """``QUIET`` re-applies that change no config: no template change, no kube-nudge
        write of the Deployment, the controller settled after them."""
        await self.running.controller.settled(timeout=30)
        writes = len(deployment_writes(self.cluster, self.namespace))
        await loop.after(loop.applies + QUIET, task)
        await self.running.controller.settled(timeout=30)
        assert watched.template_changes == rolls, watched.history()
        assert len(deployment_writes(self.cluster, self.namespace)) == writes

    async def converged(self) -> None:
        """Until the hash kube-nudge recorded (on the template, else its baseline) is the
        one the sources give now, delivered (hot), and the Deployment's rollout complete."""
        path = DEPLOYMENTS.path(self.namespace, "web")

        async def recorded() -> bool:
            web = await self.kube.get(path)
            want = await expected_hash(self.kube, DEPLOYMENT, web, self.running.hmac_key)
            annotations = web["metadata"].get("annotations") or {}
            have = template_hash(web, DEPLOYMENT) or annotations.get(BASELINE_HASH)
            return have == want and HOT_RELOAD not in annotations and deployment_complete(web)

        await until(recorded, timeout=60)

    async def no_drift(self) -> None:
        """Neither apply style's drift check, both dry runs through the API server (and so
        through the snapshot webhook), sees a difference between the manifest and the live
        objects. A diff computed without the API server sees one only with strategy
        snapshot: the names of the copies in place of the sources'."""
        manifest = self.home / "app.yaml"
        for applier in (CLIENT_SIDE, SERVER_SIDE):
            code, out, err = await kubectl(self.cluster, self.home, *applier.diff, str(manifest))
            assert code == 0, f"kubectl {' '.join(applier.diff)}: exit {code}\n{out}{err}"
        configmap, deployment = yaml.safe_load_all(manifest.read_text())
        live = [await self.kube.get(r.path(self.namespace, n))
                for r, n in ((DEPLOYMENTS, "web"), (CONFIGMAPS, "app"))]  # fmt: skip
        found = manifest_drift(deployment, live[0]) + manifest_drift(configmap, live[1])
        assert sorted(found) == (COPY_NAMES if self.strategy == "snapshot" else [])

    def report(self, loop: Reapplier, watched: Watched) -> None:
        """The numbers docs/gitops.md quotes (pytest -s shows them)."""
        said = collections.Counter(
            line.split()[-1] for out in loop.outputs for line in out.splitlines()
            if line.startswith("deployment.apps/")
        )  # fmt: skip
        writes = len(deployment_writes(self.cluster, self.namespace))
        print(
            f"\n{self.applier.name} {self.strategy}: {loop.applies} applies (Deployment: "
            f"{dict(said)}), {watched.versions} versions of it seen, "
            f"{watched.template_changes} template changes, {writes} kube-nudge writes of it"
        )


async def agents_reload(kube: AdminClient, namespace: str, data: dict[str, str]) -> None:
    """Play each nudged pod's agent: it reloads ``data`` and says so."""
    for pod in await nudged(kube, namespace):
        await agent_reports(kube, namespace, pod["metadata"]["name"], LOADED_AT, data)


@pytest.mark.parametrize("applier", APPLIERS, ids=lambda a: a.name)
async def test_a_commit_dropping_the_last_template_annotation(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path, applier: Applier
) -> None:
    """The one removal measured, inherent to client-side apply: a commit that removes the
    last annotation of the manifest's pod template makes kubectl's three-way patch delete
    the whole map (``annotations: null``), kube-nudge's hash with it. That commit changes
    the template anyway (one rollout, its own); kube-nudge then records the running config
    as its baseline and rolls nothing more, and the next config change rolls once.
    Server-side apply removes only the annotation it applied."""
    manifest, team = tmp_path / "app.yaml", {"team": "a"}

    async def commit(data: dict[str, str], template: dict[str, str] | None) -> None:
        write_manifest(manifest, documents(namespace, "rollout", data, template))
        code, _, err = await kubectl(cluster, tmp_path, *applier.apply, str(manifest))
        assert code == 0, err

    def annotations(obj: dict[str, Any], on_template: bool = False) -> dict[str, str]:
        holder = obj["spec"]["template"] if on_template else obj
        return dict(holder["metadata"].get("annotations") or {})

    path, client_side = DEPLOYMENTS.path(namespace), applier == CLIENT_SIDE
    await commit(DATA, team)
    await wait_for_object(kube, path, "web", deployment_complete, timeout=60)
    async with (
        running_controller(cluster, namespace, debounce=None) as running,
        watching_deployment(kube, namespace, "web") as watched,
    ):
        await wait_for_object(kube, path, "web", lambda o: BASELINE_HASH in annotations(o),
                              timeout=30)  # fmt: skip
        await commit({**DATA, "LEVEL": "debug"}, team)
        rolled = await wait_for_object(kube, path, "web", lambda o: template_hash(o, DEPLOYMENT)
                                       is not None, timeout=30)  # fmt: skip
        await commit({**DATA, "LEVEL": "debug"}, None)
        after = await wait_for_object(
            kube, path, "web", lambda o: "team" not in annotations(o, on_template=True)
            and (not client_side or BASELINE_HASH in annotations(o)), timeout=30,
        )  # fmt: skip
        await running.controller.settled(timeout=30)
        recorded = annotations(after).get(BASELINE_HASH) or template_hash(after, DEPLOYMENT)
        assert recorded == template_hash(rolled, DEPLOYMENT)  # the same config, not rolled
        lost = [["kube-nudge.io/config-hash"]] if client_side else []
        assert [names for _, names in watched.lost] == lost
        await eventually(lambda: watched.template_changes >= 2, timeout=10)  # the watch's lag
        assert watched.template_changes == 2, watched.history()  # kube-nudge's, the commit's
        await commit({**DATA, "LEVEL": "warn"}, None)
        await wait_for_object(kube, path, "web", lambda o: template_hash(o, DEPLOYMENT)
                              not in (None, recorded), timeout=30)  # fmt: skip
        await running.controller.settled(timeout=30)
        await eventually(lambda: watched.template_changes >= 3, timeout=10)
        assert watched.template_changes == 3, watched.history()
