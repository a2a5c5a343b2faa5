"""An Argo Rollout's status, as the Argo Rollouts controller writes it, to a verdict
(`model.argorollout`) and to the phase kube-nudge follows (`model.progress`,
`model.tracking`): pure, on an injected time."""

from __future__ import annotations

from typing import Any

import pytest

from kube_nudge.app.cli import build_parser
from kube_nudge.app.run_command import RUN
from kube_nudge.model import CONFIG_HASH, ROLLED_AT, WorkloadDefaults, project_workload
from kube_nudge.model.argorollout import (
    ARGO_DEFAULT_PROGRESS_DEADLINE,
    WORKLOAD_GENERATION,
    Verdict,
    read_rollout,
    rollout_observed,
)
from kube_nudge.model.decide import Hold, assess, decide
from kube_nudge.model.memory import WorkloadMemory
from kube_nudge.model.progress import progress_of, rollout_complete
from kube_nudge.model.tracking import Phase, track

T0 = 1_700_000_000.0


def rollout(
    *,
    phase: str = "Healthy",
    generation: int = 2,
    observed: object = "2",
    current: str = "7d9f",
    stable: str = "7d9f",
    annotations: dict[str, str] | None = None,
    **status: Any,
) -> dict[str, Any]:
    """A Rollout as Argo leaves it: ``observedGeneration`` a string, hashes of ReplicaSets."""
    return {
        "metadata": {
            "namespace": "shop",
            "uid": "u1",
            "generation": generation,
            "annotations": {"kube-nudge.io/enabled": "true", **(annotations or {})},
        },
        "spec": {
            "replicas": 3,
            "strategy": {"canary": {"steps": [{"setWeight": 20}, {"pause": {}}]}},
            "template": {
                "metadata": {"annotations": {CONFIG_HASH: "v1-new"}},
                "spec": {"containers": [{"name": "app", "image": "x"}]},
            },
        },
        "status": {
            "phase": phase,
            "observedGeneration": observed,
            "currentPodHash": current,
            "stableRS": stable,
            "updatedReplicas": 3,
            "availableReplicas": 3,
            **status,
        },
    }


def verdict(obj: dict[str, Any]) -> Verdict:
    return read_rollout(obj["spec"], obj["status"]).verdict


def test_healthy_and_fully_promoted_is_done() -> None:
    obj = rollout()
    state = read_rollout(obj["spec"], obj["status"])
    assert state.verdict is Verdict.HEALTHY
    assert state.detail == "3 of 3 updated, 3 available"
    assert state.own_deadline == ARGO_DEFAULT_PROGRESS_DEADLINE
    assert rollout_complete("Rollout.argoproj.io", obj) is True


def test_healthy_phase_with_the_stable_replicaset_behind_is_still_progressing() -> None:
    # The new ReplicaSet is up but not yet stable: steps remain.
    assert verdict(rollout(current="new1", stable="old0")) is Verdict.PROGRESSING
    assert verdict(rollout(stable="")) is Verdict.PROGRESSING


@pytest.mark.parametrize(
    ("status", "expected", "detail"),
    [
        ({"phase": "Degraded", "message": "ProgressDeadlineExceeded: timed out"},
         Verdict.DEGRADED, "degraded: ProgressDeadlineExceeded: timed out"),
        ({"phase": "Degraded", "abort": True, "message": "RolloutAborted: metric failed"},
         Verdict.ABORTED, "aborted: RolloutAborted: metric failed"),
        ({"phase": "Progressing", "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]},
         Verdict.DEGRADED, "degraded"),
        ({"phase": "Progressing", "conditions": [
            {"type": "InvalidSpec", "status": "True", "reason": "InvalidSpec"}]},
         Verdict.DEGRADED, "invalid spec"),
        ({"phase": "Paused", "message": "CanaryPauseStep",
          "pauseConditions": [{"reason": "CanaryPauseStep", "startTime": "2026-01-01T00:00:00Z"}]},
         Verdict.PAUSED, "paused at a canary step, waiting for promotion"),
        ({"phase": "Paused", "pauseConditions": [{"reason": "AnalysisRunInconclusive"}]},
         Verdict.PAUSED, "paused: an analysis was inconclusive"),
        ({"phase": "Paused", "message": "BlueGreenPause"},
         Verdict.PAUSED, "paused: BlueGreenPause"),
        ({"phase": "Progressing", "message": "more replicas need to be updated"},
         Verdict.PROGRESSING, "more replicas need to be updated"),
    ],
)  # fmt: skip
def test_each_phase_argo_writes_has_its_verdict(
    status: dict[str, Any], expected: Verdict, detail: str
) -> None:
    obj = rollout(current="new1", stable="old0", **status)
    state = read_rollout(obj["spec"], obj["status"])
    assert (state.verdict, state.detail) == (expected, detail)


def test_a_rollout_paused_by_hand_is_paused() -> None:
    obj = rollout(phase="Paused", current="new1", stable="old0")
    obj["spec"]["paused"] = True
    assert verdict(obj) is Verdict.PAUSED


def test_observed_generation_is_a_string_and_a_spec_hash_counts_as_observed() -> None:
    assert rollout_observed(rollout(generation=3, observed="3"))
    assert not rollout_observed(rollout(generation=3, observed="2"))
    assert rollout_observed(rollout(generation=3, observed="5c6b8f7d9"))  # a v0.9 spec hash
    assert rollout_observed(rollout(generation=3, observed=3))
    # The built-in rule (an int) would call the string unobserved forever.
    progress = progress_of("Rollout.argoproj.io", rollout(generation=3, observed="3"))
    assert progress is not None and progress.observed and progress.done


def test_with_workload_ref_the_referenced_generation_must_be_observed_too() -> None:
    behind = rollout(annotations={WORKLOAD_GENERATION: "4"}, workloadObservedGeneration="3")
    assert not rollout_observed(behind)
    progress = progress_of("Rollout.argoproj.io", behind)
    assert progress is not None and not progress.observed and not progress.done
    caught_up = rollout(annotations={WORKLOAD_GENERATION: "4"}, workloadObservedGeneration="4")
    assert rollout_observed(caught_up)


def test_progress_maps_failure_and_waiting_onto_kube_nudges_terms() -> None:
    degraded = progress_of(
        "Rollout.argoproj.io", rollout(phase="Degraded", current="n", stable="o")
    )
    assert degraded is not None and degraded.deadline_exceeded and not degraded.done
    paused = progress_of("Rollout.argoproj.io", rollout(phase="Paused", current="n", stable="o"))
    assert paused is not None and not paused.deadline_exceeded and not paused.done
    assert paused.timed_by_controller


def rolled(obj: dict[str, Any], at: float) -> Any:
    obj["metadata"]["annotations"][ROLLED_AT] = str(at)
    view = project_workload(
        obj, ("spec", "template"), WorkloadDefaults(), kind="Rollout.argoproj.io"
    )
    assert view is not None
    return view


def test_tracking_a_rollout_healthy_completes_degraded_fails() -> None:
    healthy = track(rolled(rollout(), T0), T0 + 5)
    assert (healthy.phase, healthy.config_hash) == (Phase.COMPLETE, "v1-new")
    aborted = rolled(rollout(phase="Degraded", abort=True, message="RolloutAborted: x",
                             current="n", stable="o"), T0)  # fmt: skip
    failed = track(aborted, T0 + 5)
    assert (failed.phase, failed.detail) == (Phase.FAILED, "aborted: RolloutAborted: x")


def test_a_paused_rollout_is_rolling_with_no_deadline_of_kube_nudges() -> None:
    # Waiting for promotion for an hour is not a failure: Argo's own deadline leaves pauses
    # out and Argo says Degraded when it is exceeded.
    paused = rolled(rollout(phase="Paused", current="n", stable="o",
                            pauseConditions=[{"reason": "CanaryPauseStep"}]), T0)  # fmt: skip
    tracking = track(paused, T0 + 3600)
    assert tracking.phase is Phase.ROLLING and tracking.deadline_at is None
    assert tracking.detail == "paused at a canary step, waiting for promotion"


def test_kube_nudges_own_progress_deadline_annotation_still_applies_to_a_rollout() -> None:
    obj = rollout(phase="Progressing", current="n", stable="o",
                  annotations={"kube-nudge.io/progress-deadline": "5m"})  # fmt: skip
    tracking = track(rolled(obj, T0), T0 + 301)
    assert (tracking.phase, tracking.deadline_at) == (Phase.FAILED, T0 + 300)


def test_a_rollout_with_workload_ref_is_held_naming_the_deployment_to_opt_in() -> None:
    obj = rollout()
    del obj["spec"]["template"]
    obj["spec"]["workloadRef"] = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    view = project_workload(
        obj, ("spec", "template"), WorkloadDefaults(), kind="Rollout.argoproj.io"
    )
    assert view is not None and view.template_elsewhere == "Deployment/web"
    hold = decide(view, assess(view, lambda ref: None, b"k"), WorkloadMemory(), T0)
    assert isinstance(hold, Hold) and hold.event_reason == "NoPodTemplate"
    assert hold.message == (
        "no pod template at spec.template: it runs the template of Deployment/web "
        "(spec.workloadRef); opt in Deployment/web instead (kube-nudge.io/enabled), whose "
        "template kube-nudge annotates and Argo Rollouts rolls out"
    )


def test_argo_rollouts_flag_adds_the_kind_for_discovery_and_refuses_it_twice() -> None:
    config = RUN.config(build_parser().parse_args(["run", "--argo-rollouts"]))
    [spec] = config.custom_workloads
    assert (spec.group, spec.version, spec.plural, spec.kind) == (
        "argoproj.io", "v1alpha1", "rollouts", None,  # None: its Kind from discovery
    )  # fmt: skip
    assert spec.template_path == ("spec", "template") and spec.flag == "--argo-rollouts"
    twice = ["run", "--argo-rollouts", "--workload=argoproj.io/v1alpha1/rollouts=spec.template"]
    with pytest.raises(ValueError, match=r"--argo-rollouts already manages rollouts\.argoproj\.io"):
        RUN.config(build_parser().parse_args(twice))
