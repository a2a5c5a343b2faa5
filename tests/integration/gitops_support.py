"""GitOps controllers played with the real kubectl: a manifest re-applied on a fixed cadence
(as Argo CD's self-heal or Flux's reconcile does) in the two ways those tools apply, their
drift checks (``kubectl diff``), and a watch of the Deployment that catches any removal of
what kube-nudge wrote on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import DEPLOYMENTS
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH, template_annotation
from kube_nudge.model.annotations import CHANGE_CAUSE, KEY_ID, ROLLED_AT
from kube_nudge.strategies.snapshot.model import SNAPSHOTS
from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster
from tests.integration.controller_support import audit_entries, background

#: The pod template of a Deployment.
TEMPLATE = ("spec", "template")
#: What kube-nudge writes that, once there, only kube-nudge may take away: on the pod
#: template, and on the workload's metadata.
KEPT_ON_TEMPLATE = (CONFIG_HASH, SNAPSHOTS)
KEPT_ON_METADATA = (ROLLED_AT, KEY_ID, CHANGE_CAUSE)


@dataclass(frozen=True)
class Applier:
    """One way a GitOps controller applies a manifest: the kubectl arguments of its apply
    and of the drift check that matches it (both end with ``-f``)."""

    name: str
    apply: tuple[str, ...]
    diff: tuple[str, ...]


#: Argo CD's default sync: client-side apply, a three-way merge with the
#: last-applied-configuration annotation; its drift check is the same three-way patch.
CLIENT_SIDE = Applier("client-side", ("apply", "-f"), ("diff", "-f"))
#: Flux's kustomize-controller (and Argo CD with ServerSideApply=true): server-side apply
#: under its own field manager, taking over conflicting fields; its drift check is a
#: server-side dry-run apply with the same manager, compared with the live object.
_SSA = ("--server-side", "--field-manager=kustomize-controller", "--force-conflicts")
SERVER_SIDE = Applier("server-side", ("apply", *_SSA, "-f"), ("diff", *_SSA, "-f"))
APPLIERS = (CLIENT_SIDE, SERVER_SIDE)


def kubectl_binary() -> str:
    """The pinned kubectl the project builds with the control plane."""
    binary = find_binary("kubectl")
    assert binary is not None, "kubectl is not built (make control-plane)"
    return str(binary)


async def kubectl(cluster: LocalCluster, home: Path, *args: str) -> tuple[int, str, str]:
    """Run kubectl against the cluster without blocking the event loop (the controller
    runs in it): (exit code, stdout, stderr)."""
    env = {"KUBECONFIG": str(cluster.kubeconfig), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    process = await asyncio.create_subprocess_exec(
        kubectl_binary(), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def write_manifest(path: Path, documents: list[dict[str, Any]]) -> None:
    """Write the manifest in one step (a rename), so an apply in flight reads either the
    old file or the new one, never half of it: as a GitOps tool reads one commit."""
    partial = path.with_suffix(".partial")
    partial.write_text(yaml.safe_dump_all(documents))
    partial.replace(path)


@dataclass
class Reapplier:
    """Applies the manifest every ``cadence`` seconds, whatever it holds now."""

    cluster: LocalCluster
    home: Path
    applier: Applier
    manifest: Path
    cadence: float
    applies: int = 0
    outputs: list[str] = field(default_factory=list)
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        """The loop: a failed apply fails the test (after() raises it)."""
        while True:
            code, out, err = await kubectl(
                self.cluster, self.home, *self.applier.apply, str(self.manifest)
            )
            assert code == 0, f"kubectl {' '.join(self.applier.apply)}: {err}"
            self.outputs.append(out)
            self.applies += 1
            self._done.set()
            await asyncio.sleep(self.cadence)  # the sync cadence is the scenario itself

    async def after(self, count: int, task: asyncio.Task[None], timeout: float = 60) -> None:
        """Wait until ``count`` applies in all have finished (re-raising a failed one)."""
        async with asyncio.timeout(timeout):
            while self.applies < count:
                if task.done():
                    task.result()
                self._done.clear()
                waiting = asyncio.create_task(self._done.wait())
                await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()


@contextlib.asynccontextmanager
async def reapplying(
    cluster: LocalCluster, home: Path, applier: Applier, manifest: Path, cadence: float
) -> AsyncIterator[tuple[Reapplier, asyncio.Task[None]]]:
    """Run a ``Reapplier`` in the background while the block runs."""
    loop = Reapplier(cluster, home, applier, manifest, cadence)
    async with background(loop.run()) as task:
        yield loop, task


def _annotations(obj: Mapping[str, Any], on_template: bool) -> Mapping[str, Any]:
    holder: Mapping[str, Any] = obj
    if on_template:
        holder = (obj.get("spec") or {}).get("template") or {}
    return (holder.get("metadata") or {}).get("annotations") or {}


def removals(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What kube-nudge wrote on ``before`` that ``after`` (the next version) lost. The
    adoption baseline may go only in the write that puts a hash on the template (kube-nudge's
    own rollout patch removes it)."""
    lost = []
    for on_template, names in ((True, KEPT_ON_TEMPLATE), (False, KEPT_ON_METADATA)):
        had, has = _annotations(before, on_template), _annotations(after, on_template)
        lost += [name for name in names if name in had and name not in has]
    template_hash = template_annotation(after, TEMPLATE, CONFIG_HASH)
    rolled = template_hash is not None and template_hash != template_annotation(
        before, TEMPLATE, CONFIG_HASH
    )
    baseline_went = BASELINE_HASH in _annotations(before, False) and not rolled
    if baseline_went and BASELINE_HASH not in _annotations(after, False):
        lost.append(BASELINE_HASH)
    return lost


@dataclass
class Watched:
    """Every version of one Deployment seen on a watch: its pod template's changes (each one
    a rollout; not ``metadata.generation``, which a Deployment also bumps when only its
    annotations change) and anything of kube-nudge's that a version lost."""

    name: str
    versions: int = 0
    templates: list[dict[str, Any]] = field(default_factory=list)
    """Each pod template in turn."""
    lost: list[tuple[str, list[str]]] = field(default_factory=list)
    last: dict[str, Any] | None = None

    def see(self, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] != self.name:
            return
        if self.last is not None:
            lost = removals(self.last, obj)
            if lost:
                self.lost.append((obj["metadata"]["resourceVersion"], lost))
        if not self.templates or self.templates[-1] != obj["spec"]["template"]:
            self.templates.append(obj["spec"]["template"])
        self.versions += 1
        self.last = obj

    @property
    def template_changes(self) -> int:
        """Changes of the pod template since the watch began: rollouts."""
        return max(len(self.templates) - 1, 0)

    def history(self) -> list[tuple[str | None, list[str]]]:
        """Each template's config hash and the ConfigMaps it names, for failure messages."""
        return [(template_annotation({"spec": {"template": t}}, TEMPLATE, CONFIG_HASH),
                 sorted(set(_configmaps(t)))) for t in self.templates]  # fmt: skip


def _configmaps(template: Mapping[str, Any]) -> list[str]:
    spec = template.get("spec") or {}
    names = [(v.get("configMap") or {}).get("name") for v in spec.get("volumes") or []]
    for container in spec.get("containers") or []:
        for env in container.get("env") or []:
            names.append(((env.get("valueFrom") or {}).get("configMapKeyRef") or {}).get("name"))
    return [name for name in names if name]


@contextlib.asynccontextmanager
async def watching_deployment(
    kube: KubeClient, namespace: str, name: str
) -> AsyncIterator[Watched]:
    """Watch Deployment ``name`` (from its current version) while the block runs."""
    watched = Watched(name)
    path = DEPLOYMENTS.path(namespace)
    listed = await kube.get(path, fieldSelector=f"metadata.name={name}")
    for obj in listed["items"]:
        watched.see(obj)

    async def follow() -> None:
        version = listed["metadata"]["resourceVersion"]
        params = {"fieldSelector": f"metadata.name={name}"}
        while True:
            async for event in kube.watch(path, params, resource_version=version):
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    watched.see(obj)

    async with background(follow()):
        yield watched


def deployment_writes(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    """kube-nudge's successful writes of Deployments in ``namespace`` (the audit log)."""
    return [
        entry
        for entry in audit_entries(cluster, namespace)
        if (entry.get("objectRef") or {}).get("resource") == "deployments"
        and entry.get("verb") in ("patch", "update", "apply")
        and (entry.get("responseStatus") or {}).get("code", 0) < 300
    ]


def manifest_drift(manifest: Any, live: Any, path: str = "") -> list[str]:
    """Where a field the manifest sets differs from the live object: what a three-way diff
    computed without the API server (Argo CD's default, "legacy" diff) reports for a
    manifest that drops no field it applied before. Fields only the live object has (what
    kube-nudge and the API server add) are no difference. Lists of named objects match by
    name, as the strategic merge patch of client-side apply does; ``path`` is a JSONPath."""
    if isinstance(manifest, dict) and isinstance(live, dict):
        return [
            found
            for key, value in manifest.items()
            for found in manifest_drift(value, live.get(key), f"{path}.{key}")
        ]
    if isinstance(manifest, list) and isinstance(live, list) and _named(manifest):
        by_name = {item.get("name"): item for item in live if isinstance(item, dict)}
        return [
            found
            for item in manifest
            for found in manifest_drift(
                item, by_name.get(item["name"]), f'{path}[?(@.name=="{item["name"]}")]'
            )
        ]
    return [] if manifest == live else [path]


def _named(items: list[Any]) -> bool:
    return all(isinstance(item, dict) and "name" in item for item in items)
