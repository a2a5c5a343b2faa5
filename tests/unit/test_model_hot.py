"""Strategy hot, the pure parts: which changes reach running pods, and the pods' verdict."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.agent import keys, podrecord
from kube_nudge.agentwire import (
    AGENT_KEY_FIELD,
    LOADED_AT,
    LOADED_HASH,
    MIN_KEY_BYTES,
    RELOAD_FAILED_AT,
    key_id,
)
from kube_nudge.model import Apply, assess
from kube_nudge.model.hashing import ABSENT
from kube_nudge.model.projection import WorkloadView, project_workload
from kube_nudge.model.references import SourceKind, SourceRef, discover
from kube_nudge.model.shapes import NO_EXTRAS
from kube_nudge.strategies.hot.settings import hot_agent
from kube_nudge.strategies.hot.verdicts import (
    NO_AGENT,
    POLL_SECONDS,
    PodReport,
    VerdictKind,
    in_place_blockers,
    judge,
    restart_reasons,
    runs_agent,
    started_after,
)
from kube_nudge.strategies.registry import product_defaults
from kube_nudge_dev import manifests

NS = "team"
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
T0 = 1_800_000_000.0


def spec() -> dict[str, Any]:
    """Key `level` as an env var, the whole ConfigMap as a live volume, and `seed` for an
    init container through a second volume."""
    return {
        "volumes": [
            {"name": "live", "configMap": {"name": "app"}},
            {"name": "seed", "configMap": {"name": "app", "items": [{"key": "seed", "path": "s"}]}},
        ],
        "initContainers": [{"name": "init", "volumeMounts": [{"name": "seed", "mountPath": "/s"}]}],
        "containers": [{
            "name": "web",
            "env": [{"name": "L", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "level"}}}],  # noqa: E501
            "volumeMounts": [{"name": "live", "mountPath": "/etc/app"}],
        }],
    }  # fmt: skip


def plan(changes: dict[SourceRef, list[str]] | None, **more: Any) -> Apply:
    return Apply("v1-new", changes, (T0,), had_baseline=True, **more)


def reasons(changes: dict[SourceRef, list[str]] | None, **more: Any) -> list[str]:
    visible = discover(spec(), NS)
    return restart_reasons(plan(changes, **more), visible, {}, NS)


def test_keys_only_a_live_volume_carries_go_hot() -> None:
    assert reasons({APP: ["port", "tls.conf"]}) == []


def test_an_env_or_init_container_key_rolls_and_says_through_what() -> None:
    assert reasons({APP: ["level", "port"]}) == [
        "configmap/app keys [level] are read only at start (env web, volume seed (init container))"
    ]
    assert reasons({APP: ["seed"]})[0].startswith("configmap/app keys [seed] are read only")


def test_unknown_changes_stale_pods_and_appearing_sources_roll() -> None:
    assert reasons(None) == [
        "what changed while kube-nudge was not watching is not known key by key"
    ]
    assert reasons({APP: ["port"]}, stale_pods=True) == [
        "the pods started before their config last changed"
    ]
    assert reasons({APP: []}) == [
        "configmap/app was removed (only a restart mounts or unmounts it)"
    ]
    other = SourceRef(SourceKind.SECRET, NS, "gone")
    assert restart_reasons(plan({other: ["k"]}), {}, {other: ABSENT}, NS) == [
        "secret/gone no longer counts for the workload"
    ]


def pod(name: str, **fields: Any) -> PodReport:
    return PodReport(name=name, started=fields.pop("started", T0 - 100), **fields)


def test_every_pod_that_loaded_the_data_delivered_or_started_since_is_done() -> None:
    pods = [pod("a", loaded_at=T0 + 3, loaded_delivered=True), pod("b", started=T0 + 1),
            pod("c", terminating=True)]  # fmt: skip
    verdict = judge(pods, since=T0, delivered_at=T0 + 2, deadline=60, now=T0 + 5)
    assert verdict.kind is VerdictKind.RELOADED


def test_a_pod_started_in_the_same_second_as_the_change_proves_nothing() -> None:
    # Start times have whole seconds: started "at T0" may be T0.9, before a change at T0.8
    # that it then never read. Only a start in a later second confirms.
    change = T0 + 0.8
    same = judge([pod("a", started=T0)], since=change, delivered_at=change, deadline=60,
                 now=change + 1)  # fmt: skip
    assert same.kind is VerdictKind.WAITING and same.pods == ("a",)
    later = judge([pod("a", started=T0 + 1)], since=change, delivered_at=change, deadline=60,
                  now=change + 1)  # fmt: skip
    assert later.kind is VerdictKind.RELOADED
    assert not started_after(T0, change) and started_after(T0 + 1, change)
    assert not started_after(None, change)


def test_a_fresh_load_of_other_data_is_not_a_confirmation() -> None:
    # Both reloaded after the change; only b's agent loaded what was delivered.
    other = "it loaded other data than delivered in /etc/app"
    pods = [pod("a", loaded_at=T0 + 1, why_not=other),
            pod("b", loaded_at=T0 + 1, loaded_delivered=True)]  # fmt: skip
    verdict = judge(pods, since=T0, delivered_at=T0 + 2, deadline=60, now=T0 + 5)
    assert verdict.kind is VerdictKind.WAITING and verdict.pods == ("a",)
    assert verdict.why == {"a": other} and verdict.retry_after == POLL_SECONDS
    late = judge(pods, since=T0, delivered_at=T0 + 2, deadline=60, now=T0 + 61.5)
    assert late.kind is VerdictKind.WAITING and late.retry_after == 0.5
    timed_out = judge(pods, since=T0, delivered_at=T0 + 2, deadline=60, now=T0 + 62)
    assert timed_out.kind is VerdictKind.TIMED_OUT and timed_out.pods == ("a",)
    assert timed_out.why == {"a": other}


def test_a_load_of_the_data_delivered_counts_whenever_it_happened() -> None:
    # The change put back what the pod already ran (a revert): its agent had no reason to
    # reload, and what it loaded is what was delivered.
    pods = [pod("a", loaded_at=T0 - 50, loaded_delivered=True)]
    verdict = judge(pods, since=T0, delivered_at=T0, deadline=60, now=T0 + 1)
    assert verdict.kind is VerdictKind.RELOADED


def test_a_failed_reload_since_the_change_fails_it_unless_a_later_one_worked() -> None:
    failed = [pod("b", failed_at=T0 + 3), pod("a", failed_at=T0 + 4, loaded_at=T0 + 3)]
    verdict = judge(failed, since=T0, delivered_at=T0, deadline=60, now=T0 + 5)
    assert verdict.kind is VerdictKind.FAILED and verdict.pods == ("a", "b")
    recovered = [pod("a", failed_at=T0 + 3, loaded_at=T0 + 4, loaded_delivered=True),
                 pod("b", failed_at=T0 - 9)]  # fmt: skip
    verdict = judge(recovered, since=T0, delivered_at=T0, deadline=60, now=T0 + 5)
    assert verdict.kind is VerdictKind.WAITING and verdict.pods == ("b",)


@given(
    st.lists(
        st.tuples(
            st.none() | st.floats(T0 - 50, T0 + 50),
            st.none() | st.floats(T0 - 50, T0 + 50),
            st.booleans(),
            st.booleans(),
        ),
        max_size=6,
    ),
    st.floats(0, 200),
)
def test_the_verdict_is_total_and_consistent(
    reports: list[tuple[float | None, float | None, bool, bool]], elapsed: float
) -> None:
    pods = [pod(f"p{i}", loaded_at=loaded, failed_at=failed, terminating=going,
                loaded_delivered=delivered)
            for i, (loaded, failed, going, delivered) in enumerate(reports)]  # fmt: skip
    verdict = judge(pods, since=T0, delivered_at=T0, deadline=60, now=T0 + elapsed)
    live = {p.name for p in pods if not p.terminating}
    assert set(verdict.pods) <= live
    if verdict.kind is VerdictKind.RELOADED:
        # Never on a reload's time alone: only what was loaded, or a start since.
        assert all(p.loaded_delivered for p in pods if p.name in live
                   and p.started is not None and p.started < T0)  # fmt: skip
    if verdict.kind is VerdictKind.WAITING:
        assert elapsed < 60 and verdict.retry_after is not None and verdict.retry_after > 0
    if verdict.kind is VerdictKind.TIMED_OUT:
        assert elapsed >= 60 and verdict.pods


def test_the_agent_writes_what_the_controller_reads() -> None:
    # Both sides take the names, the key and the hash from one wire protocol (agentwire):
    # what is left to check is that the agent writes under those names and that key.
    assert set(podrecord.loaded_annotations("h", 1.0)) == {LOADED_HASH, LOADED_AT}
    assert set(podrecord.failed_annotations(1.0)) == {RELOAD_FAILED_AT}
    key = b"k" * MIN_KEY_BYTES
    assert keys.HashKey.fixed(key).id == key_id(key)
    # The agent's default key file is the Secret's key, mounted.
    assert keys.DEFAULT_KEY_FILE.endswith(f"/{AGENT_KEY_FIELD}")


AGENT_ARGS = ["agent", "--watch", "/etc/app", "--signal", "HUP", "--process", "nginx"]


@pytest.mark.parametrize(
    "container",
    [
        {"args": AGENT_ARGS},  # docs/reload.md and the chart's NOTES: the image's entrypoint
        {"command": ["kube-nudge"], "args": AGENT_ARGS},
        {"command": ["/usr/local/bin/kube-nudge", *AGENT_ARGS]},
        {"command": ["kubectl-nudge", "agent"]},
        {"command": ["sh", "-c"], "args": ["exec kube-nudge agent --watch /etc/app"]},
        {"command": ["python", "-m", "kube_nudge.agent"], "args": ["--watch", "/etc/app"]},
        {"command": ["python3", "-m", "kube_nudge", "agent"]},
    ],
)
def test_the_agent_is_recognised_by_what_its_container_runs(container: dict[str, Any]) -> None:
    app = {"name": "app", "image": "nginx"}
    assert runs_agent({"containers": [app, {"name": "any", "image": "mirror/x", **container}]})
    # As a native sidecar too: an init container that keeps running.
    sidecar = {"name": "s", "restartPolicy": "Always", **container}
    assert runs_agent({"containers": [app], "initContainers": [sidecar]})


@pytest.mark.parametrize(
    "container",
    [
        {"image": "registry.example/kube-nudge:0.1.0"},  # the image runs `kube-nudge run`
        {"image": "kube-nudge", "args": ["run"]},
        {"name": "kube-nudge-agent", "image": "kube-nudge", "args": ["--watch", "/etc/app"]},
        {"command": ["nginx"], "args": ["agent"]},  # another program's argument
        {"command": ["kube-nudge", "run", "agent"]},
        {"command": ["kube-nudge-agent"]},
        {"command": "kube-nudge agent"},  # not a list: the API server refuses it
    ],
)
def test_what_does_not_run_the_agent_is_not_taken_for_one(container: dict[str, Any]) -> None:
    app = {"name": "app", "image": "nginx"}
    assert not runs_agent({"containers": [app, {"name": "x", **container}]})
    # An init container that runs to completion before the app is no sidecar.
    assert not runs_agent(
        {"containers": [app], "initContainers": [{"name": "i", "args": ["agent"]}]}
    )


def test_without_an_agent_a_hot_change_rolls_at_once_unless_the_fallback_only_warns() -> None:
    obj = manifests.deployment("web", spec=spec(), annotations={"kube-nudge.io/enabled": "true"})
    obj["metadata"]["namespace"] = NS
    view = project_workload(obj, ("spec", "template"), product_defaults())
    assert view is not None
    assessment = assess(view, lambda ref: None, b"k" * 32)
    change = plan({APP: ["port"]})
    assert in_place_blockers(view, change, assessment) == []
    assert in_place_blockers(view, change, assessment, agent=False) == [NO_AGENT]
    # hot-fallback: warn never rolls for pods that can't confirm: in place, unconfirmed.
    assert in_place_blockers(view, change, assessment, agent=False, fallback_rollout=False) == []
    # Keys read at start roll whatever the agent: both reasons are named.
    both = in_place_blockers(view, plan({APP: ["level"]}), assessment, agent=False)
    assert both[0] == NO_AGENT and both[1].startswith("configmap/app keys [level] are read only")


def test_the_view_keeps_a_missing_agent_only_for_hot_workloads() -> None:
    """Every cached view holds its extras: a workload of another strategy, or a hot one
    with its agent, keeps nothing."""

    def view_of(strategy: str, *containers: dict[str, Any]) -> WorkloadView:
        pod_spec = spec()
        pod_spec["containers"] += containers
        annotations = {"kube-nudge.io/enabled": "true", "kube-nudge.io/strategy": strategy}
        obj = manifests.deployment("web", spec=pod_spec, annotations=annotations)
        view = project_workload(obj, ("spec", "template"), product_defaults())
        assert view is not None
        return view

    assert view_of("rollout").extras == NO_EXTRAS
    assert view_of("hot", {"name": "agent", "args": AGENT_ARGS}).extras == NO_EXTRAS
    assert hot_agent(view_of("hot", {"name": "agent", "args": AGENT_ARGS}))
    assert not hot_agent(view_of("hot"))
