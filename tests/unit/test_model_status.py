"""The state `kube-nudge status` gives a workload (`model.status`, pure: the time is
injected), from its own annotations and what its pods tell."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kube_nudge.model import CONFIG_HASH, WorkloadDefaults, WorkloadView, project_workload
from kube_nudge.model.annotations import (
    BASELINE_HASH,
    FAILED,
    ROLLOUT_WINDOW,
)
from kube_nudge.model.records import format_failed, format_hash_at
from kube_nudge.model.status import DRIFT_STATES, UNVERIFIED, PodFacts, classify
from kube_nudge.strategies.hot.settings import HOT_RELOAD
from kube_nudge.strategies.registry import model_extensions

THURSDAY = 0.0  # 1970-01-01 00:00 UTC
MONDAY_MORNING = 4 * 86400 + 9.5 * 3600  # 1970-01-05 09:30 UTC


def state_of(
    view: WorkloadView,
    desired: str | None,
    missing: tuple[str, ...],
    pods: Mapping[str, int] | None,
    stale: int,
    *,
    without: str | None = None,
    unproven: int = 0,
    now: float = THURSDAY,
    delivers: bool = True,
) -> tuple[str, str]:
    facts = PodFacts(pods, stale, unproven)
    return classify(view, desired, missing, facts, now=now, delivers=delivers, without=without)


def view(annotations: dict[str, str], template_hash: str = "v1-a") -> WorkloadView:
    obj: dict[str, Any] = {
        "metadata": {
            "namespace": "shop",
            "uid": "u",
            "annotations": {"kube-nudge.io/enabled": "true", **annotations},
        },
        "spec": {
            "template": {
                "metadata": {"annotations": {CONFIG_HASH: template_hash}},
                "spec": {"containers": [{"name": "a", "image": "x"}]},
            }
        },
    }
    projected = project_workload(obj, ("spec", "template"), WorkloadDefaults())
    assert projected is not None
    return projected


def test_a_failed_rollout_is_its_own_state_and_counts_as_drift() -> None:
    state, detail = state_of(view({FAILED: format_failed("v1-a", 1.0)}), "v1-a", (), {}, 0)
    assert state == "failed" and state in DRIFT_STATES
    assert detail.startswith("its rollout to v1-a failed (kube-nudge.io/failed)")
    # A failure of an earlier config is history.
    state, _ = state_of(view({FAILED: format_failed("v1-old", 1.0)}), "v1-a", (), {}, 0)
    assert state == "current"


def test_drift_says_what_the_workload_may_be_waiting_for() -> None:
    waiting = view({"kube-nudge.io/approval": "required", "kube-nudge.io/rollout-order": "2"})
    state, detail = state_of(waiting, "v1-b", (), {}, 0)
    assert state == "drift"
    assert "approval (kube-nudge.io/approval: required; kube-nudge approve)" in detail
    assert "lower rollout orders (kube-nudge.io/rollout-order: 2)" in detail
    _, plain = state_of(view({}), "v1-b", (), {}, 0)
    assert plain == "its config changed and it has not rolled yet"


# Without the key (a user who may not get the key Secret), only facts that need no key count.
KEYLESS = "get on secret kube-nudge/kube-nudge-hmac-key"


def test_without_the_key_old_pods_are_unverified_never_current_nor_drift() -> None:
    # The admin's answer for the same workload is `drift` (its config changed, not rolled).
    assert state_of(view({}), "v1-b", (), {"v1-a": 2}, 2)[0] == "drift"
    state, detail = state_of(view({}), None, (), {"v1-a": 2}, 2, without=KEYLESS)
    assert state == UNVERIFIED and state not in DRIFT_STATES
    assert "2 pod(s) started before its config last changed" in detail
    assert "a change of keys it doesn't read counts too" in detail
    assert detail.endswith(f"comparing its hash needs {KEYLESS}")


def test_without_the_key_pods_that_read_the_config_after_its_change_are_current() -> None:
    state, detail = state_of(view({}), None, (), {"v1-a": 2}, 0, without=KEYLESS)
    assert state == "current"
    assert "every pod was created after its config last changed" in detail
    assert "checked without the key" in detail


def test_without_the_key_no_pods_or_unlisted_pods_are_unverified() -> None:
    state, detail = state_of(view({}), None, (), {}, 0, without=KEYLESS)
    assert (state, detail.split(",")[0]) == (
        UNVERIFIED,
        "cannot verify: no pod tells which config it runs",
    )
    state, detail = state_of(view({}), None, (), None, 0, without=KEYLESS)
    assert state == UNVERIFIED and "its pods may not be listed here" in detail
    # Not opted in, pods not listable: never the audit's "current".
    opted_out = replace(view({}), settings=replace(view({}).settings, enabled=False))
    assert state_of(opted_out, None, (), None, 0)[0] == UNVERIFIED


def test_without_the_key_what_needs_no_key_is_still_told() -> None:
    held = state_of(view({}), None, ("configmap/app not found",), {"v1-a": 1}, 1, without=KEYLESS)
    assert held == ("held", "missing: configmap/app not found")
    failed = state_of(
        view({FAILED: format_failed("v1-a", 1.0)}), None, (), {"v1-a": 1}, 1, without=KEYLESS
    )
    assert failed[0] == "failed"
    unadopted = replace(view({}), template_hash=None)
    assert state_of(unadopted, None, (), {"-": 1}, 1, without=KEYLESS)[0] == "not-adopted"


def test_without_the_key_a_pod_started_in_the_second_of_the_change_is_not_proof() -> None:
    # API times have whole seconds: a pod started in that second may predate the change; an
    # agent's reload after it may have read old files. Neither proves anything.
    state, detail = state_of(view({}), None, (), {"v1-a": 2}, 0, without=KEYLESS, unproven=1)
    assert state == UNVERIFIED
    assert "1 pod(s) created in the second of its config's last change or before it" in detail
    # With the key, the hashes decide, as before.
    assert state_of(view({}), "v1-a", (), {"v1-a": 2}, 0, unproven=1)[0] == "current"


def test_drift_names_a_closed_rollout_window_at_the_injected_time() -> None:
    windowed = view({ROLLOUT_WINDOW: "Mon 09:00-10:00 UTC"})
    state, closed = state_of(windowed, "v1-b", (), {}, 0, now=THURSDAY)
    assert state == "drift" and "its rollout window (Mon 09:00-10:00" in closed
    # Four days away from Thursday: the real opening, not a day from now.
    assert "(Mon 09:00-10:00 UTC, opening at Mon 1970-01-05 09:00 UTC)" in closed
    state, open_ = state_of(windowed, "v1-b", (), {}, 0, now=MONDAY_MORNING)
    assert (state, open_) == ("drift", "its config changed and it has not rolled yet")


def test_a_strategy_that_only_announces_is_notify_only_unless_config_is_missing() -> None:
    announcing = replace(view({}), settings=replace(view({}).settings, strategy="notify"))
    state, detail = state_of(announcing, "v1-b", (), {"v1-a": 1}, 0, delivers=False)
    assert (state, detail) == (
        "notify-only",
        "changes are announced, never rolled (strategy notify)",
    )
    held = state_of(announcing, "v1-b", ("configmap/app not found",), {}, 0, delivers=False)
    assert held[0] == "held"


def test_an_opted_out_workload_with_stale_pods_names_the_sources_that_never_refresh() -> None:
    opted_out = replace(view({}), settings=replace(view({}).settings, enabled=False))
    facts = PodFacts({"-": 2}, stale=2, never_refreshed=("secret/db", "configmap/app"))
    state, detail = classify(opted_out, None, (), facts, now=THURSDAY)
    assert state == "stale" and state in DRIFT_STATES
    assert detail == (
        "2 pod(s) started before their config last changed; certainly stale (env, subPath or "
        "init container): configmap/app, secret/db"
    )
    fresh = classify(opted_out, None, (), PodFacts({"-": 2}), now=THURSDAY)
    assert fresh == ("current", "pods started after their config last changed")


def test_a_change_delivered_in_place_is_reloading_by_the_strategys_own_state() -> None:
    """The state comes from the registered strategy (hot's `StrategyModel.status`), kept
    of the workload's annotations by its view hook; the model names no strategy."""
    extensions = model_extensions()
    defaults = WorkloadDefaults(extensions=extensions)
    obj: dict[str, Any] = {
        "metadata": {
            "namespace": "shop",
            "uid": "u",
            "annotations": {
                "kube-nudge.io/enabled": "true",
                BASELINE_HASH: "v1-b",
                HOT_RELOAD: format_hash_at("v1-b", 1.0),
            },
        },
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}},
    }
    delivering = project_workload(obj, ("spec", "template"), defaults)
    assert delivering is not None
    facts = PodFacts({"v1-a": 2}, 0, 0)
    state, detail = classify(delivering, "v1-b", (), facts, now=THURSDAY, extensions=extensions)
    assert (state, detail) == (
        "reloading",
        "reloading v1-b in place (strategy hot); 2 pod(s) have not confirmed it yet",
    )
    # Without the strategies' hooks, it is what the pods run.
    assert classify(delivering, "v1-b", (), facts, now=THURSDAY)[0] == "current"
