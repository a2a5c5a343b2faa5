"""``kube-nudge plan`` against the live cluster is what happens.

A fleet reads three sources every way a pod template can (env, envFrom, volume items,
projected, optional, subPath mounts) with every strategy and gate. For each seed a random
change set is made; ``kube-nudge plan -f`` says per workload what will happen; the real
kubectl applies the same file to a cluster where kube-nudge runs; and each workload's
observed outcome must be the plan's action: a rollout (its template changed), a reload in
place (strategy hot's record), an announcement (ConfigChanged), a hold (its Warning Event,
by reason) or nothing. The subPath workloads' rows must also be those a person writes from
the change set and what the kubelet shows their containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.controller.controller import Controller
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    CORE_EVENTS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.nodepods import kubectl
from kube_nudge_dev.waiting import until, wait_for_object
from tests.integration.accounts import account_kubeconfig
from tests.integration.controller_support import HMAC_SECRET, running_controller, template_hash
from tests.integration.hot_support import agent_container
from tests.integration.leak_support import leaks
from tests.schema_support import plan_validator

pytestmark = pytest.mark.cluster

TIMEOUT = 60.0
DEPLOYMENT = BUILTIN_KINDS[0]
#: The Warning Event of each hold, by the plan's hold reason.
HOLD_EVENTS = {
    "missing": "ConfigMissing", "approval": "AwaitingApproval", "window": "OutsideWindow",
    "flapping": "RolloutsCapped", "line-stopped": "LineStopped",
}  # fmt: skip
SOURCES: dict[str, dict[str, str]] = {
    "alpha": {"A": "a0", "B": "b0", "C": "c0"},
    "beta": {"X": "x0", "W": "w0"},
    "delta": {"Z": "z0"},
    "epsilon": {"E": "e0"},  # kube-nudge.io/pod-selector: app=bystander
}
SELECTOR = "app=bystander"
GAMMA = {"P": "p0", "Q": "q0"}  # a Secret


def env(name: str, source: str, key: str, *, secret: bool = False, optional: bool = False) -> Any:
    ref = {"name": source, "key": key} | ({"optional": True} if optional else {})
    return {"name": name, "valueFrom": {"secretKeyRef" if secret else "configMapKeyRef": ref}}


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": "registry.invalid/app:1", **extra}


def spec(*, volumes: list[Any] | None = None, agent: bool = False, **extra: Any) -> dict[str, Any]:
    """One app container mounting each volume at /NAME; ``agent``: the reload agent beside
    it, watching the first (strategy hot)."""
    mounts = [{"name": v["name"], "mountPath": f"/{v['name']}"} for v in volumes or []]
    agents = [agent_container(m["mountPath"], m["name"]) for m in mounts[:1]] if agent else []
    return manifests.pod_spec(containers=[container(volumeMounts=mounts, **extra), *agents],
                              volumes=volumes or [])  # fmt: skip


def mounting(*mounts: list[dict[str, Any]], volumes: list[Any]) -> dict[str, Any]:
    """A pod spec with ``volumes`` and a container per list of mounts."""
    boxes = [container(name=f"c{i}", volumeMounts=m) for i, m in enumerate(mounts)]
    return manifests.pod_spec(containers=boxes, volumes=volumes)


def window_closed_now() -> str:
    """A one-hour rollout window (UTC) that opens two hours from now."""
    opens, closes = time.gmtime(time.time() + 7200), time.gmtime(time.time() + 10800)
    return f"{opens.tm_hour:02d}:{opens.tm_min:02d}-{closes.tm_hour:02d}:{closes.tm_min:02d} UTC"


def fleet() -> dict[str, tuple[dict[str, Any], dict[str, str]]]:
    """Every workload: its pod spec and its annotations (opted in unless said otherwise)."""
    alpha_b = {
        "name": "items",
        "configMap": {"name": "alpha", "items": [{"key": "B", "path": "b"}]},
    }
    projected = {"name": "proj", "projected": {"sources": [
        {"configMap": {"name": "alpha", "items": [{"key": "C", "path": "c"}]}},
        {"secret": {"name": "gamma", "items": [{"key": "P", "path": "p"}]}},
    ]}}  # fmt: skip
    beta_all = {"name": "beta", "configMap": {"name": "beta"}}
    alpha_all = {"name": "alpha", "configMap": {"name": "alpha"}}
    alpha_conf = {"name": "conf", "configMap": {"name": "alpha", "items": [
        {"key": "A", "path": "conf/a"}, {"key": "C", "path": "conf/c"}]}}  # fmt: skip
    beta_x = [{"name": "beta", "mountPath": "/etc/x", "subPath": "X"}]
    hot = {"kube-nudge.io/strategy": "hot", "kube-nudge.io/hot-deadline": "1h"}
    return {
        "env-a": (spec(env=[env("A", "alpha", "A")]), {}),
        "envfrom-beta": (spec(envFrom=[{"configMapRef": {"name": "beta"}}]), {}),
        "vol-items": (spec(volumes=[alpha_b]), {}),
        "projected": (spec(volumes=[projected]), {}),
        "optional": (spec(env=[env("X", "beta", "X", optional=True)]), {}),
        "hot-vol": (spec(volumes=[beta_all], agent=True), hot),
        "hot-env": (spec(env=[env("A", "alpha", "A")], volumes=[alpha_all], agent=True), hot),
        # No reload agent: nobody could confirm a reload, so it rolls at once.
        "hot-noagent": (spec(volumes=[beta_all]), hot),
        "notify": (spec(envFrom=[{"configMapRef": {"name": "alpha"}}]),
                   {"kube-nudge.io/strategy": "notify"}),
        "snap": (spec(env=[env("P", "gamma", "P", secret=True)]),
                 {"kube-nudge.io/strategy": "snapshot"}),
        "approval": (spec(env=[env("A", "alpha", "A")]), {"kube-nudge.io/approval": "required"}),
        "window": (spec(env=[env("X", "beta", "X")]),
                   {"kube-nudge.io/rollout-window": window_closed_now()}),
        "first": (spec(env=[env("B", "alpha", "B")]), {"kube-nudge.io/rollout-order": "1"}),
        "second": (spec(env=[env("B", "alpha", "B")]), {"kube-nudge.io/rollout-order": "2"}),
        "capped": (spec(env=[env("W", "beta", "W"), env("Z", "delta", "Z")]),
                   {"kube-nudge.io/max-rollouts": "1/1h"}),
        "excluded": (spec(envFrom=[{"configMapRef": {"name": "alpha"}}],
                          env=[env("X", "beta", "X")]),
                     {"kube-nudge.io/exclude": "configmap/alpha"}),
        "bystander": (spec(envFrom=[{"configMapRef": {"name": "alpha"}}]), {"opted-out": ""}),
        # What its pods read of a volume mounted by subPath: the key X alone, the file C
        # of a nested items path (A, listed, is still required), or every key of a volume
        # another container mounts whole.
        "subpath": (mounting(beta_x, volumes=[beta_all]), {}),
        "subpath-items": (mounting([{"name": "conf", "mountPath": "/etc/c",
                                     "subPath": "./conf/c"}], volumes=[alpha_conf]), {}),
        "subpath-mixed": (mounting(beta_x, [{"name": "beta", "mountPath": "/etc/beta"}],
                                   volumes=[beta_all]), {}),
    }  # fmt: skip


def by_hand(seed: int) -> dict[str, str]:
    """The subPath workloads' rows as a person writes them from seed's change set and what
    the kubelet shows their containers, without kube-nudge's rules."""
    configmaps, _ = change_set(seed)

    def moved(source: str, *keys: str) -> bool:
        return any(SOURCES[source].get(k) != configmaps[source].get(k) for k in keys)

    items = "hold:missing" if {"A", "C"} - configmaps["alpha"].keys() else None
    return {
        "subpath": "roll" if moved("beta", "X") else "none",
        "subpath-items": items or ("roll" if moved("alpha", "C") else "none"),
        "subpath-mixed": "roll" if configmaps["beta"] != SOURCES["beta"] else "none",
    }


async def create_fleet(kube: KubeClient, cluster: LocalCluster, namespace: str, into: Path) -> None:
    """The sources by ``kubectl apply`` (so a later apply that leaves a key out deletes it,
    by its three-way merge), the workloads through the API."""
    path = into / f"{namespace}-sources.yaml"
    docs = [source(name, data) for name, data in SOURCES.items()]
    path.write_text(yaml.safe_dump_all([*docs, manifests.secret("gamma", GAMMA)]))
    await asyncio.to_thread(kubectl, cluster, "apply", "-n", namespace, "-f", str(path))
    for name, (pod_spec, more) in fleet().items():
        annotations = {} if "opted-out" in more else {**ENABLED, **more}
        body = manifests.deployment(name, spec=pod_spec, annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), body)


def change_set(seed: int) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Seeded: each source's data changed one way (a key's value, a key added or removed,
    or nothing)."""
    rng = random.Random(seed)
    changed = {}
    for name, data in SOURCES.items():
        changed[name] = _changed(rng, dict(data))
    gamma = _changed(rng, dict(GAMMA))
    return changed, gamma


def _changed(rng: random.Random, data: dict[str, str]) -> dict[str, str]:
    how = rng.choice(["value", "value", "add", "remove", "same"])
    key = rng.choice(sorted(data))
    if how == "value":
        data[key] = f"{key.lower()}{rng.randint(1, 99)}"
    elif how == "add":
        data[f"NEW{rng.randint(1, 9)}"] = "new"
    elif how == "remove" and len(data) > 1:
        del data[key]
    return data


def source(name: str, data: dict[str, str]) -> dict[str, Any]:
    """ConfigMap ``name``; epsilon names the bystander's pods to replace."""
    selector = {"kube-nudge.io/pod-selector": SELECTOR} if name == "epsilon" else None
    return manifests.configmap(name, data, selector)


def change_manifests(seed: int) -> list[dict[str, Any]]:
    configmaps, gamma = change_set(seed)
    docs = [source(name, data) for name, data in configmaps.items()]
    return [*docs, manifests.secret("gamma", gamma)]


async def observe(kube: KubeClient, namespace: str) -> dict[str, dict[str, Any]]:
    """Each workload's pod template and hot-reload record, and the Events about it by
    reason, with their counts."""
    seen: dict[str, dict[str, Any]] = {}
    for obj in (await kube.get(DEPLOYMENTS.path(namespace)))["items"]:
        annotations = obj["metadata"].get("annotations") or {}
        seen[obj["metadata"]["name"]] = {
            # A rollout is a new pod template (generation moves on annotation writes too).
            "template": json.dumps(obj["spec"]["template"], sort_keys=True),
            "reload": annotations.get(HOT_RELOAD),
            "events": {},
        }
    pods = await kube.get(PODS.path(namespace), labelSelector=SELECTOR)
    uids = {
        p["metadata"]["uid"] for p in pods["items"] if not p["metadata"].get("deletionTimestamp")
    }
    seen[f"Pod/{SELECTOR}"] = {"pods": uids}
    for event in (await kube.get(CORE_EVENTS.path(namespace)))["items"]:
        name = event["involvedObject"]["name"]
        if event["involvedObject"]["kind"] == "Deployment" and name in seen:
            seen[name]["events"][event["reason"]] = event.get("count") or 1
    return seen


def outcome(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What happened to one workload (or the pod-selector's pods) between two observations."""
    if "pods" in before:
        return "evict" if before["pods"] - after["pods"] else "none"
    if after["template"] != before["template"]:
        return "roll"
    if after["reload"] and after["reload"] != before["reload"]:
        return "reload"
    grew = {r for r, n in after["events"].items() if n > before["events"].get(r, 0)}
    if "ConfigChanged" in grew:
        return "notify"
    holds = sorted(reason for reason, event in HOLD_EVENTS.items() if event in grew)
    return f"hold:{holds[0]}" if holds else "none"


def expected(row: Mapping[str, Any]) -> str:
    return f"hold:{row['hold']}" if row["action"] == "hold" else str(row["action"])


async def plan_json(cluster: LocalCluster, namespace: str, path: Path) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kube_nudge", "plan", "-f", str(path), "-o", "json",
        f"--kubeconfig={cluster.kubeconfig}", f"--namespace={namespace}",
        f"--state-namespace={namespace}", f"--hmac-secret={HMAC_SECRET}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode in (0, 1), err.decode()
    document: dict[str, Any] = json.loads(out)
    assert list(plan_validator().iter_errors(document)) == []
    assert (document["acting"] or document["stranded"]) == (proc.returncode == 1)
    assert leaks([out.decode() + err.decode()]) == []
    return document


SEEDS = (1, 2, 3, 4, 5)
#: What the seeds' change sets together must show: every action the plan can give.
EVERY_ACTION = {
    "roll", "reload", "notify", "none", "evict",
    "hold:missing", "hold:approval", "hold:window", "hold:flapping",
}  # fmt: skip


async def test_the_plan_is_what_happens(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """For each seed, a fleet of its own (in a namespace of its own): every workload's
    observed outcome is the planned one, and together the seeds plan every action."""
    covered: set[str] = set()
    for seed in SEEDS:
        space = f"{namespace}-{seed}"
        await kube.create(NAMESPACES.path(), {"metadata": {"name": space}})
        try:
            planned, happened, document = await plan_and_apply(kube, cluster, space, tmp_path, seed)
        finally:
            await kube.delete(NAMESPACES.path(name=space))
        assert {n: happened[n] for n in planned} == planned, (seed, document["workloads"])
        # A workload the plan leaves out is planned "none" (unplanned: asserted below).
        assert {n: planned.get(n, "none") for n in by_hand(seed)} == by_hand(seed), seed
        assert changed_sources(document) == expected_sources(seed), seed
        holding = any(w["hold"] == "missing" for w in document["workloads"])
        assert document["stranded"] == holding, (seed, document["sources"])
        unplanned = {n: h for n, h in happened.items() if n not in planned and h != "none"}
        assert unplanned == {}, seed
        covered |= set(planned.values())
    assert covered >= EVERY_ACTION, EVERY_ACTION - covered


def changed_sources(document: Mapping[str, Any]) -> dict[str, tuple[list[str], ...]]:
    """The plan's changed sources: (added, removed, changed) key names by name; each has a
    consumer (every source of the fleet is read, epsilon by its pod-selector)."""
    assert all(s["consumers"] for s in document["sources"]), document["sources"]
    return {s["name"]: (s["added"], s["removed"], s["changed"]) for s in document["sources"]}


def expected_sources(seed: int) -> dict[str, tuple[list[str], ...]]:
    """What seed's change set changes, key by key, against the fleet as the plan finds it
    (delta's Z patched to z1 first). A key left out of a Secret's stringData stays: kubectl
    apply's merge removes only what its last apply set in data, and stringData is not kept."""
    configmaps, gamma = change_set(seed)
    pairs = {name: (SOURCES[name] | ({"Z": "z1"} if name == "delta" else {}), configmaps[name])
             for name in SOURCES} | {"gamma": (GAMMA, GAMMA | gamma)}  # fmt: skip
    found: dict[str, tuple[list[str], ...]] = {}
    for name, (old, new) in pairs.items():
        keys = (sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys()),
                sorted(k for k in old.keys() & new.keys() if old[k] != new[k]))  # fmt: skip
        if any(keys):
            found[name] = keys
    return found


async def plan_and_apply(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path, seed: int
) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """(planned, happened, the plan's document) of seed's change set on a fresh fleet."""
    await create_fleet(kube, cluster, namespace, tmp_path)
    async with running_controller(cluster, namespace) as running:
        # Every workload adopted; `capped` rolled once already (its cap: 1 an hour).
        await wait_for_adoption(kube, namespace)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "delta"), {"data": {"Z": "z1"}})
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "capped",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=TIMEOUT,
        )  # fmt: skip
        await running.controller.settled(timeout=TIMEOUT)
        path = tmp_path / f"change-{seed}.yaml"
        path.write_text(yaml.safe_dump_all(change_manifests(seed)))
        document = await plan_json(cluster, namespace, path)
        planned = {_row_name(w): expected(w) for w in document["workloads"]}
        before = await observe(kube, namespace)
        await asyncio.to_thread(kubectl, cluster, "apply", "-n", namespace, "-f", str(path))
        happened: dict[str, str] = {}

        async def all_shown() -> bool:
            after = await observe(kube, namespace)
            happened.update({n: outcome(before[n], after[n]) for n in before})
            return all(happened.get(n) == want for n, want in planned.items() if want != "none")

        with contextlib.suppress(TimeoutError):  # compared by the caller, with every name
            await until(all_shown, TIMEOUT)
        await quiet(running.controller)
        after = await observe(kube, namespace)
    return planned, {n: outcome(before[n], after[n]) for n in before}, document


def _row_name(row: Mapping[str, Any]) -> str:
    return str(row["name"]) if row["kind"] == "Deployment" else f"{row['kind']}/{row['name']}"


async def quiet(controller: Controller) -> None:
    """Wait until no workload is due now and no pass runs: what is left queued is only
    looked at later (strategy hot polls its pods' agents for an hour), so every pass the
    change caused has run. Then its Events are posted."""

    async def nothing_due() -> bool:
        soon = time.monotonic() + 1.0
        due = [k for k in controller.cache.workload_keys()
               if (at := controller.queue.ready_at(k)) is not None and at <= soon]  # fmt: skip
        return not due and not controller.queue.busy

    await until(nothing_due, TIMEOUT)
    await controller.events.flush()


async def wait_for_adoption(kube: KubeClient, namespace: str) -> None:
    async def adopted() -> bool:
        items = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
        return all(
            "kube-nudge.io/baseline-hash" in (o["metadata"].get("annotations") or {})
            for o in items
            if (o["metadata"].get("annotations") or {}).get("kube-nudge.io/enabled") == "true"
            and (o["metadata"].get("annotations") or {}).get("kube-nudge.io/strategy") != "notify"
        )

    await until(adopted, TIMEOUT)


async def test_kubectl_nudge_plan_as_a_plugin_and_unknown_for_a_secret_it_may_not_get(
    kube: KubeClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """``kubectl nudge plan`` (the plugin kubectl finds on PATH) and its completion through
    kubectl itself; a reader who may not get a Secret sees its readers ``unknown``, naming
    the permission, never a value."""
    await create_fleet(kube, cluster, namespace, tmp_path)
    path = tmp_path / "change.yaml"
    path.write_text(yaml.safe_dump_all([
        source("alpha", {**SOURCES["alpha"], "A": "a9"}),
        manifests.secret("gamma", {**GAMMA, "P": "p9"}),
    ]))  # fmt: skip
    viewer = await account_kubeconfig(kube, cluster, namespace, "viewer", tmp_path,
                                      cluster_role="view")  # fmt: skip
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    plugin = await asyncio.to_thread(
        subprocess.run,
        [str(kubectl_binary()), "nudge", "plan", "-f", str(path), "-o", "json",
         f"--kubeconfig={viewer}", f"--namespace={namespace}", f"--state-namespace={namespace}"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert plugin.returncode == 1, plugin.stderr
    found = {w["name"]: w for w in json.loads(plugin.stdout)["workloads"]}
    assert (found["env-a"]["action"], found["snap"]["action"]) == ("roll", "unknown")
    assert found["snap"]["reason"] == (
        f"cannot tell: this user may not get on secret {namespace}/gamma"
    )
    assert found["projected"]["action"] == "unknown"  # it reads gamma too
    assert manifests.CANARY not in plugin.stdout + plugin.stderr
    assert "desired hashes not shown" in plugin.stderr  # nor may it read the key
    completion = await asyncio.to_thread(
        subprocess.run, [str(kubectl_binary()), "__complete", "nudge", "pl"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert completion.stdout.splitlines()[:2] == ["plan", ":4"], completion


def kubectl_binary() -> Path:
    binary = find_binary("kubectl")
    assert binary is not None, "kubectl is not built (make control-plane)"
    return binary
