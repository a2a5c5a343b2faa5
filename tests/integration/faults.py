"""Shared parts of the fault suite: a fleet of workloads, a random stream of config changes
with the bookkeeping of which workloads each change justifies rolling, the convergence check
every scenario ends with, and the record it leaves for docs/reliability.md.

``FAULT_SCALE=full`` (``make test-faults``) runs the sizes the reliability table reports;
the default is a smaller run that fits in ``make test``. ``FAULT_SEED=N`` replays a run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

from kube_nudge.kube.client import JSON
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, REPLICASETS, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH, template_annotation
from kube_nudge.model.standins import parse_stand_ins as parse_snapshots
from kube_nudge.strategies.snapshot.copies import SNAPSHOT_LABEL
from kube_nudge.strategies.snapshot.model import BASELINE_SNAPSHOTS, SNAPSHOTS, parse_baseline
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until, wait_for_objects
from tests.integration.controller_support import HMAC_SECRET, expected_hash, template_hash

DEPLOYMENT = BUILTIN_KINDS[0]
FULL = os.environ.get("FAULT_SCALE", "") == "full"
HELD_UNTIL = 10
REVISION = "deployment.kubernetes.io/revision"


def seeded_rng() -> tuple[random.Random, int]:
    """A random generator and its seed (``FAULT_SEED`` or a fresh one, printed)."""
    seed = int(os.environ.get("FAULT_SEED", random.randrange(2**32)))
    print(f"FAULT_SEED={seed}")
    return random.Random(seed), seed


@contextlib.asynccontextmanager
async def own_control_plane(
    *apiserver_args: str,
) -> AsyncIterator[tuple[LocalCluster, AdminClient, str]]:
    """A control plane for one fault alone (one that would disturb the session's cluster,
    or needs other API server flags), an admin client and a fresh namespace."""
    cluster = LocalCluster(apiserver_args=apiserver_args)
    await asyncio.to_thread(cluster.start)
    kube = AdminClient.from_config(cluster.kubeconfig, user_agent="kube-nudge-tests")
    try:
        namespace = f"t-{uuid.uuid4().hex[:10]}"
        await kube.create(NAMESPACES.path(), {"metadata": {"name": namespace}})
        yield cluster, kube, namespace
    finally:
        await kube.aclose()
        await asyncio.to_thread(cluster.stop)


def scenario(name: str, strategy: str) -> str:
    """A scenario's name in the report, naming its strategy unless it's the default."""
    return name if strategy == "rollout" else f"{name} (strategy {strategy})"


def applied(obj: JSON) -> str | None:
    """The hash a Deployment's pods run: on the template, or the adoption baseline."""
    annotations = obj["metadata"].get("annotations") or {}
    return template_hash(obj, DEPLOYMENT) or annotations.get(BASELINE_HASH)


@dataclass
class Fleet:
    """ConfigMaps ``cm0..`` with keys ``a`` and ``b``, and Deployments ``w0..``, each
    consuming key ``a`` of one ConfigMap and every key of another. One more Deployment,
    ``held``, needs ConfigMap ``late``, which the stream creates as its ``HELD_UNTIL``-th
    change: until then kube-nudge holds it, and no fault may make it forget it."""

    kube: AdminClient
    namespace: str
    rng: random.Random
    seed: int
    sources: int
    consumes: dict[str, tuple[int, int]] = field(default_factory=dict)
    justified: dict[str, int] = field(default_factory=dict)
    changes: int = 0
    strategy: str = "rollout"

    @classmethod
    async def new(
        cls,
        kube: AdminClient,
        namespace: str,
        sources: int,
        workloads: int,
        *,
        strategy: str = "rollout",
    ) -> Fleet:
        """A fleet with a fresh (or ``FAULT_SEED``) random stream, created in the API."""
        rng, seed = seeded_rng()
        fleet = cls(kube, namespace, rng, seed, sources, strategy=strategy)
        await fleet.create(workloads)
        return fleet

    @property
    def annotations(self) -> dict[str, str]:
        """What opts the fleet's workloads in, with its strategy."""
        return {**ENABLED, "kube-nudge.io/strategy": self.strategy}

    async def create(self, workloads: int) -> None:
        """Create the ConfigMaps and opted-in Deployments."""
        for n in range(self.sources):
            await self.kube.create(
                CONFIGMAPS.path(self.namespace), manifests.configmap(f"cm{n}", {"a": "0", "b": "0"})
            )
        for w in range(workloads):
            keyed, whole = self.rng.sample(range(self.sources), 2)
            name = f"w{w}"
            self.consumes[name] = (keyed, whole)
            self.justified[name] = 0
            key_ref = {"configMapKeyRef": {"name": f"cm{keyed}", "key": "a"}}
            env = [{"name": "A", "valueFrom": key_ref}]
            spec = manifests.pod_spec(containers=[{
                "name": "app", "image": "registry.invalid/app:1",
                "env": env, "envFrom": [{"configMapRef": {"name": f"cm{whole}"}}]}])  # fmt: skip
            await self.kube.create(
                DEPLOYMENTS.path(self.namespace),
                manifests.deployment(name, spec=spec, annotations=self.annotations),
            )
        late = [{"configMapRef": {"name": "late"}}]  # not optional: the pods need it
        spec = manifests.pod_spec(
            containers=[{"name": "app", "image": "registry.invalid/app:1", "envFrom": late}]
        )
        await self.kube.create(
            DEPLOYMENTS.path(self.namespace),
            manifests.deployment("held", spec=spec, annotations=self.annotations),
        )
        self.justified["held"] = 0

    async def adopted(self, timeout: float = 60) -> None:
        """Wait until the controller has adopted every workload."""
        await wait_for_objects(
            self.kube,
            DEPLOYMENTS.path(self.namespace),
            lambda found: (
                len(found) == len(self.justified) and all(applied(o) for o in found.values())
            ),
            timeout=timeout,
        )

    async def change(self, kube: AdminClient | None = None) -> None:
        """Bump one random key of one random ConfigMap and note whom it justifies rolling
        (or, the ``HELD_UNTIL``-th time, create the ConfigMap the held workload waits for)."""
        self.changes += 1
        if self.changes == HELD_UNTIL:
            await (kube or self.kube).create(
                CONFIGMAPS.path(self.namespace), manifests.configmap("late", {"c": "1"})
            )
            self.justified["held"] += 1
            return
        source, key = self.rng.randrange(self.sources), self.rng.choice("ab")
        await (kube or self.kube).merge_patch(
            CONFIGMAPS.path(self.namespace, f"cm{source}"), {"data": {key: str(self.changes)}}
        )
        for name, (keyed, whole) in self.consumes.items():
            if (source == keyed and key == "a") or source == whole:
                self.justified[name] += 1

    async def stream(self, changes: int) -> None:
        """``changes`` changes, each followed by a random pause."""
        for _ in range(changes):
            await self.change()
            await self.pause()

    async def pause(self) -> None:
        """A random gap of 0-50 ms: part of every scenario, streams are uneven."""
        await asyncio.sleep(self.rng.uniform(0, 0.05))

    async def converge(self, *, timeout: float = 60) -> Convergence:
        """Wait until every workload runs the hash of the config it consumes now; measure
        what was lost (not converged in time) and what rolled more than changes justify."""
        started = time.monotonic()
        secret = await self.kube.get(SECRETS.path(self.namespace, HMAC_SECRET))
        key = base64.b64decode(secret["data"]["hmac-key"])
        path = DEPLOYMENTS.path(self.namespace)
        want = {o["metadata"]["name"]: await expected_hash(self.kube, DEPLOYMENT, o, key)
                for o in (await self.kube.get(path))["items"]}  # fmt: skip
        try:
            found = await wait_for_objects(
                self.kube,
                path,
                lambda objs: all(applied(objs[n]) == h for n, h in want.items()),
                timeout=timeout,
            )
        except TimeoutError:
            found = {o["metadata"]["name"]: o for o in (await self.kube.get(path))["items"]}
        lost = sorted(n for n, h in want.items() if applied(found[n]) != h)
        seconds = time.monotonic() - started
        # The Deployment controller bumps the revision once per rollout it starts (counting
        # ReplicaSets would miss those pruned by revisionHistoryLimit); read it once it has
        # seen every template.
        observed = await wait_for_objects(
            self.kube,
            path,
            lambda objs: all(o.get("status", {}).get("observedGeneration", 0)
                             >= o["metadata"]["generation"] for o in objs.values()),
            timeout=timeout,
        )  # fmt: skip
        rollouts = {name: int(obj["metadata"]["annotations"][REVISION]) - 1
                    for name, obj in observed.items()}  # fmt: skip
        extra = {n: r - self.justified[n] for n, r in rollouts.items() if r > self.justified[n]}
        missing: list[str] = []
        leaked: list[str] = []
        if self.strategy == "snapshot":
            missing, leaked = await self.snapshots_settled(timeout)
        return Convergence(lost, extra, sum(rollouts.values()), seconds, missing, leaked)

    async def snapshots_settled(self, timeout: float) -> tuple[list[str], list[str]]:
        """Strategy snapshot: wait until the copies are exactly those the surviving
        ReplicaSets reference and the Deployments keep of their adopted config (until their
        second rollout onto copies); (referenced but missing, left over without a use)."""

        async def state() -> tuple[set[str], set[str]]:
            used: set[str] = set()
            for rs in (await self.kube.get(REPLICASETS.path(self.namespace)))["items"]:
                text = template_annotation(rs, DEPLOYMENT.template_path, SNAPSHOTS)
                used |= {name for _, name in parse_snapshots(text)}
            for obj in (await self.kube.get(DEPLOYMENTS.path(self.namespace)))["items"]:
                kept = (obj["metadata"].get("annotations") or {}).get(BASELINE_SNAPSHOTS)
                baseline = parse_baseline(kept)
                used |= {name for _, name in baseline.copies} if baseline is not None else set()
            copies = await self.kube.get(
                CONFIGMAPS.path(self.namespace), labelSelector=SNAPSHOT_LABEL
            )
            return used, {c["metadata"]["name"] for c in copies["items"]}

        async def settled() -> bool:
            used, copies = await state()
            return used == copies

        with contextlib.suppress(TimeoutError):
            await until(settled, timeout)
        used, copies = await state()
        return sorted(used - copies), sorted(copies - used)


@dataclass(frozen=True)
class Convergence:
    """How a fleet ended: workloads not converged, rollouts beyond what changes justify."""

    lost: list[str]
    extra: dict[str, int]
    rollouts: int
    seconds: float
    missing_copies: list[str] = field(default_factory=list)
    leaked_copies: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Fail the test if anything was lost or rolled without cause (or, strategy
        snapshot, a copy a revision needs is missing or one nothing needs is left)."""
        assert not self.lost, f"not converged (changes lost): {self.lost}"
        assert not self.extra, f"rolled more often than changes justify: {self.extra}"
        assert not self.missing_copies, f"copies missing: {self.missing_copies}"
        assert not self.leaked_copies, f"copies leaked: {self.leaked_copies}"
        assert self.rollouts > 0, "the stream never rolled anything: the scenario is vacuous"


@dataclass(frozen=True)
class FaultRun:
    """One row of evidence for docs/reliability.md."""

    scenario: str
    seed: int
    workloads: int
    faults: int
    changes: int
    lost: int
    extra_rollouts: int
    rollouts: int
    converge_seconds: float
    #: "full" (``FAULT_SCALE=full``, make test-faults) or "test" (make test's size).
    scale: str = field(default_factory=lambda: "full" if FULL else "test")

    @classmethod
    def of(cls, scenario: str, fleet: Fleet, faults: int, end: Convergence) -> FaultRun:
        """The record of ``fleet``'s run."""
        return cls(
            scenario, fleet.seed, len(fleet.justified), faults, fleet.changes, len(end.lost),
            sum(end.extra.values()), end.rollouts, round(end.seconds, 2),
        )  # fmt: skip

    def as_json(self) -> dict[str, Any]:
        """For the report file."""
        return asdict(self)
