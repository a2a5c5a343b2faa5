"""Strategy `hot` end to end on the real node: a real app, the `kube-nudge agent` sidecar of
the chart's NOTES snippet (its Role, its own-pod-only admission policy, the kubelet's
projected token, the namespace's agent key), the real kubelet refreshing the volume.

- A ConfigMap change reaches the running app without a restart, by SIGHUP across a shared
  process namespace and by an HTTP call: the kubelet swaps `..data` (the controller's pod
  nudge makes it prompt), the agent reloads the app and records the keyed hash of what it
  loaded on its pod, the controller confirms it by that hash, and nothing rolls.
- An agent without the namespace's key reloads the app, but its claim confirms nothing.
- A config the agent's `--validate-command` rejects is never loaded by the running app; the
  agent says so on its pod and the fallback rolls.
- An app whose agent never confirms (it watches a directory where nothing changes) hits
  `kube-nudge.io/hot-deadline`; the fallback rolls. (An app with no agent at all is rolled at
  once: `tests/integration/test_hot_reload.py`.)
- `subPath` and env consumers are rolled at once, never waited for; `kube-nudge status
  --all` shows their pods stale before and current after.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.agentwire import (
    AGENT_KEY_FIELD,
    AGENT_KEY_SECRET,
    LOADED_AT,
    LOADED_HASH,
    RELOAD_FAILED_AT,
    key_id,
)
from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.pods import pod_started
from kube_nudge.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    PODS,
    REPLICASETS,
    SECRETS,
    SERVICEACCOUNTS,
)
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.projection import parse_timestamp
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge.strategies.hot.verdicts import NO_AGENT
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.chartapply import apply_documents, cluster_scoped
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.hotapp import ACCOUNT, HOT, app_deployment, grant_in_force
from kube_nudge_dev.image import BuiltImage
from kube_nudge_dev.node import RealNode
from kube_nudge_dev.nodepods import (
    agent_grant_documents,
    container_log,
    kubectl,
    on_real_node,
    python_container,
    timestamped_log,
)
from kube_nudge_dev.waiting import deployment_complete, until, wait_for_object
from tests.integration.controller_support import (
    events,
    eventually,
    kube_nudge_cli,
    running_controller,
    template_hash,
)

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]
REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = BUILTIN_KINDS[0]
#: Reads its config only at start: LEVEL from the env, app.conf from a subPath mount.
START_ONLY = """
import os, time
print("env", os.environ.get("LEVEL"), flush=True)
if os.path.exists("/etc/app.conf"):
    print("loaded", open("/etc/app.conf").read(), flush=True)
while True:
    time.sleep(3600)
"""

#: The agent's `--validate-command`: refuses the content "broken" (no shell: shlex-split).
VALIDATE = "python -c \"import sys; sys.exit(open('/etc/app/app.conf').read() == 'broken')\""


def second_after_start(
    kube: KubeClient, namespace: str, apps: Iterable[str]
) -> Callable[[], Awaitable[bool]]:
    """A check that holds once this host's clock is in a later second than every live pod
    of ``apps`` started, as status reads a start (``pod_started``)."""

    async def check() -> bool:
        starts = [pod_started(pod) for app in apps for pod in await live_pods(kube, namespace, app)]
        known = [start for start in starts if start is not None]
        return len(known) == len(starts) and time.time() >= max(known, default=0.0) + 1

    return check


async def stale_evidence(kube: KubeClient, namespace: str, app: str, row: JSON) -> str:
    """What a stale-pod count rests on, in full (pytest cuts a dict's repr): the row, the
    ConfigMap's data-write times and each live pod's start times and restarts."""
    configmap = await kube.get(CONFIGMAPS.path(namespace, "app"))
    writes = [(e.get("manager"), e.get("time")) for e in configmap["metadata"]["managedFields"]]
    pods = [
        (pod["metadata"]["name"], pod["metadata"]["creationTimestamp"],
         [(c.get("state"), c.get("restartCount")) for c in
          pod.get("status", {}).get("containerStatuses") or ()])
        for pod in await live_pods(kube, namespace, app)
    ]  # fmt: skip
    return json.dumps({"row": row, "configmap writes": writes, "pods": pods}, default=str)


@pytest.fixture
async def grant(
    kube: AdminClient, cluster: LocalCluster, real_node: RealNode, namespace: str
) -> AsyncIterator[bytes]:
    """The namespace set up for the agent as docs/reload.md and NOTES say: ServiceAccount `web`
    with the chart's agent grant applied, Secret `kube-nudge-agent-key` with a random key
    (ignored as a source), ConfigMap `app` (app.conf: v1). Yields the agent key; removes
    the grant's cluster-scoped objects afterwards."""
    key = base64.b64encode(os.urandom(32))  # as `head -c 32 /dev/urandom | base64`
    await kube.create(SECRETS.path(namespace), {
        "metadata": {"name": AGENT_KEY_SECRET,
                     "annotations": {"kube-nudge.io/ignore": "true"}},
        "data": {AGENT_KEY_FIELD: base64.b64encode(key).decode()},
    })  # fmt: skip
    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": ACCOUNT}})
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"app.conf": "v1"}))
    docs = await asyncio.to_thread(agent_grant_documents, REPO, namespace, ACCOUNT)
    assert sorted(d["kind"] for d in docs) == [
        "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
    ]  # fmt: skip
    paths = cluster_scoped(docs)
    try:
        await apply_documents(kube, docs)
        yield key
    finally:
        for path in paths:
            try:
                await kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


async def live_pods(kube: KubeClient, namespace: str, app: str) -> list[dict[str, Any]]:
    found = await kube.get(PODS.path(namespace), labelSelector=f"app={app}")
    return [p for p in found["items"] if not p["metadata"].get("deletionTimestamp")]


async def running(kube: KubeClient, namespace: str, app: str) -> dict[str, Any]:
    """The Deployment's one pod once every container of it runs (then, once the wall clock
    is past the second it started in: start times have whole seconds, and a change in that
    second would count as read at start)."""
    pod: dict[str, Any] = {}

    async def all_running() -> bool:
        nonlocal pod
        found = await live_pods(kube, namespace, app)
        statuses = [s for p in found for s in (p.get("status") or {}).get("containerStatuses")
                    or ()]  # fmt: skip
        if len(found) != 1 or not statuses:
            return False
        pod = found[0]
        return all("running" in s.get("state", {}) for s in statuses)

    await until(all_running, 180)
    started = parse_timestamp(pod["status"]["startTime"])
    assert started is not None
    await eventually(lambda: time.time() >= started + 1, timeout=5)
    return pod


async def logged(
    cluster: LocalCluster, namespace: str, pod: str, line: str, container: str = "app",
    timeout: float = 90,
) -> list[str]:  # fmt: skip
    """The container's log once ``line`` is in it (polled: kubectl logs)."""

    async def poll() -> list[str]:
        while True:
            try:
                lines = await asyncio.to_thread(container_log, cluster, namespace, pod, container)
            except RuntimeError as exc:
                if "is waiting to start" not in str(exc):
                    raise
                lines = []  # not started yet: no log to read
            if line in lines:
                return lines
            await asyncio.sleep(0.2)

    return await asyncio.wait_for(poll(), timeout)


async def reasons_for(kube: KubeClient, namespace: str, reason: str) -> dict[str, str]:
    """The message of each Event ``reason`` by the name of the object it is about."""
    return {
        e["involvedObject"]["name"]: e["message"] for e in await events(kube, namespace, reason)
    }


async def reasons_for_once(
    kube: KubeClient, namespace: str, reason: str, *about: str, timeout: float = 60
) -> dict[str, str]:
    """``reasons_for`` once there is such an Event about each of ``about`` (default: about
    anything; the controller posts them in the background, after the write they are about)."""
    found: dict[str, str] = {}

    async def any_posted() -> bool:
        nonlocal found
        found = await reasons_for(kube, namespace, reason)
        return bool(found) and set(about) <= set(found)

    await until(any_posted, timeout)
    return found


async def replicasets(kube: KubeClient, namespace: str, app: str) -> list[str]:
    found = await kube.get(REPLICASETS.path(namespace), labelSelector=f"app={app}")
    return sorted(r["metadata"]["name"] for r in found["items"])


def restarts(pod: dict[str, Any]) -> dict[str, int]:
    return {s["name"]: s["restartCount"] for s in pod["status"]["containerStatuses"]}


async def test_a_change_reaches_the_running_app_by_signal_and_by_http_without_a_rollout(
    kube: AdminClient,
    cluster: LocalCluster,
    controller_image: BuiltImage,
    namespace: str,
    grant: bytes,
    tmp_path: Path,
) -> None:
    image = controller_image.ref
    # Deadline 60 s: a pod the controller cannot confirm falls back within the test's wait.
    annotations = {**HOT, "kube-nudge.io/hot-deadline": "60s"}
    by_signal = ["--watch", "/etc/app", "--signal", "HUP", "--process", "webapp"]
    by_http = ["--watch", "/etc/app", "--http-url", "http://127.0.0.1:8080/-/reload"]
    for deployment in (
        app_deployment("sig", image, agent=by_signal, annotations=annotations),
        app_deployment("http", image, agent=by_http, annotations=annotations,
                       env={"RELOAD_PORT": "8080"}),
    ):  # fmt: skip
        await kube.create(DEPLOYMENTS.path(namespace), deployment)
    before = {app: await running(kube, namespace, app) for app in ("sig", "http")}
    names = {app: pod["metadata"]["name"] for app, pod in before.items()}
    for pod in names.values():
        await logged(cluster, namespace, pod, "loaded v1")
    await grant_in_force(kube, cluster, namespace, before["sig"], tmp_path)
    sets = {app: await replicasets(kube, namespace, app) for app in names}

    async with running_controller(cluster, namespace) as controller:
        patched_at = time.time()
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "v2"}})

        async def both_confirmed() -> bool:
            return set(await reasons_for(kube, namespace, "HotReloaded")) == set(names)

        await until(both_confirmed, 120)
        confirmed_at = time.time()
        reloaded = await reasons_for(kube, namespace, "HotReloaded")
        for app in names:
            assert reloaded[app].startswith("every pod (1) reloaded config v1-"), reloaded
        assert await reasons_for(kube, namespace, "HotReloadFailed") == {}
        assert controller.metrics.hot_reloads.labels(outcome="reloaded")._value.get() == 2
        delivered = await reasons_for_once(kube, namespace, "HotReload", *names)
        assert set(delivered) == set(names)
        assert all("configmap/app keys [app.conf] changed" in m for m in delivered.values())

    for app, pod in names.items():
        # No rollout: the same ReplicaSet, the template untouched, the same pod, never
        # restarted, and the app's own log shows it loaded the new file in place.
        web = await kube.get(DEPLOYMENTS.path(namespace, app))
        assert template_hash(web, DEPLOYMENT) is None
        assert HOT_RELOAD not in web["metadata"]["annotations"]
        assert await replicasets(kube, namespace, app) == sets[app]
        [after] = await live_pods(kube, namespace, app)
        assert after["metadata"]["uid"] == before[app]["metadata"]["uid"]
        assert restarts(after) == {"app": 0, "kube-nudge-agent": 0}
        lines = await asyncio.to_thread(timestamped_log, cluster, namespace, pod, "app")
        assert [text for _, text in lines] == ["loaded v1", "loaded v2"]
        # What the agent recorded on its pod, with the pod's own projected token: the keyed
        # hash of /etc/app under the namespace's key, and when.
        annotations = after["metadata"]["annotations"]
        assert RELOAD_FAILED_AT not in annotations
        loaded = json.loads(annotations[LOADED_HASH])
        assert loaded["key"] == key_id(grant) and list(loaded["dirs"]) == ["/etc/app"]
        assert float(annotations[LOADED_AT]) >= patched_at
        print(
            f"\n{app}: PATCH -> agent reloaded {float(annotations[LOADED_AT]) - patched_at:.2f}s,"
            f" -> app logged the new config {lines[-1][0] - patched_at:.2f}s,"
            f" -> controller confirmed (seen by the test) {confirmed_at - patched_at:.2f}s"
        )
    agent_log = await asyncio.to_thread(
        container_log, cluster, namespace, names["sig"], "kube-nudge-agent"
    )
    assert any("reloaded: " in line for line in agent_log), agent_log
    assert not any("v2" in line for line in agent_log)  # hashes, never the content


async def test_a_reload_hashed_without_the_namespaces_key_is_not_a_confirmation(
    kube: AdminClient,
    cluster: LocalCluster,
    controller_image: BuiltImage,
    namespace: str,
    grant: bytes,
    tmp_path: Path,
) -> None:
    settings = {**HOT, "kube-nudge.io/hot-deadline": "5s", "kube-nudge.io/hot-fallback": "warn"}
    agent = ["--watch", "/etc/app", "--signal", "HUP", "--process", "webapp"]
    deployment = app_deployment("web", controller_image.ref, agent=agent, annotations=settings)
    # The agent without the key Secret's mount: it hashes under a random key of its own.
    sidecar = deployment["spec"]["template"]["spec"]["containers"][1]
    sidecar["volumeMounts"] = [m for m in sidecar["volumeMounts"] if m["mountPath"] == "/etc/app"]
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    pod = await running(kube, namespace, "web")
    name = pod["metadata"]["name"]
    await logged(cluster, namespace, name, "loaded v1")
    await grant_in_force(kube, cluster, namespace, pod, tmp_path)

    async with running_controller(cluster, namespace) as controller:
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "v2"}})
        # The app did reload the new file, and its agent said so on the pod...
        await logged(cluster, namespace, name, "loaded v2")
        claimed = await wait_for_object(
            kube, PODS.path(namespace), name,
            lambda p: LOADED_HASH in (p["metadata"].get("annotations") or {}), timeout=60,
        )  # fmt: skip
        own_key = json.loads(claimed["metadata"]["annotations"][LOADED_HASH])["key"]
        assert own_key != key_id(grant)
        # ... but under another key, so the controller cannot tell what it loaded.
        fallback = (await reasons_for_once(kube, namespace, "HotReloadFailed"))["web"]
        assert (
            f"{name}: its agent hashes with key {own_key}, not {AGENT_KEY_SECRET}'s "
            f"({key_id(grant)})"
        ) in fallback, fallback
        assert await reasons_for(kube, namespace, "HotReloaded") == {}
        assert controller.metrics.hot_reloads.labels(outcome="timed-out")._value.get() == 1
        assert controller.metrics.hot_reloads.labels(outcome="reloaded")._value.get() == 0
    web = await kube.get(DEPLOYMENTS.path(namespace, "web"))
    assert template_hash(web, DEPLOYMENT) is None  # hot-fallback warn: nothing rolled


async def test_a_config_that_fails_validation_is_not_loaded_and_the_fallback_rolls(
    kube: AdminClient,
    cluster: LocalCluster,
    controller_image: BuiltImage,
    namespace: str,
    grant: bytes,
    tmp_path: Path,
) -> None:
    agent = ["--watch", "/etc/app", "--signal", "HUP", "--process", "webapp",
             "--validate-command", VALIDATE]  # fmt: skip
    # Ready only while the loaded config isn't "broken": the rollout that falls back keeps
    # the old pod (maxUnavailable 0), so the test can read it after.
    deployment = app_deployment(
        "web", controller_image.ref, agent=agent, annotations=HOT, ready_probe=True
    )
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    old = await running(kube, namespace, "web")
    name = old["metadata"]["name"]
    await wait_for_object(kube, DEPLOYMENTS.path(namespace), "web", deployment_complete,
                          timeout=60)  # fmt: skip
    await grant_in_force(kube, cluster, namespace, old, tmp_path)
    [first_set] = await replicasets(kube, namespace, "web")

    async with running_controller(cluster, namespace) as controller:
        patched_at = time.time()
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "broken"}})
        failed = await wait_for_object(
            kube, PODS.path(namespace), name,
            lambda p: RELOAD_FAILED_AT in (p["metadata"].get("annotations") or {}), timeout=120,
        )  # fmt: skip
        failed_at = float(failed["metadata"]["annotations"][RELOAD_FAILED_AT])
        print(f"\nPATCH -> agent reported the failed validation {failed_at - patched_at:.2f}s")
        assert LOADED_AT not in failed["metadata"]["annotations"]  # it never reloaded
        web = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=60,
        )  # fmt: skip
        assert HOT_RELOAD not in web["metadata"]["annotations"]
        fallback = await reasons_for_once(kube, namespace, "HotReloadFailed", "web")
        assert fallback["web"].startswith("pods reported a failed reload of config v1-")
        assert fallback["web"].endswith(
            f": {name}; rolling instead (kube-nudge.io/hot-fallback: rollout)"
        )
        assert controller.metrics.hot_reloads.labels(outcome="failed")._value.get() == 1

    # The rollout started: a new ReplicaSet whose pod starts on what is now in the
    # ConfigMap (a rollout runs the current config, broken or not) and is not Ready on it...
    async def rolled() -> bool:
        # The new ReplicaSet, and its pod: a ReplicaSet is created before its pods (a fresh
        # clone's CI once read the pods between the two).
        others = [p for p in await live_pods(kube, namespace, "web")
                  if p["metadata"]["name"] != name]  # fmt: skip
        return len(await replicasets(kube, namespace, "web")) == 2 and bool(others)

    await until(rolled, 60)
    [new] = [p for p in await live_pods(kube, namespace, "web") if p["metadata"]["name"] != name]
    await logged(cluster, namespace, new["metadata"]["name"], "loaded broken")
    # ... so the old pod keeps serving, on the config it loaded: the agent refused the
    # reload, the app never loaded "broken" and never restarted, though its volume has it.
    [old_now] = [p for p in await live_pods(kube, namespace, "web")
                 if p["metadata"]["name"] == name]  # fmt: skip
    assert restarts(old_now) == {"app": 0, "kube-nudge-agent": 0}
    assert await asyncio.to_thread(container_log, cluster, namespace, name, "app") == ["loaded v1"]
    seen = await asyncio.to_thread(
        kubectl, cluster, "exec", "-n", namespace, name, "-c", "app", "--",
        "cat", "/etc/app/app.conf",
    )  # fmt: skip
    assert seen == "broken"
    agent_log = "\n".join(
        await asyncio.to_thread(container_log, cluster, namespace, name, "kube-nudge-agent")
    )
    assert "(validate failed)" in agent_log and "exited with 1" in agent_log, agent_log
    assert "reloaded: " not in agent_log
    assert first_set in await replicasets(kube, namespace, "web")


async def test_an_app_whose_agent_never_confirms_hits_the_deadline_and_the_fallback_rolls(
    kube: AdminClient,
    cluster: LocalCluster,
    controller_image: BuiltImage,
    namespace: str,
    grant: bytes,
) -> None:
    annotations = {**HOT, "kube-nudge.io/hot-deadline": "5s"}
    # Its agent watches a directory where no config is mounted: it never sees the change,
    # so nothing reloads the app or reports. (Without any agent it would roll at once.)
    silent = ["--watch", "/tmp/no-config-here", "--http-url", "http://127.0.0.1:8080/-/reload"]
    deployment = app_deployment("web", controller_image.ref, agent=silent, annotations=annotations)
    await kube.create(DEPLOYMENTS.path(namespace), deployment)
    old = await running(kube, namespace, "web")
    name = old["metadata"]["name"]
    await logged(cluster, namespace, name, "loaded v1")

    async with running_controller(cluster, namespace) as controller:
        patched_at = time.time()
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"app.conf": "v2"}})
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=60,
        )  # fmt: skip
        print(f"\nPATCH -> fallback rollout written {time.time() - patched_at:.2f}s (deadline 5s)")
        assert (await reasons_for_once(kube, namespace, "HotReload", "web"))["web"]
        fallback = (await reasons_for_once(kube, namespace, "HotReloadFailed", "web"))["web"]
        assert fallback.startswith("pods did not confirm reloading config v1-")
        assert f"within 5 s: {name} (is the kube-nudge agent running" in fallback
        assert fallback.endswith("rolling instead (kube-nudge.io/hot-fallback: rollout)")
        assert controller.metrics.hot_reloads.labels(outcome="timed-out")._value.get() == 1
        assert await reasons_for(kube, namespace, "HotReloaded") == {}
        await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: deployment_complete(o) and o["metadata"]["generation"] > 1, timeout=120,
        )  # fmt: skip
    [new] = await live_pods(kube, namespace, "web")
    assert new["metadata"]["name"] != name
    await logged(cluster, namespace, new["metadata"]["name"], "loaded v2")
    assert len(await replicasets(kube, namespace, "web")) == 2


async def test_subpath_and_env_consumers_roll_at_once_and_status_sees_them_stale_then_current(
    kube: AdminClient,
    cluster: LocalCluster,
    real_node: RealNode,
    controller_image: BuiltImage,
    namespace: str,
) -> None:
    data = {"LEVEL": "info", "app.conf": "v1"}
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", data))
    env = [{"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "LEVEL"}}}]
    sub = [{"name": "config", "mountPath": "/etc/app.conf", "subPath": "app.conf"}]
    consumers = {
        "envy": python_container(controller_image.ref, START_ONLY, env=env),
        "sub": python_container(controller_image.ref, START_ONLY, volumeMounts=sub),
    }
    # Approval holds the change until the test has looked at the stale pods with status;
    # then it is approved and strategy hot decides.
    annotations = {**HOT, "kube-nudge.io/approval": "required"}
    for app, container in consumers.items():
        volumes = [{"name": "config", "configMap": {"name": "app"}}] if app == "sub" else []
        spec = on_real_node(manifests.pod_spec(
            containers=[container], terminationGracePeriodSeconds=1, volumes=volumes,
        ))  # fmt: skip
        deployment = manifests.deployment(app, spec=spec, annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), deployment)
    old = {app: (await running(kube, namespace, app))["metadata"]["name"] for app in consumers}
    await logged(cluster, namespace, old["envy"], "env info")
    await logged(cluster, namespace, old["sub"], "loaded v1")

    async def status() -> tuple[int, dict[str, dict[str, Any]]]:
        code, out = await kube_nudge_cli(cluster, namespace, "status", "--all", "-o", "json",
                                         f"--state-namespace={namespace}")  # fmt: skip
        document, _ = json.JSONDecoder().raw_decode(out)  # stdout, then any stderr
        return code, {row["name"]: row for row in document["workloads"]}

    async with running_controller(cluster, namespace) as controller:
        code, rows = await status()
        assert code == 0 and {r["state"] for r in rows.values()} == {"current"}, rows
        # Start and change times are cut to the second: a change in the second its pods
        # started can't be told stale (status counts them unproven, rightly). A user's edit
        # comes later; so must this one (both clocks are this host's).
        await until(second_after_start(kube, namespace, consumers), 5)
        await kube.merge_patch(CONFIGMAPS.path(namespace, "app"),
                               {"data": {"LEVEL": "debug", "app.conf": "v2"}})  # fmt: skip

        async def held() -> bool:
            return set(await reasons_for(kube, namespace, "AwaitingApproval")) == set(consumers)

        await until(held, 30)
        code, rows = await status()
        assert code == 1, rows
        for app in consumers:
            evidence = await stale_evidence(kube, namespace, app, rows[app])
            assert rows[app]["stalePods"] == 1, evidence
            assert rows[app]["state"] != "current", evidence
            print(f"\nstatus --all before: {app} {rows[app]['state']}: {rows[app]['detail']}")
        code, out = await kube_nudge_cli(cluster, namespace, "approve", "deployment/envy",
                                         "deployment/sub")  # fmt: skip
        assert code == 0, out
        approved_at = time.time()
        for app in consumers:
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), app,
                lambda o: deployment_complete(o) and o["metadata"]["generation"] > 1,
                timeout=120,
            )  # fmt: skip
        print(f"\napprove -> both consumers rolled out {time.time() - approved_at:.2f}s")
        impossible = await reasons_for_once(kube, namespace, "HotReloadImpossible", *consumers)
        # Neither runs the reload agent either, which is named first.
        assert impossible == {
            "envy": f"cannot reload in place: {NO_AGENT}; configmap/app keys [LEVEL] are read "
            "only at start (env app); rolling instead",
            # Its subPath shows app.conf alone: the change of LEVEL never reaches it.
            "sub": f"cannot reload in place: {NO_AGENT}; configmap/app keys [app.conf] "
            "are read only at start (volume config (subPath)); rolling instead",
        }
        # Rolled at once: never delivered in place, never waited for.
        assert await reasons_for(kube, namespace, "HotReload") == {}
        assert await reasons_for(kube, namespace, "HotReloadFailed") == {}
        assert controller.metrics.hot_reloads.labels(outcome="rolled")._value.get() == 2
        await controller.controller.settled(timeout=30)

    for app in consumers:
        [new] = await live_pods(kube, namespace, app)
        assert new["metadata"]["name"] != old[app]
    new_names = {app: (await live_pods(kube, namespace, app))[0]["metadata"]["name"]
                 for app in consumers}  # fmt: skip
    await logged(cluster, namespace, new_names["envy"], "env debug")
    await logged(cluster, namespace, new_names["sub"], "loaded v2")
    code, rows = await status()
    assert code == 0, rows
    for app in consumers:
        assert rows[app]["state"] == "current" and rows[app]["stalePods"] == 0, rows[app]
        assert rows[app]["pods"] == {rows[app]["appliedHash"]: 1}, rows[app]
