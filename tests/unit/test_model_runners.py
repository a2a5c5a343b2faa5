"""A workload whose pod template another runs (an Argo Rollout with ``workloadRef``) is
followed by that runner's status (`model.runners`): pure, on an injected time."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model import CONFIG_HASH, ROLLED_AT, WorkloadDefaults, project_workload
from kube_nudge.model.argorollout import WORKLOAD_GENERATION
from kube_nudge.model.progress import progress_of
from kube_nudge.model.runners import project_runner, run_by, runs_elsewhere, template_elsewhere
from kube_nudge.model.tracking import Phase, track

T0 = 1_700_000_000.0
REF = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def runner_obj(seen: str | None = "5", **status: Any) -> dict[str, Any]:
    """Rollout ``web-ro`` running Deployment ``web``'s template, as Argo leaves it."""
    annotations = {WORKLOAD_GENERATION: seen} if seen is not None else {}
    return {
        "metadata": {"name": "web-ro", "namespace": "shop", "generation": 1,
                     "annotations": annotations},
        "spec": {"replicas": 2, "workloadRef": REF},
        "status": {"observedGeneration": "1", "workloadObservedGeneration": seen, **status},
    }  # fmt: skip


HEALTHY: dict[str, Any] = {"phase": "Healthy", "currentPodHash": "9a1b", "stableRS": "9a1b",
                           "updatedReplicas": 2, "availableReplicas": 2}  # fmt: skip
ABORTED: dict[str, Any] = {
    "phase": "Degraded", "abort": True, "currentPodHash": "9a1b", "stableRS": "5f7c",
    "message": "RolloutAborted: Rollout aborted update to revision 2",
}  # fmt: skip


def deployment(generation: int) -> dict[str, Any]:
    """Deployment ``web``, scaled to zero, that kube-nudge rolled at T0 (its own status: done)."""
    return {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u2", "generation": generation,
                     "annotations": {"kube-nudge.io/enabled": "true", ROLLED_AT: str(T0)}},
        "spec": {"replicas": 0, "template": {
            "metadata": {"annotations": {CONFIG_HASH: "v1-new"}},
            "spec": {"containers": [{"name": "app", "image": "x"}]}}},
        "status": {"observedGeneration": generation},
    }  # fmt: skip


def test_only_a_rollout_with_a_workload_ref_runs_another_template() -> None:
    assert runs_elsewhere("Rollout.argoproj.io") and not runs_elsewhere("Deployment.apps")
    runner = project_runner("Rollout.argoproj.io", runner_obj(**HEALTHY))
    assert runner is not None
    assert (runner.name, runner.runs, runner.seen_generation) == ("web-ro", "Deployment/web", 5)
    own = runner_obj(**HEALTHY)
    del own["spec"]["workloadRef"]
    assert project_runner("Rollout.argoproj.io", own) is None
    assert project_runner("Deployment.apps", deployment(5)) is None
    assert template_elsewhere("Deployment.apps", runner_obj()) is None


def test_the_runners_status_is_judged_only_once_it_saw_the_templates_generation() -> None:
    runner = project_runner("Rollout.argoproj.io", runner_obj(seen="5", **HEALTHY))
    assert runner is not None
    seen = run_by(runner, 5)
    assert (seen.done, seen.observed) == (True, True)
    assert seen.detail == "Rollout web-ro: 2 of 2 updated, 2 available"
    stale = run_by(runner, 6)  # kube-nudge wrote the template; Argo hasn't copied it yet
    assert (stale.done, stale.observed, stale.deadline_exceeded) == (False, False, False)
    assert stale.detail == "waiting for Rollout web-ro to see the change"
    silent = project_runner("Rollout.argoproj.io", runner_obj(seen=None, **HEALTHY))
    assert silent is not None and run_by(silent, 1).observed is False


@given(seen=st.integers(0, 20), generation=st.integers(1, 20))
def test_a_runners_verdict_counts_only_from_the_generation_it_saw(
    seen: int, generation: int
) -> None:
    runner = project_runner("Rollout.argoproj.io", runner_obj(seen=str(seen), **ABORTED))
    assert runner is not None
    progress = run_by(runner, generation)
    assert progress.deadline_exceeded is (seen >= generation)
    assert progress.observed is (seen >= generation)


def test_the_templates_owner_follows_its_runner_to_failed_and_complete() -> None:
    view = project_workload(deployment(6), ("spec", "template"), WorkloadDefaults(),
                            kind="Deployment.apps")  # fmt: skip
    assert view is not None and view.generation == 6
    assert track(view, T0 + 1).phase is Phase.COMPLETE  # its own status: 0 of 0, done
    aborted = project_runner("Rollout.argoproj.io", runner_obj(seen="6", **ABORTED))
    healthy = project_runner("Rollout.argoproj.io", runner_obj(seen="6", **HEALTHY))
    stale = project_runner("Rollout.argoproj.io", runner_obj(seen="5", **HEALTHY))
    assert aborted is not None and healthy is not None and stale is not None
    failed = track(replace(view, progress=run_by(aborted, view.generation)), T0 + 1)
    assert failed.phase is Phase.FAILED
    assert "aborted: RolloutAborted" in failed.detail
    done = track(replace(view, progress=run_by(healthy, view.generation)), T0 + 1)
    assert done.phase is Phase.COMPLETE
    waiting = track(replace(view, progress=run_by(stale, view.generation)), T0 + 10_000)
    assert waiting.phase is Phase.ROLLING  # Argo's deadline, not ours; judged once seen


def test_a_kind_of_another_group_sharing_the_kind_name_is_not_read_as_argos() -> None:
    obj = runner_obj(**ABORTED)
    assert project_runner("Rollout.example.com", obj) is None
    assert not runs_elsewhere("Rollout.example.com")
    assert progress_of("Rollout.example.com", obj) is None
    assert progress_of("Rollout.argoproj.io", obj) is not None


def test_a_runner_that_never_saw_the_template_and_failed_has_failed() -> None:
    # Argo refused the reference (InvalidSpec): it copies no generation, and says so.
    refused = runner_obj(seen=None, conditions=[{"type": "InvalidSpec", "status": "True"}])
    runner = project_runner("Rollout.argoproj.io", refused)
    assert runner is not None and runner.owner == "Deployment.apps/web"
    progress = run_by(runner, 3)
    assert (progress.deadline_exceeded, progress.detail) == (True, "Rollout web-ro: invalid spec")
