"""Hot reload on the real node: from the ConfigMap PATCH to the app running the new config,
with the controller's pod nudge and without it (the kubelet's own periodic sync).

The local cluster joins its one real node (kubelet, containerd, runc) at the kubelet's
default settings (``syncFrequency`` 1 m), with the controller image built from the checkout.
``node_pods`` Deployments of one pod each run there, each with its own ConfigMap mounted
whole at /etc/app: the app of the real-node tests (tests/integration/
test_hot_reload_real_node.py, it prints ``loaded <content>`` when it loads) and the
``kube-nudge agent`` sidecar of the chart's NOTES snippet (its Role and own-pod-only policy,
the projected token, the namespace's agent key), reloading the app by HTTP. Each pod has its
own ConfigMap so that each sample has its own moment in its pod's sync cycle.

- **Nudge**: kube-nudge runs (``kube-nudge run --debounce 0``) with the Deployments on
  strategy ``hot``; ``node_rounds`` rounds, each changing every pod's ConfigMap once, one at a
  time (each waited for, in a shuffled order). After each round every hot change must be
  confirmed by its keyed hash, with no rollout. Then one more round with kube-nudge at its
  defaults (its default debounce window): what a user gets.
- **No nudge**: kube-nudge stopped, each ConfigMap is changed once at a random (seeded)
  moment of a ``NO_NUDGE_WINDOW`` window (longer than the kubelet's 60-90 s resync of a pod,
  so each change lands at a random point of its pod's cycle), then the benchmark waits for
  every app.

t0 is the wall clock when the PATCH returned; t1 is the runtime's timestamp of the app's
``loaded <new>`` line (containerd stamps each line as it reads it; same machine, same clock).
The agent's ``kube-nudge.io/loaded-at`` (ms, taken after the app answered the reload call)
is kept beside it as a check.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import random
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from bench.config import ROOT
from bench.procfs import quiet
from bench.progress import say
from bench.scenarios import Context, Metrics
from bench.stats import latency_summary, percentile
from bench.tools import Tool, ToolError, ToolSettings
from kube_nudge.agentwire import AGENT_KEY_FIELD, AGENT_KEY_SECRET, LOADED_AT
from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS, SECRETS, SERVICEACCOUNTS
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import apply_documents
from kube_nudge_dev.hotapp import ACCOUNT, HOT, app_deployment, grant_in_force
from kube_nudge_dev.image import build_image
from kube_nudge_dev.nodepods import agent_grant_documents, timestamped_log

#: kube-nudge with its debounce window off (a deliberate delay, measured elsewhere).
NUDGE = ToolSettings(debounce="0")
#: kube-nudge at its defaults (its default debounce window).
DEFAULT = ToolSettings()
#: Longer than the kubelet's resync of a pod (syncFrequency 1 m, jittered up to 1.5x).
NO_NUDGE_WINDOW = 90.0
#: How long an app may take to reload after its PATCH: beyond any resync.
RELOAD_TIMEOUT = 150.0
RELOAD_PORT = "8080"
AGENT_ARGS = ["--watch", "/etc/app", "--http-url", f"http://127.0.0.1:{RELOAD_PORT}/-/reload"]


def name(i: int) -> str:
    """Deployment and ConfigMap ``i``."""
    return f"app-{i:02d}"


async def run(ctx: Context) -> Metrics:
    """Join the real node, start the pods, measure with then without the nudge."""
    pods, rounds = ctx.sizes.node_pods, ctx.sizes.node_rounds
    image = await asyncio.to_thread(build_image, ROOT)
    started = time.monotonic()
    await asyncio.to_thread(ctx.cluster.add_real_node, (image.archive,))
    say(f"  real node Ready in {time.monotonic() - started:.1f} s (kubelet defaults)")
    namespace = await ctx.namespace()
    kube = ctx.kube
    tool = await ctx.tool(NUDGE)
    await agent_grant(kube, namespace)
    for i in range(pods):
        await kube.create(CONFIGMAPS.path(namespace), configmap(name(i), "v0"))
        deployment = app_deployment(name(i), image.ref, agent=AGENT_ARGS, annotations=HOT,
                                    env={"RELOAD_PORT": RELOAD_PORT})  # fmt: skip
        volume = deployment["spec"]["template"]["spec"]["volumes"][0]
        volume["configMap"]["name"] = name(i)
        await kube.create(DEPLOYMENTS.path(namespace), deployment)
    started = time.monotonic()
    by_app = await all_running(kube, namespace, pods)
    say(f"  {pods} pods running in {time.monotonic() - started:.1f} s")
    with tempfile.TemporaryDirectory(prefix="bench-node-") as tmp:
        first = await kube.get(PODS.path(namespace, by_app[name(0)]))
        await grant_in_force(kube, ctx.cluster, namespace, first, Path(tmp))
    await wait_all(partial(logged_everywhere, ctx, namespace, by_app, "v0"), 60, "start")

    nudged, nudged_agent, rollouts = await with_nudge(
        ctx, tool, "--debounce 0", namespace, by_app, 1, rounds
    )
    # What a user gets by default: the same with kube-nudge's default debounce, one round.
    tool = await ctx.tool(DEFAULT)
    windowed, _, rolled_after = await with_nudge(
        ctx, tool, "default debounce", namespace, by_app, rounds + 1, 1
    )
    rollouts += rolled_after

    say(f"  no nudge: {pods} changes over {NO_NUDGE_WINDOW:g} s, waiting for the kubelet")
    phase = random.Random(f"agent-node-sync-{pods}")  # noqa: S311 # timing only
    offsets = {app: phase.uniform(0.0, NO_NUDGE_WINDOW) for app in by_app}
    last = f"v{rounds + 2}"
    patched = await patch_spread(kube, namespace, offsets, last)
    with contextlib.suppress(ToolError):  # an app that never reloads: counted as missed
        check = partial(recorded_since, kube, namespace, by_app, patched)
        await wait_all(check, RELOAD_TIMEOUT, "the kubelet's sync")
    found = await latencies(ctx, namespace, by_app, last, patched, tolerate=True)
    synced = [app for app, _ in found.values()]
    synced_agent = [agent for _, agent in found.values()]
    missed = pods - len(found)
    restarts = await restart_count(kube, namespace)

    ctx.series.update(nudge_s=nudged, sync_s=synced, debounced_s=windowed)
    a, b, c = latency_summary(nudged), latency_summary(synced), latency_summary(windowed)
    say(f"  nudge: p50 {a['p50_ms']:.0f} ms, p99 {a['p99_ms']:.0f} ms ({len(nudged)}); "
        f"no nudge: p50 {b['p50_ms']:.0f} ms, p99 {b['p99_ms']:.0f} ms ({len(synced)}, "
        f"{missed} missed)")  # fmt: skip
    return {
        "pods": pods,
        "nudge_p50_ms": a["p50_ms"],
        "nudge_p99_ms": a["p99_ms"],
        "nudge_max_ms": a["max_ms"],
        "nudge_min_ms": round(min(nudged) * 1000, 2),
        "nudge_samples": len(nudged),
        "nudge_agent_p50_ms": latency_summary(nudged_agent)["p50_ms"],
        "debounced_p50_ms": c["p50_ms"],
        "debounced_p99_ms": c["p99_ms"],
        "debounced_samples": len(windowed),
        "sync_p50_ms": b["p50_ms"],
        "sync_p99_ms": b["p99_ms"],
        "sync_max_ms": b["max_ms"],
        "sync_min_ms": round(min(synced) * 1000, 2) if synced else float("nan"),
        "sync_samples": len(synced),
        "sync_agent_p50_ms": latency_summary(synced_agent)["p50_ms"],
        "sync_missed": missed,
        "hot_changes": pods * (rounds + 1),  # the rounds at both debounces
        "rollouts": rollouts,
        "restarts": restarts,
    }


async def with_nudge(
    ctx: Context, tool: Tool, label: str, namespace: str, by_app: dict[str, str], first: int,
    rounds: int,
) -> tuple[list[float], list[float], int]:  # fmt: skip
    """Start ``tool`` and run ``rounds`` rounds from ``first``, then stop it: the latencies
    by the apps' logs and by the agents' loaded-at, and the Deployments that rolled."""
    pods = len(by_app)
    kube = ctx.kube
    tool.start(ctx.cluster.kubeconfig)
    await tool.wait_ready(120)
    await wait_all(partial(adopted, kube, namespace, pods), 60, "adoption")
    assert tool.pid is not None
    await quiet(tool.pid)
    by_log: list[float] = []
    by_agent: list[float] = []
    order = random.Random(f"agent-node-{pods}-{first}")  # noqa: S311 # an order, not a secret
    for n in range(first, first + rounds):
        apps = sorted(by_app)
        order.shuffle(apps)
        patched: dict[str, float] = {}
        for app in apps:
            patched[app] = await patch(kube, namespace, app, f"v{n}")
            check = partial(recorded_since, kube, namespace, {app: by_app[app]}, patched)
            await wait_all(check, RELOAD_TIMEOUT, f"{app} round {n}")
        await wait_all(partial(confirmed, kube, namespace, pods), 60, f"confirmation, round {n}")
        found = await latencies(ctx, namespace, by_app, f"v{n}", patched)
        by_log += [app for app, _ in found.values()]
        by_agent += [agent for _, agent in found.values()]
        say(f"  nudged round {n} ({label}): p50 {percentile(by_log[-pods:], 50) * 1000:.0f} ms")
    rollouts = await rolled(kube, namespace, pods)
    await asyncio.to_thread(tool.stop)
    return by_log, by_agent, rollouts


def configmap(cm: str, content: str) -> JSON:
    """ConfigMap ``cm`` with app.conf = ``content``."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm},
            "data": {"app.conf": content}}  # fmt: skip


async def agent_grant(kube: KubeClient, namespace: str) -> None:
    """As docs/reload.md and the NOTES say: the namespace's agent key (ignored as a source), the
    ServiceAccount and the chart's agent grant for it."""
    key = base64.b64encode(os.urandom(32))
    await kube.create(SECRETS.path(namespace), {
        "metadata": {"name": AGENT_KEY_SECRET, "annotations": {"kube-nudge.io/ignore": "true"}},
        "data": {AGENT_KEY_FIELD: base64.b64encode(key).decode()},
    })  # fmt: skip
    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": ACCOUNT}})
    docs = await asyncio.to_thread(agent_grant_documents, ROOT, namespace, ACCOUNT)
    await apply_documents(kube, docs)


async def wait_all(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll ``check`` (async, bool) every 50 ms until true; ToolError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise ToolError(f"real node: {what} not done within {timeout:g} s")
        await asyncio.sleep(0.05)


async def live(kube: KubeClient, namespace: str) -> list[JSON]:
    found = await kube.get(PODS.path(namespace))
    return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]


async def all_running(kube: KubeClient, namespace: str, pods: int) -> dict[str, str]:
    """Once every pod's containers run: the pod name by app."""
    by_app: dict[str, str] = {}

    async def check() -> bool:
        by_app.clear()
        for pod in await live(kube, namespace):
            statuses = (pod.get("status") or {}).get("containerStatuses") or ()
            if len(statuses) == 2 and all("running" in s.get("state", {}) for s in statuses):
                by_app[pod["metadata"]["labels"]["app"]] = pod["metadata"]["name"]
        return len(by_app) == pods

    await wait_all(check, 300, "the pods running")
    return dict(by_app)


async def logged_everywhere(
    ctx: Context, namespace: str, by_app: dict[str, str], content: str
) -> bool:
    """Every app has logged ``loaded <content>`` (read back every 0.5 s)."""
    for pod in by_app.values():
        lines = await asyncio.to_thread(timestamped_log, ctx.cluster, namespace, pod, "app")
        if f"loaded {content}" not in (text for _, text in lines):
            await asyncio.sleep(0.5)
            return False
    return True


async def recorded_since(
    kube: KubeClient, namespace: str, by_app: dict[str, str], since: dict[str, float]
) -> bool:
    """Each of ``by_app``'s agents recorded a load after its app's ``since``."""
    if len(by_app) == 1:
        [(app, pod)] = by_app.items()
        return _loaded_at(await kube.get(PODS.path(namespace, pod))) >= since[app]
    pods = {p["metadata"]["name"]: p for p in await live(kube, namespace)}
    return all(_loaded_at(pods.get(pod)) >= since[app] for app, pod in by_app.items())


def _loaded_at(pod: JSON | None) -> float:
    annotations = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    return float(annotations.get(LOADED_AT, "0"))


async def adopted(kube: KubeClient, namespace: str, pods: int) -> bool:
    """kube-nudge took every Deployment in (a baseline hash on each)."""
    found = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
    return sum(BASELINE_HASH in (d["metadata"].get("annotations") or {}) for d in found) == pods


async def confirmed(kube: KubeClient, namespace: str, pods: int) -> bool:
    """No hot change left unconfirmed (each record goes when every pod showed the change)."""
    found = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
    waiting = [d for d in found if HOT_RELOAD in (d["metadata"].get("annotations") or {})]
    return len(found) == pods and not waiting


async def rolled(kube: KubeClient, namespace: str, pods: int) -> int:
    """Deployments whose template carries a config hash (a rollout: there should be none)."""
    found = (await kube.get(DEPLOYMENTS.path(namespace)))["items"]
    return sum(
        CONFIG_HASH in ((d["spec"]["template"].get("metadata") or {}).get("annotations") or {})
        for d in found
    )


async def restart_count(kube: KubeClient, namespace: str) -> int:
    """Container restarts over every pod (an in-place reload restarts nothing)."""
    return sum(
        s.get("restartCount", 0)
        for p in await live(kube, namespace)
        for s in (p.get("status") or {}).get("containerStatuses") or ()
    )


async def patch(kube: AdminClient, namespace: str, app: str, content: str) -> float:
    """Change ConfigMap ``app``; the wall clock when the PATCH returned."""
    await kube.merge_patch(CONFIGMAPS.path(namespace, app), {"data": {"app.conf": content}})
    return time.time()


async def patch_spread(
    kube: AdminClient, namespace: str, offsets: dict[str, float], content: str
) -> dict[str, float]:
    """Change each ConfigMap at its offset from now; when each PATCH returned."""
    start = time.monotonic()
    patched: dict[str, float] = {}
    for app, offset in sorted(offsets.items(), key=lambda item: item[1]):
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
        patched[app] = await patch(kube, namespace, app, content)
    return patched


async def latencies(
    ctx: Context, namespace: str, by_app: dict[str, str], content: str,
    patched: dict[str, float], *, tolerate: bool = False,
) -> dict[str, tuple[float, float]]:  # fmt: skip
    """Per app: (its log line ``loaded <content>`` - PATCH, its agent's loaded-at - PATCH)."""
    pods = {p["metadata"]["name"]: p for p in await live(ctx.kube, namespace)}
    found: dict[str, tuple[float, float]] = {}
    for app, pod in by_app.items():
        lines = await asyncio.to_thread(timestamped_log, ctx.cluster, namespace, pod, "app")
        at = [t for t, text in lines if text == f"loaded {content}"]
        if not at:
            if tolerate:
                continue
            raise ToolError(f"{pod} never logged 'loaded {content}'")
        found[app] = (at[0] - patched[app], _loaded_at(pods.get(pod)) - patched[app])
    return found
