"""Strategy `hot`'s delivery verdicts, decided purely: which changes can reach running pods
without a restart, and whether the pods' reload agents confirmed one (the clock is an
argument).

A key consumed through a volume mounted whole (no `subPath`) by app containers reaches
running pods: the kubelet rewrites the files, and the `kube-nudge agent` sidecar reloads
the app. A key consumed through an env var, `envFrom`, a `subPath` mount, a volume an init
container mounts, or a source named only by annotation never does: such a change rolls.
Nor can a pod template with no container running the agent (``runs_agent``): no pod could
ever confirm a reload, so its changes roll at once (or, with `kube-nudge.io/hot-fallback:
warn`, are delivered in place unconfirmed, with a warning), never after a deadline.

A pod has the change once its agent's claim equals the data delivered (checked by hash:
``claims.check_claim``), or once it started after the change (``started_after``); a claim
of other data is never a confirmation, however fresh its `loaded-at` (``judge``).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kube_nudge.model.decide import Apply, Assessment
from kube_nudge.model.extensions import Delivery
from kube_nudge.model.hashing import ABSENT, SourceState
from kube_nudge.model.projection import WorkloadView
from kube_nudge.model.references import (
    INIT_SUFFIX,
    SUBPATH_SUFFIX,
    Consumption,
    SourceRef,
)

__all__ = [
    "AGENT_COMMAND",
    "NO_AGENT",
    "POLL_SECONDS",
    "UNCONFIRMED",
    "PodReport",
    "Verdict",
    "VerdictKind",
    "delivery",
    "in_place_blockers",
    "judge",
    "restart_reasons",
    "runs_agent",
    "started_after",
]

POLL_SECONDS = 2.0
"""How often the pods' reports are read while a hot change waits for them."""
AGENT_COMMAND = "agent"
"""The subcommand of ``kube-nudge`` that runs the reload agent (its image's entrypoint is
``kube-nudge``, so the sidecar's args start with it: docs/reload.md)."""
_AGENT_PROGRAMS = ("kube-nudge", "kubectl-nudge")
_AGENT_MODULES = ("kube_nudge.agent", "kube_nudge.agent.main")
_AGENT_MAIN = ["kube_nudge", AGENT_COMMAND]
NO_AGENT = (
    "no container of its pod template runs the reload agent (`kube-nudge agent`, "
    "docs/reload.md), so no pod could confirm a reload"
)
"""Why a hot change to a pod template without the agent can't wait for confirmation."""
UNCONFIRMED = (
    f"delivered in place unconfirmed: {NO_AGENT}; its pods' volumes are refreshed without "
    "a restart, but nothing reloads the app: a Warning at once, no rollout "
    "(kube-nudge.io/hot-fallback: warn)"
)
"""What a hot change to a pod template without the agent does with `hot-fallback: warn`."""


def runs_agent(pod_spec: Mapping[str, Any]) -> bool:
    """Whether a container of ``pod_spec`` runs the reload agent: an app container, or a
    native sidecar (an init container with ``restartPolicy: Always``). Judged by what it
    runs, not by its image or name, which a registry mirror or a rename changes
    (``_agent_command``)."""
    containers = [
        *(pod_spec.get("containers") or ()),
        *(
            c
            for c in pod_spec.get("initContainers") or ()
            if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
        ),
    ]
    return any(isinstance(c, Mapping) and _agent_command(c) for c in containers)


def _agent_command(container: Mapping[str, Any]) -> bool:
    """Whether ``container``'s command line runs the agent: args starting with ``agent``
    and no command (the image's entrypoint, ``kube-nudge``, as docs/reload.md and the
    chart's NOTES add it), or anywhere in its command and args (a shell's ``-c`` script
    included) ``kube-nudge agent`` by any path (or its other name, ``kubectl-nudge``),
    ``-m kube_nudge agent`` or ``-m kube_nudge.agent``."""
    command, args = _words(container.get("command")), _words(container.get("args"))
    if not command:
        return args[:1] == [AGENT_COMMAND]
    words = [*command, *args]
    for i, word in enumerate(words):
        after = words[i + 1 : i + 3]
        if posixpath.basename(word) in _AGENT_PROGRAMS and after[:1] == [AGENT_COMMAND]:
            return True
        module = after[0] if after else ""
        if word == "-m" and (module in _AGENT_MODULES or after == _AGENT_MAIN):
            return True
    return False


def _words(value: object) -> list[str]:
    """The words of a container's ``command`` or ``args``, each item split at blanks (a
    shell script is one item) and stripped of shell quotes."""
    if not isinstance(value, list):
        return []
    return [w.strip("'\"") for item in value if isinstance(item, str) for w in item.split()]


def restart_reasons(
    plan: Apply,
    visible: Mapping[SourceRef, Consumption],
    states: Mapping[SourceRef, SourceState],
    namespace: str,
) -> list[str]:
    """Why ``plan`` can't be delivered to running pods (empty: it can), naming sources, keys
    and references, never values."""
    if plan.stale_pods:
        return ["the pods started before their config last changed"]
    if plan.changes is None:
        return ["what changed while kube-nudge was not watching is not known key by key"]
    reasons = []
    for ref, keys in plan.changes.items():
        label = ref.display(namespace)
        use = visible.get(ref)
        if not keys:
            went = "appeared" if states.get(ref, ABSENT).present else "was removed"
            reasons.append(f"{label} {went} (only a restart mounts or unmounts it)")
        elif use is None:
            reasons.append(f"{label} no longer counts for the workload")
        elif frozen := use.needs_restart(keys):
            through = ", ".join(_frozen_via(use)) or "a reference read at start"
            reasons.append(f"{label} keys [{', '.join(frozen)}] are read only at start ({through})")
    return reasons


def in_place_blockers(
    view: WorkloadView,
    plan: Apply,
    assessment: Assessment,
    *,
    agent: bool = True,
    fallback_rollout: bool = True,
) -> list[str]:
    """Why ``plan`` must roll ``view`` instead of reloading in place (empty: it reloads):
    no reload agent in its pod template (``agent`` False; ``runs_agent``) when
    `kube-nudge.io/hot-fallback` is rollout (``fallback_rollout``: a reload nobody could
    confirm would roll at the deadline anyway, so it rolls now), keys only a restart
    delivers (``restart_reasons``), pods it can't find, or a template that still names
    another strategy's stand-ins. What ``HotStrategy.apply`` does, and what ``kube-nudge
    plan`` says it will."""
    reasons = [] if agent or not fallback_rollout else [NO_AGENT]
    reasons += restart_reasons(plan, assessment.visible, assessment.states, view.namespace)
    if not view.pod_selector:
        reasons.append("its pods can't be found (no spec.selector)")
    if view.stand_ins:
        reasons.append("its template still names snapshot copies")
    return reasons


def delivery(
    view: WorkloadView,
    plan: Apply,
    assessment: Assessment,
    *,
    agent: bool = True,
    fallback_rollout: bool = True,
) -> Delivery:
    """Strategy hot's ``StrategyModel.delivery`` (``agent`` and ``fallback_rollout`` as for
    ``in_place_blockers``): reload in place, or roll and why; without an agent and with
    `hot-fallback: warn`, in place but unconfirmed."""
    blockers = in_place_blockers(
        view, plan, assessment, agent=agent, fallback_rollout=fallback_rollout
    )
    if blockers:
        return Delivery("roll", f"cannot reload in place: {'; '.join(blockers)}; rolls instead")
    if not agent:
        return Delivery("reload", UNCONFIRMED)
    return Delivery(
        "reload",
        "reloaded in place by each pod's agent: every changed key it reads "
        "reaches its pods through a refreshed volume",
    )


def _frozen_via(use: Consumption) -> list[str]:
    return [
        via
        for via in use.via
        if via.startswith(("env", "annotation")) or via.endswith((SUBPATH_SUFFIX, INIT_SUFFIX))
    ]


@dataclass(frozen=True, slots=True)
class PodReport:
    """What one pod says about its config (from its own annotations and status)."""

    name: str
    started: float | None
    """When its containers read their config at start (Unix seconds), if started."""
    loaded_at: float | None = None
    """Its agent's last successful reload (`kube-nudge.io/loaded-at`)."""
    failed_at: float | None = None
    """Its agent's last failed reload (`kube-nudge.io/reload-failed-at`)."""
    terminating: bool = False
    loaded_delivered: bool = False
    """Whether its agent's `kube-nudge.io/loaded-hash` is the data delivered (`check_claim`)."""
    why_not: str = ""
    """Why its agent's claim is not the data delivered (names, never values), if it made one."""


class VerdictKind(StrEnum):
    """Where a hot change stands."""

    RELOADED = "reloaded"
    WAITING = "waiting"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a hot change went; ``pods`` names the pods that failed or have not confirmed,
    ``why`` says for those whose agent claimed other data than delivered why not."""

    kind: VerdictKind
    pods: tuple[str, ...] = ()
    retry_after: float | None = None
    why: Mapping[str, str] = field(default_factory=dict)


def judge(
    pods: Iterable[PodReport], *, since: float, delivered_at: float, deadline: float, now: float
) -> Verdict:
    """Whether every live pod has the change made at ``since`` (Unix seconds), delivered at
    ``delivered_at``: its agent loaded exactly the data delivered, or it started since. Pods
    that reported a failed reload since then fail it, pods without the change ``deadline``
    seconds after delivery time it out."""
    live = sorted((pod for pod in pods if not pod.terminating), key=lambda pod: pod.name)
    failed = tuple(
        pod.name
        for pod in live
        if pod.failed_at is not None
        and pod.failed_at >= since
        and (pod.loaded_at is None or pod.failed_at > pod.loaded_at)
    )
    if failed:
        return Verdict(VerdictKind.FAILED, failed)
    silent = tuple(pod for pod in live if not _has_change(pod, since))
    if not silent:
        return Verdict(VerdictKind.RELOADED)
    names = tuple(pod.name for pod in silent)
    why = {pod.name: pod.why_not for pod in silent if pod.why_not}
    remaining = delivered_at + deadline - now
    if remaining <= 0:
        return Verdict(VerdictKind.TIMED_OUT, names, why=why)
    return Verdict(VerdictKind.WAITING, names, min(POLL_SECONDS, remaining), why)


def _has_change(pod: PodReport, since: float) -> bool:
    # A reload counts by what it loaded, not by when; a start only when it proves the read.
    return pod.loaded_delivered or started_after(pod.started, since)


def started_after(started: float | None, since: float) -> bool:
    """Whether a pod that started at ``started`` surely read the config changed at
    ``since``. Start times have whole seconds, so only a start in a later second than the
    change proves it: a pod started in the same second may have read either version, and
    counting it would confirm a reload nobody made (seen on the real node, where a pod
    can start and its config change within one second)."""
    return started is not None and started >= math.floor(since) + 1
