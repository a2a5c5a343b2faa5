"""Following rollouts and the release gates (`model.progress`, `model.tracking`,
`model.gates`): pure functions of the workload object and an injected time."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kube_nudge.model import CONFIG_HASH, ROLLED_AT, WorkloadView, parse_workload, project_workload
from kube_nudge.model.annotations import (
    APPROVED_AT,
    FAILED,
    RELEASED_AT,
)
from kube_nudge.model.gates import TURN_RETRY, WINDOW_RECHECK, Sibling, display_workload, gate
from kube_nudge.model.progress import DEFAULT_PROGRESS_DEADLINE, progress_of, rollout_complete
from kube_nudge.model.records import format_failed, parse_failed
from kube_nudge.model.tracking import Phase, Tracking, rollout_news, track
from kube_nudge.strategies.registry import product_defaults

T0 = 1_700_000_000.0
PATH = ("spec", "template")


def deployment(
    *,
    annotations: dict[str, str] | None = None,
    template_hash: str | None = "v1-new",
    generation: int = 2,
    observed: int = 2,
    replicas: int = 4,
    updated: int = 4,
    total: int | None = None,
    available: int = 4,
    progressing: str | None = "NewReplicaSetAvailable",
    deadline_seconds: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": {CONFIG_HASH: template_hash} if template_hash else {}},
            "spec": {"containers": [{"name": "app", "image": "x"}]},
        },
    }
    if deadline_seconds is not None:
        spec["progressDeadlineSeconds"] = deadline_seconds
    status: dict[str, Any] = {
        "observedGeneration": observed,
        "replicas": updated if total is None else total,
        "updatedReplicas": updated,
        "availableReplicas": available,
    }
    if progressing:
        status["conditions"] = [{"type": "Progressing", "reason": progressing}]
    return {
        "metadata": {
            "namespace": "shop",
            "uid": "u1",
            "generation": generation,
            "annotations": {"kube-nudge.io/enabled": "true", **(annotations or {})},
        },
        "spec": spec,
        "status": status,
    }


def view(obj: dict[str, Any]) -> WorkloadView:
    projected = project_workload(obj, PATH, parse_defaults(), kind="Deployment.apps")
    assert projected is not None
    return projected


def parse_defaults() -> Any:
    from kube_nudge.model import WorkloadDefaults

    return WorkloadDefaults()


# -- progress -------------------------------------------------------------------------------


def test_a_deployment_is_done_when_every_replica_is_updated_and_available() -> None:
    progress = progress_of("Deployment.apps", deployment(progressing="ReplicaSetUpdated"))
    assert progress is not None and progress.done and not progress.deadline_exceeded
    assert progress.detail == "4 of 4 updated, 4 available"


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"updated": 3, "total": 3, "available": 3}, "3 of 4 updated, 3 available"),
        ({"updated": 4, "total": 5}, "4 of 4 updated, 4 available, 1 old pending termination"),
        ({"available": 3}, "4 of 4 updated, 3 available"),
    ],
)
def test_a_deployment_part_way_is_not_done(changes: dict[str, Any], detail: str) -> None:
    progress = progress_of(
        "Deployment.apps", deployment(progressing="ReplicaSetUpdated", **changes)
    )
    assert progress is not None and not progress.done
    assert progress.detail == detail


def test_a_status_about_an_earlier_generation_says_nothing_about_this_rollout() -> None:
    progress = progress_of(
        "Deployment.apps", deployment(generation=3, observed=2, deadline_seconds=60)
    )
    assert progress is not None and not progress.done and not progress.deadline_exceeded
    assert progress.own_deadline == 60.0


def test_progress_deadline_exceeded_is_a_failure_and_new_replicaset_available_sticks() -> None:
    failed = progress_of("Deployment.apps", deployment(progressing="ProgressDeadlineExceeded"))
    assert failed is not None and failed.deadline_exceeded and not failed.done
    # A pod lost after the rollout finished does not make that rollout unfinished.
    later = progress_of("Deployment.apps", deployment(available=2))
    assert later is not None and later.done


def test_statefulsets_and_daemonsets_follow_revisions_and_counts() -> None:
    sts: dict[str, Any] = {
        "metadata": {"generation": 1},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2,
                   "currentRevision": "a", "updateRevision": "b"},
    }  # fmt: skip
    assert rollout_complete("StatefulSet.apps", sts) is False
    sts["status"]["currentRevision"] = "b"
    assert rollout_complete("StatefulSet.apps", sts) is True
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    assert rollout_complete("StatefulSet.apps", sts) is None  # nothing to follow
    ds: dict[str, Any] = {
        "metadata": {"generation": 1},
        "spec": {},
        "status": {"observedGeneration": 1, "desiredNumberScheduled": 3,
                   "updatedNumberScheduled": 3, "numberAvailable": 2},
    }  # fmt: skip
    assert rollout_complete("DaemonSet.apps", ds) is False
    ds["status"]["numberAvailable"] = 3
    assert rollout_complete("DaemonSet.apps", ds) is True
    assert progress_of("CronJob.batch", {"spec": {}}) is None


# -- tracking -------------------------------------------------------------------------------


def rolled(**changes: Any) -> dict[str, Any]:
    """A Deployment kube-nudge rolled at T0 to v1-new, part way unless changed."""
    annotations = {ROLLED_AT: f"{T0:.3f}", **changes.pop("annotations", {})}
    changes.setdefault("progressing", "ReplicaSetUpdated")
    changes.setdefault("updated", 2)
    return deployment(annotations=annotations, **changes)


def test_a_rollout_in_progress_is_rolling_until_its_deadline_then_failed() -> None:
    obj = rolled(deadline_seconds=120)
    assert track(view(obj), T0 + 119) == Tracking(
        Phase.ROLLING, "v1-new", T0, T0 + 120, "2 of 4 updated, 4 available"
    )
    assert track(view(obj), T0 + 120).phase is Phase.FAILED
    obj["metadata"]["annotations"]["kube-nudge.io/progress-deadline"] = "30s"  # annotation wins
    assert track(view(obj), T0 + 30).phase is Phase.FAILED
    assert track(view(rolled()), T0 + DEFAULT_PROGRESS_DEADLINE - 1).phase is Phase.ROLLING


def test_complete_failed_recorded_and_idle() -> None:
    assert track(view(rolled(updated=4, progressing=None)), T0 + 5).phase is Phase.COMPLETE
    assert track(view(rolled(progressing="ProgressDeadlineExceeded")), T0 + 1).phase is (
        Phase.FAILED
    )
    recorded = track(view(rolled(annotations={FAILED: format_failed("v1-new", T0 + 9)})), T0)
    assert recorded.phase is Phase.FAILED and recorded.recorded and recorded.failed_at == T0 + 9
    # A failure of an earlier hash is history: this rollout is followed afresh.
    older = view(rolled(annotations={FAILED: format_failed("v1-old", T0 - 50)}))
    assert track(older, T0 + 1).phase is Phase.ROLLING
    assert track(view(deployment()), T0).phase is Phase.IDLE  # kube-nudge never rolled it


def test_the_failed_annotation_round_trips_and_garbage_is_forgotten() -> None:
    assert parse_failed(format_failed("v1-abc", 1700000000.25)) == ("v1-abc", 1700000000.25)
    for garbage in (None, "", "v1-abc", "@12", "v1@nan-ish", 42):
        assert parse_failed(garbage) is None


# -- annotations ----------------------------------------------------------------------------


def test_release_annotations_parse_and_bad_values_name_the_fix() -> None:
    settings, errors = parse_workload(
        {"kube-nudge.io/enabled": "true", "kube-nudge.io/rollout-order": "2",
         "kube-nudge.io/progress-deadline": "90s", "kube-nudge.io/approval": "required",
         "kube-nudge.io/strategy": "rollout"},
        "shop",
    )  # fmt: skip
    assert errors == []
    assert settings.rollout_order == 2 and settings.progress_deadline == 90.0
    assert settings.approval_required and not settings.rollback_on_failure
    settings, errors = parse_workload(
        {"kube-nudge.io/rollout-order": "first", "kube-nudge.io/progress-deadline": "0s",
         "kube-nudge.io/approval": "yes", "kube-nudge.io/on-failure": "rollback"},
        "shop", product_defaults(),
    )  # fmt: skip
    assert errors == [
        'kube-nudge.io/rollout-order must be a whole number from 0 to 1000000 such as "1" '
        '(lower orders roll first), got "first"',
        'kube-nudge.io/progress-deadline must be a duration between 1s and 24h such as "10m", '
        'got "0s"',
        'kube-nudge.io/approval must be "required" or "none", got "yes"',
        'kube-nudge.io/on-failure "rollback" needs kube-nudge.io/strategy: snapshot (with '
        "'rollout' the earlier config is gone once the source is edited); holding on failure "
        "instead",
    ]
    assert settings.rollout_order is None and not settings.rollback_on_failure


# -- gates ----------------------------------------------------------------------------------


def sibling(
    name: str, *, order: int | None = None, phase: Phase = Phase.COMPLETE,
    pending: bool = False, released_at: float = 0.0, failed_at: float | None = T0,
) -> Sibling:  # fmt: skip
    tracking = Tracking(phase, "v1-x", T0 - 10, T0 + 100, "1 of 2 updated", failed_at=failed_at)
    return Sibling(name, order, tracking, pending, released_at)


def ordered(order: int, **annotations: str) -> WorkloadView:
    return view(deployment(annotations={"kube-nudge.io/rollout-order": str(order), **annotations}))


def test_lower_orders_roll_first() -> None:
    me = ordered(2)
    assert gate(me, now=T0, changed_at=T0, siblings=[sibling("a", order=1)]) is None
    for waiting in (
        sibling("a", order=1, pending=True),
        sibling("a", order=1, phase=Phase.ROLLING),
    ):
        hold = gate(
            me, now=T0, changed_at=T0, siblings=[waiting, sibling("b", order=3, pending=True)]
        )
        assert hold is not None and hold.reason == "order" and hold.retry_after is None
        assert "waiting for a (a lower kube-nudge.io/rollout-order)" in hold.message
    # Same order, or no order: nobody waits.
    assert gate(me, now=T0, changed_at=T0, siblings=[sibling("a", order=2, pending=True)]) is None
    unordered = view(deployment())
    assert gate(unordered, now=T0, changed_at=T0,
                siblings=[sibling("a", order=1, pending=True)]) is None  # fmt: skip


def test_a_failed_sibling_stops_the_line_until_released_or_changed_again() -> None:
    me = ordered(2)
    failed = sibling("Deployment shop/canary", order=1, phase=Phase.FAILED)
    hold = gate(me, now=T0 + 5, changed_at=T0, siblings=[failed], workload_name="-n shop x/y")
    assert hold is not None and hold.reason == "line-stopped"
    assert hold.event_reason == "LineStopped"
    assert "the rollout of Deployment shop/canary to the same change failed" in hold.message
    assert "kube-nudge release -n shop x/y" in hold.message
    # Unordered workloads are held too: the line is every consumer of the change.
    assert gate(view(deployment()), now=T0, changed_at=T0, siblings=[failed]) is not None
    # Released on the failed workload, or on this one, after the failure: go.
    assert gate(me, now=T0, changed_at=T0, siblings=[sibling(
        "c", order=1, phase=Phase.FAILED, released_at=T0 + 1)]) is None  # fmt: skip
    released_here = ordered(2, **{RELEASED_AT: f"{T0 + 1:.3f}"})
    assert gate(released_here, now=T0, changed_at=T0, siblings=[failed]) is None
    # The source changed again: the failed one has a new change pending, the line restarts
    # (and this one waits for the lower order's new rollout, as usual).
    again = gate(me, now=T0, changed_at=T0, siblings=[sibling(
        "c", order=1, phase=Phase.FAILED, pending=True)])  # fmt: skip
    assert again is not None and again.reason == "order"


def test_approval_counts_for_changes_made_before_it_or_in_its_second() -> None:
    me = view(deployment(annotations={"kube-nudge.io/approval": "required"}))
    name = display_workload("Deployment", "shop", "web")
    assert name == "-n shop deployment/web"  # as the CLI takes it
    hold = gate(me, now=T0 + 10, changed_at=T0, workload_name=name)
    assert hold is not None and hold.reason == "approval" and hold.retry_after is None
    assert "kube-nudge approve -n shop deployment/web" in hold.message
    approved = view(deployment(annotations={"kube-nudge.io/approval": "required",
                                            APPROVED_AT: f"{T0 + 1:.3f}"}))  # fmt: skip
    assert gate(approved, now=T0 + 10, changed_at=T0) is None
    assert gate(approved, now=T0 + 10, changed_at=T0 + 1) is None  # the same (whole) second
    assert gate(approved, now=T0 + 10, changed_at=T0 + 2) is not None  # a later change


def test_a_turn_is_waited_for_with_a_retry() -> None:
    me = view(deployment())
    hold = gate(me, now=T0, changed_at=T0, rolling_elsewhere=2, max_concurrent=2)
    assert hold is not None and hold.reason == "turn" and hold.retry_after == TURN_RETRY
    assert hold.message == (
        "held: 2 rollouts in progress, at most 2 at once (--max-concurrent-rollouts)"
    )
    assert gate(me, now=T0, changed_at=T0, rolling_elsewhere=1, max_concurrent=2) is None
    assert gate(me, now=T0, changed_at=T0, rolling_elsewhere=50) is None  # no limit set


class ClosedUntil:
    """A window closed until ``opens``."""

    def __init__(self, opens: float) -> None:
        self.opens = opens

    def is_open(self, now: float) -> bool:
        return now >= self.opens

    def next_open(self, now: float) -> float:
        return max(now, self.opens)

    def describe(self) -> str:
        return "test window"

    def describe_time(self, moment: float) -> str:
        return f"t+{moment - T0:g}"


def test_a_closed_window_holds_until_it_opens() -> None:
    me = view(deployment())
    hold = gate(me, now=T0, changed_at=T0, window=ClosedUntil(T0 + 30))
    assert hold is not None and hold.reason == "window" and hold.retry_after == 30.0
    assert (hold.until, hold.message) == (
        T0 + 30,
        "held until the rollout window opens at t+30 (test window; kube-nudge.io/rollout-window)",
    )
    assert gate(me, now=T0 + 30, changed_at=T0, window=ClosedUntil(T0 + 30)) is None


def test_a_window_days_away_shows_its_real_opening_and_is_rechecked_daily() -> None:
    """The time shown is the real next opening however far; only the next look is capped."""
    me = view(deployment())
    three_days = T0 + 3 * 86400
    hold = gate(me, now=T0, changed_at=T0, window=ClosedUntil(three_days))
    assert hold is not None and hold.until == three_days
    assert "opens at t+259200 " in hold.message
    assert hold.retry_after == WINDOW_RECHECK == 86400


def test_a_window_that_never_opens_shows_no_time_and_is_rechecked_daily() -> None:
    me = view(deployment())
    hold = gate(me, now=T0, changed_at=T0, window=ClosedUntil(math.inf))
    assert hold is not None and hold.until is None and hold.retry_after == WINDOW_RECHECK
    assert hold.message.startswith("held: the rollout window does not open within a year")


def test_a_status_not_yet_observed_neither_fails_nor_reopens_a_finished_rollout() -> None:
    # An annotation write moves a Deployment's generation: its status lags for a moment.
    long_ago = rolled(generation=3, observed=2, deadline_seconds=60)
    later = T0 + 3600
    unobserved = track(view(long_ago), later)
    assert unobserved.phase is Phase.ROLLING  # not judged (and never failed) until observed
    assert track(view(long_ago), later, Phase.COMPLETE).phase is Phase.COMPLETE
    progress = view(long_ago).progress
    assert progress is not None and not progress.observed
    observed_stuck = rolled(generation=3, observed=3, deadline_seconds=60)
    assert track(view(observed_stuck), later, Phase.COMPLETE).phase is Phase.FAILED


def test_a_rollout_has_news_when_it_fails_or_first_completes_after_rolling() -> None:
    """Every phase before, and now: FAILED is news for as long as it stands, COMPLETE only
    after ROLLING, nothing else is (the reconciler skips the follower without news)."""
    before_phases: list[Phase | None] = [None, *Phase]
    news = {
        (before, now): rollout_news(before, Tracking(now, recorded=recorded))
        for before in before_phases
        for now in Phase
        for recorded in (False, True)
    }
    assert {key for key, found in news.items() if found is Phase.FAILED} == {
        (before, Phase.FAILED) for before in before_phases
    }
    assert {key for key, found in news.items() if found is Phase.COMPLETE} == {
        (Phase.ROLLING, Phase.COMPLETE)
    }
    assert set(news.values()) == {None, Phase.FAILED, Phase.COMPLETE}
