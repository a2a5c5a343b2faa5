"""Safe config releases observed from outside: a watch of the Deployments records every
template change, completed rollout and recorded failure in order, for the tests on the fake
kubelet (test_safe_rollouts.py, the fault suite) and on the real node alike. The app's rule,
the same everywhere: a config whose ``MODE`` is ``broken`` never becomes Ready."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model.annotations import FAILED
from kube_nudge.model.progress import progress_of
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.manifests import ENABLED
from kube_nudge_dev.waiting import until
from tests.integration.controller_support import background, events, template_hash
from tests.integration.fakekubelet import placement
from tests.webhook_receiver import Server

DEPLOYMENT = BUILTIN_KINDS[0]

DEADLINE = "8s"  # kube-nudge.io/progress-deadline: a bad config fails within seconds
TIMEOUT = 90.0


@dataclass
class Seen:
    """One Deployment as last seen on the watch."""

    template: str | None = None
    done: bool = False
    failed: bool = False


@dataclass
class Timeline:
    """Every change of each Deployment's template hash, rollout completion and recorded
    failure, in watch order: (sequence, name, what)."""

    entries: list[tuple[int, str, str]] = field(default_factory=list)
    seen: dict[str, Seen] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    completed: dict[str, str | None] = field(default_factory=dict)
    """The template each Deployment last completed a rollout of."""
    rolling_peak: int = 0
    """The most Deployments seen rolling at once (template changed, not done yet)."""

    def apply(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        progress = progress_of("Deployment.apps", obj)
        now = Seen(
            template_hash(obj, DEPLOYMENT),
            progress is not None and progress.done,
            FAILED in (obj["metadata"].get("annotations") or {}),
        )
        before = self.seen.get(name)
        if before is not None and before.template != now.template:
            self.entries.append((len(self.entries), name, "template"))
        # "done": the rollout of this template completed (once per template; a Deployment
        # can look unfinished for a moment without a new template, e.g. while a pod is
        # replaced, which is not a rollout).
        if now.done and self.completed.get(name, "?") != now.template:
            self.completed[name] = now.template
            self.entries.append((len(self.entries), name, "done"))
        if now.failed and (before is None or not before.failed):
            self.entries.append((len(self.entries), name, "failed"))
        self.seen[name] = now
        rolling = sum(
            1 for n, s in self.seen.items() if self.completed.get(n, "?") != s.template
            and not s.failed
        )  # fmt: skip
        self.rolling_peak = max(self.rolling_peak, rolling)
        self.changed.set()

    async def until(self, condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
        async with asyncio.timeout(timeout):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    def first(self, name: str, what: str, after: int = 0) -> int:
        found = [i for i, n, w in self.entries[after:] if n == name and w == what]
        assert found, f"no {what} of {name} after {after}: {self.entries}"
        return found[0]


@contextlib.asynccontextmanager
async def watching(kube: KubeClient, namespace: str) -> AsyncIterator[Timeline]:
    timeline = Timeline()
    listed = await kube.get(DEPLOYMENTS.path(namespace))
    for obj in listed["items"]:
        timeline.apply(obj)

    async def follow() -> None:
        version = listed["metadata"]["resourceVersion"]
        async for event in kube.watch(DEPLOYMENTS.path(namespace), resource_version=version):
            if event["type"] in ("ADDED", "MODIFIED"):
                timeline.apply(event["object"])

    async with background(follow()):
        yield timeline


def announced(server: Server) -> collections.Counter[tuple[str, str]]:
    """(workload, kind) of every notification delivered."""
    return collections.Counter((p["workload"], p["kind"]) for p in server.payloads("hook"))


async def change(kube: AdminClient, namespace: str, mode: str) -> None:
    await kube.merge_patch(CONFIGMAPS.path(namespace, "app"), {"data": {"MODE": mode}})


def held(found: list[dict[str, Any]]) -> set[str]:
    return {event["involvedObject"]["name"] for event in found}


ORDERS = {"a1": 1, "b1": 1, "a2": 2, "b2": 2, "c3": 3}


def assert_in_order(timeline: Timeline, start: int, orders: Mapping[str, int] = ORDERS) -> None:
    """Every workload rolled exactly once since ``start``, each after every lower order
    completed."""
    rolled = collections.Counter(n for _, n, w in timeline.entries[start:] if w == "template")
    assert rolled == dict.fromkeys(orders, 1), rolled
    for name, order in orders.items():
        first = timeline.first(name, "template", start)
        for lower, lower_order in orders.items():
            if lower_order < order:
                assert timeline.first(lower, "done", start) < first, (name, lower)


def all_done(timeline: Timeline, start: int, names: Iterable[str] = ORDERS) -> bool:
    return all(
        any(n == name and w == "done" for _, n, w in timeline.entries[start:]) for name in names
    )


async def held_for(kube: KubeClient, namespace: str, reason: str, name: str = "web") -> None:
    """Wait for a hold's Event on ``name``."""

    async def posted() -> bool:
        return name in held(await events(kube, namespace, reason))

    await until(posted, TIMEOUT)


def valid(env: Mapping[str, str]) -> bool:
    """The app starts only with a config that isn't broken."""
    return env.get("MODE") != "broken"


def node_for(namespace: str) -> str:
    """Each test its own fake node: pods of an earlier test's namespace still terminating
    never land on it."""
    return f"fake-kubelet-{namespace}"


async def make_fleet(
    kube: KubeClient,
    namespace: str,
    orders: Mapping[str, int | None],
    spec: dict[str, Any],
    *,
    replicas: int = 2,
    more: Mapping[str, str] | None = None,
) -> None:
    """ConfigMap ``app`` (MODE v1) and one Deployment per name, each reading MODE through
    ``spec`` and carrying its rollout order, a short progress deadline and ``more``
    annotations."""
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"MODE": "v1"}))
    for name, order in orders.items():
        annotations = {**ENABLED, "kube-nudge.io/progress-deadline": DEADLINE, **(more or {})}
        if order is not None:
            annotations["kube-nudge.io/rollout-order"] = str(order)
        body = manifests.deployment(name, replicas=replicas, spec=spec, annotations=annotations)
        await kube.create(DEPLOYMENTS.path(namespace), body)


async def kubelet_fleet(
    kube: KubeClient, namespace: str, orders: Mapping[str, int | None], **more: str
) -> None:
    """``make_fleet`` on this test's fake kubelet (``node_for``), two replicas each."""
    spec = {**manifests.env_consumer("MODE"), **placement(node_for(namespace))}
    await make_fleet(kube, namespace, orders, spec, more=more)


async def roll_to_good_then_broken(
    kube: AdminClient, namespace: str, timeline: Timeline
) -> str | None:
    """Change "web"'s config to a good one (v2), wait until it is out, then to a broken
    one; returns the good template once the failed rollout was rolled back to it."""
    before = timeline.seen["web"].template
    await change(kube, namespace, "v2")
    await timeline.until(lambda: timeline.seen["web"].template != before
                         and timeline.seen["web"].done)  # fmt: skip
    good = timeline.seen["web"].template
    await change(kube, namespace, "broken")
    await timeline.until(lambda: timeline.seen["web"].failed)
    await held_for(kube, namespace, "RolledBack")
    await timeline.until(lambda: timeline.seen["web"].template == good
                         and timeline.seen["web"].done)  # fmt: skip
    return good


@dataclass(frozen=True)
class Tally:
    """What the timeline shows of a run's rollouts, against what its changes justify."""

    lost: dict[str, int]  # workload -> justified rollouts that never happened
    extra: dict[str, int]  # workload -> rollouts beyond those justified
    rollouts: int


def tally(timeline: Timeline, phases: Sequence[tuple[int, Mapping[str, int]]]) -> Tally:
    """Count the template changes of each phase (from its start in the timeline to the next
    phase's) per workload, against the rollouts its change justifies."""
    lost: collections.Counter[str] = collections.Counter()
    extra: collections.Counter[str] = collections.Counter()
    rollouts = 0
    ends = [start for start, _ in phases[1:]] + [len(timeline.entries)]
    for (start, justified), end in zip(phases, ends, strict=True):
        rolled = collections.Counter(
            n for _, n, w in timeline.entries[start:end] if w == "template"
        )
        rollouts += rolled.total()
        for name in rolled.keys() | justified.keys():
            lost[name] += max(justified.get(name, 0) - rolled[name], 0)
            extra[name] += max(rolled[name] - justified.get(name, 0), 0)
    return Tally(dict(+lost), dict(+extra), rollouts)
