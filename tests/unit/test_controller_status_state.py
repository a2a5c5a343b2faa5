"""The state `kube-nudge status` gives a workload, from its own annotations (pure part)."""

from __future__ import annotations

from typing import Any

from kube_nudge.controller.status import DRIFT_STATES, _state
from kube_nudge.model import CONFIG_HASH, WorkloadDefaults, WorkloadView, project_workload
from kube_nudge.model.annotations import FAILED, format_failed


def view(annotations: dict[str, str], template_hash: str = "v1-a") -> WorkloadView:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "shop", "uid": "u",
                     "annotations": {"kube-nudge.io/enabled": "true", **annotations}},
        "spec": {"template": {"metadata": {"annotations": {CONFIG_HASH: template_hash}},
                              "spec": {"containers": [{"name": "a", "image": "x"}]}}},
    }  # fmt: skip
    projected = project_workload(obj, ("spec", "template"), WorkloadDefaults())
    assert projected is not None
    return projected


def test_a_failed_rollout_is_its_own_state_and_counts_as_drift() -> None:
    state, detail = _state(view({FAILED: format_failed("v1-a", 1.0)}), "v1-a", (), {}, 0, [])
    assert state == "failed" and state in DRIFT_STATES
    assert detail.startswith("its rollout to v1-a failed (kube-nudge.io/failed)")
    # A failure of an earlier config is history.
    state, _ = _state(view({FAILED: format_failed("v1-old", 1.0)}), "v1-a", (), {}, 0, [])
    assert state == "current"


def test_drift_says_what_the_workload_may_be_waiting_for() -> None:
    waiting = view({
        "kube-nudge.io/approval": "required", "kube-nudge.io/rollout-order": "2",
    })  # fmt: skip
    state, detail = _state(waiting, "v1-b", (), {}, 0, [])
    assert state == "drift"
    assert "approval (kube-nudge.io/approval: required; kube-nudge approve)" in detail
    assert "lower rollout orders (kube-nudge.io/rollout-order: 2)" in detail
    _, plain = _state(view({}), "v1-b", (), {}, 0, [])
    assert plain == "its config changed and it has not rolled yet"
