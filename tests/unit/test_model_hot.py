"""Strategy hot, the pure parts: which changes reach running pods, and the pods' verdict."""

from __future__ import annotations

from typing import Any

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
from kube_nudge.model import Apply
from kube_nudge.model.hashing import ABSENT
from kube_nudge.model.references import SourceKind, SourceRef, discover
from kube_nudge.strategies.hot.rules import (
    POLL_SECONDS,
    PodReport,
    VerdictKind,
    judge,
    restart_reasons,
    started_after,
)

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
