"""The pure decision (`model.decide`) and the memory it reads, with an injected clock."""

from __future__ import annotations

from types import MappingProxyType

from kube_nudge.model import (
    Adopt,
    Apply,
    Hold,
    Noop,
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadDefaults,
    WorkloadMemory,
    WorkloadView,
    assess,
    decide,
    describe_apply,
    describe_changes,
    describe_versions,
    input_warnings,
    project_source,
    project_workload,
)
from kube_nudge.model.decide import MAX_RECORDED_ROLLOUTS
from kube_nudge.model.hashing import key_id as key_id_of
from kube_nudge_dev import manifests
from tests.unit.fakes import (
    APP,
    CAP,
    KEY,
    NS,
    PATH,
    FakeClock,
    configmap,
    desired,
    sources,
    stored,
    workload,
)


def decide_now(
    view: WorkloadView,
    data: dict[SourceRef, SourceView],
    memory: WorkloadMemory,
    clock: FakeClock,
    *,
    capped: bool = True,
) -> Adopt | Apply | Hold | Noop:
    return decide(view, assess(view, data.get, KEY), memory, clock.now(), capped=capped)


def test_first_sight_adopts_what_runs_now() -> None:
    view, data = workload(), sources(LEVEL="info")
    decision = decide_now(view, data, WorkloadMemory(), FakeClock())
    assert decision == Adopt(desired(view, data))


def test_adoption_happens_even_when_config_is_missing_then_holds() -> None:
    view, clock = workload(), FakeClock()
    memory = WorkloadMemory()
    decision = decide_now(view, {}, memory, clock)
    assert isinstance(decision, Adopt)
    memory = memory.applying("rollout", decision.config_hash)
    assert decide_now(view, {}, memory, clock) == Hold(
        "missing", "ConfigMissing", "not rolling: configmap/app not found"
    )


def test_a_missing_required_key_holds_and_names_only_the_key() -> None:
    data = sources(OTHER="secret-value")
    view = workload(template_hash="v1-old")
    decision = decide_now(view, data, WorkloadMemory(), FakeClock())
    assert decision == Hold(
        "missing", "ConfigMissing", "not rolling: configmap/app has no key 'LEVEL'"
    )
    assert "secret-value" not in repr(decision)


def test_unchanged_hash_is_a_noop() -> None:
    data = sources(LEVEL="info")
    view = workload(template_hash=desired(workload(), data))
    assert decide_now(view, data, WorkloadMemory(), FakeClock()) == Noop()


def test_an_adopted_baseline_counts_as_what_runs() -> None:
    data = sources(LEVEL="info")
    view = workload(baseline=desired(workload(), data))
    assert decide_now(view, data, WorkloadMemory(), FakeClock()) == Noop()


def test_a_change_applies_the_new_hash_and_names_the_changed_keys() -> None:
    before, after = sources(LEVEL="info"), sources(LEVEL="debug")
    view = workload(baseline=desired(workload(), before))
    memory = WorkloadMemory(rolled_with={APP: before[APP].state})
    clock = FakeClock()
    decision = decide_now(view, after, memory, clock)
    assert decision == Apply(
        config_hash=desired(view, after),
        changes={APP: ["LEVEL"]},
        rolled_at=(clock.now(),),
        had_baseline=True,
    )
    assert describe_changes(decision.changes, {}, NS) == "configmap/app keys [LEVEL] changed"


def test_unknown_previous_state_is_said_so() -> None:
    view = workload(template_hash="v1-old")
    decision = decide_now(view, sources(LEVEL="x"), WorkloadMemory(), FakeClock())
    assert isinstance(decision, Apply) and decision.changes is None
    assert describe_changes(None, {}, NS) == "config changed while kube-nudge was not watching"


def test_our_own_write_is_not_repeated_before_its_echo_arrives() -> None:
    data = sources(LEVEL="debug")
    stale = workload(template_hash="v1-old")  # the watch echo hasn't arrived yet
    memory = WorkloadMemory().applying("rollout", desired(stale, data))
    assert decide_now(stale, data, memory, FakeClock()) == Noop()
    # The echo itself is recognised as ours, and the memory then defers to the workload.
    echo = workload(template_hash=desired(stale, data))
    memory, ours = memory.observed(echo)
    assert ours is True
    assert memory.applied is None
    assert memory.observed(echo) == (memory, False)


def test_a_foreign_change_of_the_hash_is_not_taken_for_our_echo() -> None:
    memory = WorkloadMemory().applying("rollout", "v1-ours")
    assert memory.observed(workload(template_hash="v1-someone-else")) == (memory, False)
    assert memory.applied == "v1-ours"


def test_a_new_strategy_starts_from_what_the_workload_records() -> None:
    memory = WorkloadMemory().applying("notify", "v1-announced")
    memory, ours = memory.observed(workload(template_hash="v1-old", strategy="rollout"))
    assert ours is False
    assert memory.applied is None


def rollout_sequence(changes: int, every: float) -> list[Adopt | Apply | Hold | Noop]:
    """`changes` config changes `every` seconds apart, each decided and remembered as
    the reconciler does (the workload records what the last apply wrote)."""
    clock = FakeClock()
    memory = WorkloadMemory()
    view = workload(baseline="v1-start")
    decisions: list[Adopt | Apply | Hold | Noop] = []
    for n in range(changes):
        if n:
            clock.advance(every)
        decision = decide_now(view, sources(LEVEL=str(n)), memory, clock)
        decisions.append(decision)
        if isinstance(decision, Apply):
            memory = memory.applying("rollout", decision.config_hash)
            memory = memory.with_rollout(clock.now(), view)
            view = workload(template_hash=decision.config_hash, rolled_at=decision.rolled_at)
    return decisions


def test_the_flap_cap_holds_exactly_the_fourth_change_in_the_window() -> None:
    decisions = rollout_sequence(4, every=1.0)
    assert [type(d).__name__ for d in decisions] == ["Apply", "Apply", "Apply", "Hold"]
    held = decisions[3]
    assert isinstance(held, Hold)
    assert (held.reason, held.event_reason) == ("flapping", "RolloutsCapped")
    assert held.retry_after == 3.0  # first rollout at t, window 6 s, now t + 3


def test_a_held_workload_repeats_one_message_so_its_event_counts_up() -> None:
    clock = FakeClock()
    recorded = (clock.now() - 2, clock.now() - 1, clock.now())
    view = workload(template_hash="v1-old", rolled_at=recorded)
    first = decide_now(view, sources(LEVEL="x"), WorkloadMemory(), clock)
    clock.advance(2.5)
    second = decide_now(view, sources(LEVEL="y"), WorkloadMemory(), clock)
    assert isinstance(first, Hold) and isinstance(second, Hold)
    assert first.retry_after != second.retry_after
    assert first.message == second.message  # the recorder folds repeats into one Event


def test_the_held_change_rolls_when_the_window_allows() -> None:
    clock = FakeClock()
    memory = WorkloadMemory()
    view = workload(baseline="v1-start")
    for n in range(3):
        decision = decide_now(view, sources(LEVEL=str(n)), memory, clock)
        assert isinstance(decision, Apply)
        memory = memory.applying("rollout", decision.config_hash)
        memory = memory.with_rollout(clock.now(), view)
        view = workload(template_hash=decision.config_hash, rolled_at=decision.rolled_at)
        clock.advance(1.0)
    held = decide_now(view, sources(LEVEL="latest"), memory, clock)
    assert isinstance(held, Hold) and held.retry_after == 3.0
    clock.advance(held.retry_after - 0.001)
    assert isinstance(decide_now(view, sources(LEVEL="latest"), memory, clock), Hold)
    clock.advance(0.001)
    rolled = decide_now(view, sources(LEVEL="latest"), memory, clock)
    assert isinstance(rolled, Apply)
    assert rolled.config_hash == desired(view, sources(LEVEL="latest"))


def test_the_cap_survives_a_restart_through_the_recorded_times() -> None:
    clock = FakeClock()
    recorded = (clock.now() - 2, clock.now() - 1, clock.now())
    view = workload(template_hash="v1-old", rolled_at=recorded)
    decision = decide_now(view, sources(LEVEL="x"), WorkloadMemory(), clock)  # fresh memory
    assert isinstance(decision, Hold) and decision.reason == "flapping"


def test_uncapped_strategies_are_never_held_for_flapping() -> None:
    clock = FakeClock()
    recorded = (clock.now() - 2, clock.now() - 1, clock.now())
    view = workload(template_hash="v1-old", rolled_at=recorded)
    decision = decide_now(view, sources(LEVEL="x"), WorkloadMemory(), clock, capped=False)
    assert isinstance(decision, Apply)


def test_only_the_times_the_cap_needs_are_recorded() -> None:
    clock = FakeClock()
    many = WorkloadDefaults(max_rollouts=50, rollout_window=3600.0)
    recorded = tuple(clock.now() - n for n in range(30, 0, -1))
    view = workload(template_hash="v1-old", rolled_at=recorded, defaults=many)
    decision = decide_now(view, sources(LEVEL="x"), WorkloadMemory(), clock)
    assert isinstance(decision, Apply)
    assert len(decision.rolled_at) == MAX_RECORDED_ROLLOUTS
    assert decision.rolled_at == (*recorded[-(MAX_RECORDED_ROLLOUTS - 1) :], clock.now())


def test_no_pod_template_holds_as_invalid() -> None:
    decision = decide_now(
        workload(template=False), sources(LEVEL="x"), WorkloadMemory(), FakeClock()
    )
    assert decision == Hold("invalid", "NoPodTemplate", "no pod template at spec.template")


def test_ignored_and_unshared_sources_do_not_count() -> None:
    other = SourceRef(SourceKind.CONFIGMAP, "other", "shared")
    annotations = {"kube-nudge.io/enabled": "true", "kube-nudge.io/configmaps": "other/shared"}
    obj = {"metadata": {"namespace": NS, "annotations": annotations},
           "spec": {"template": {"spec": {"containers": []}}}}  # fmt: skip
    view = project_workload(obj, PATH, CAP)
    assert view is not None
    unshared = {other: configmap(a="1")}
    assessment = assess(view, unshared.get, KEY)
    assert assessment.refused == (other,) and not assessment.visible
    # The same refusal when it doesn't exist: a refusal never reveals existence.
    nothing: dict[SourceRef, SourceView] = {}
    assert assess(view, nothing.get, KEY).refused == (other,)
    shared = {other: source_with({"kube-nudge.io/share-with": NS})}
    assert assess(view, shared.get, KEY).visible == MappingProxyType({other: view.consumed[other]})
    ignored = {
        other: source_with({"kube-nudge.io/share-with": "*", "kube-nudge.io/ignore": "true"})
    }
    assert not assess(view, ignored.get, KEY).visible


def test_a_pass_warns_of_annotations_that_do_not_parse_and_of_each_source_refused() -> None:
    """One InvalidAnnotation for all the errors, one SourceNotShared per refused source, in
    that order; nothing for a workload read cleanly."""
    refused = [SourceRef(SourceKind.CONFIGMAP, "other", name) for name in ("a", "b")]
    annotations = {"kube-nudge.io/enabled": "true", "kube-nudge.io/debounce": "soon",
                   "kube-nudge.io/rollout-order": "x",
                   "kube-nudge.io/configmaps": "other/a,other/b"}  # fmt: skip
    obj = {"metadata": {"namespace": NS, "annotations": annotations},
           "spec": {"template": {"spec": {"containers": []}}}}  # fmt: skip
    view = project_workload(obj, PATH, CAP)
    assert view is not None and len(view.errors) == 2
    nothing: dict[SourceRef, SourceView] = {}
    warnings = input_warnings(view, assess(view, nothing.get, KEY))
    assert warnings == [("InvalidAnnotation", "; ".join(view.errors))] + [
        ("SourceNotShared", f"ignoring {ref}: it does not list namespace {NS!r} in "
         "kube-nudge.io/share-with (or does not exist)") for ref in refused
    ]  # fmt: skip
    clean = workload()
    assert input_warnings(clean, assess(clean, sources(LEVEL="info").get, KEY)) == []


def test_assess_looks_each_source_up_once() -> None:
    """Once per source consumed (present or absent), however many of the assessment's
    parts (visibility, states, versions, times) need it; an excluded one, never."""
    absent = SourceRef(SourceKind.CONFIGMAP, NS, "absent")
    excluded = SourceRef(SourceKind.CONFIGMAP, NS, "excluded")
    annotations = {"kube-nudge.io/enabled": "true", "kube-nudge.io/configmaps": "absent,excluded",
                   "kube-nudge.io/exclude": "configmap/excluded"}  # fmt: skip
    obj = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"), annotations=annotations)
    view = project_workload(stored(obj), PATH, CAP)
    assert view is not None and set(view.consumed) == {APP, absent}  # excluded: not consumed
    data = {APP: configmap("2026-01-01T00:00:00Z", LEVEL="info"), excluded: configmap(a="1")}
    asked: list[SourceRef] = []

    def source_of(ref: SourceRef) -> SourceView | None:
        asked.append(ref)
        return data.get(ref)

    assessment = assess(view, source_of, KEY)
    assert sorted(asked) == sorted([APP, absent])
    assert assessment == assess(view, data.get, KEY)
    assert assessment.changed_at is not None and set(assessment.visible) == {APP, absent}


def source_with(annotations: dict[str, str]) -> SourceView:
    return project_source({"metadata": {"annotations": annotations}, "data": {"a": "1"}})


def test_hashes_made_under_another_key_are_rebaselined_not_rolled() -> None:
    data = sources(LEVEL="info")
    lost_key = key_id_of(b"x" * 32)
    view = workload(template_hash="v1-made-with-the-old-key", key_id=lost_key)
    decision = decide_now(view, data, WorkloadMemory(), FakeClock())
    assert decision == Adopt(desired(view, data), new_key=True)
    # Once re-baselined under this key, the baseline is what runs: nothing to do.
    rebaselined = workload(
        template_hash="v1-made-with-the-old-key",
        baseline=desired(view, data),
        key_id=key_id_of(KEY),
    )
    assert decide_now(rebaselined, data, WorkloadMemory(), FakeClock()) == Noop()
    # ... and the next real change rolls it.
    changed = decide_now(rebaselined, sources(LEVEL="debug"), WorkloadMemory(), FakeClock())
    assert isinstance(changed, Apply) and changed.had_baseline


def test_workloads_recorded_before_key_ids_are_not_rebaselined() -> None:
    data = sources(LEVEL="info")
    view = workload(template_hash="v1-old")  # no key id recorded (an older release)
    assert isinstance(decide_now(view, data, WorkloadMemory(), FakeClock()), Apply)


def test_the_key_id_names_the_key_without_revealing_it() -> None:
    assert key_id_of(KEY) == key_id_of(KEY)
    assert key_id_of(KEY) != key_id_of(b"j" * 32)
    assert len(key_id_of(KEY)) == 8 and KEY.hex()[:8] not in key_id_of(KEY)


T0 = 1_795_392_000.0  # 2026-11-23T00:00:00Z


def test_opting_in_stale_pods_rolls_them_once() -> None:
    view = workload()
    data = {APP: configmap(changed="2026-11-23T00:10:00Z", LEVEL="debug")}
    assessment = assess(view, data.get, KEY)
    assert assessment.changed_at == T0 + 600
    started_before = T0 + 300
    decision = decide(view, assessment, WorkloadMemory(), T0 + 900, oldest_pod_start=started_before)
    assert decision == Apply(
        assessment.desired, None, (T0 + 900,), had_baseline=False, stale_pods=True
    )
    assert describe_apply(decision, {}, NS).startswith("opted in with pods that started before")


def test_opting_in_fresh_pods_restarts_nothing() -> None:
    view = workload()
    data = {APP: configmap(changed="2026-11-23T00:10:00Z", LEVEL="debug")}
    assessment = assess(view, data.get, KEY)
    for started in (T0 + 600, T0 + 700):  # the same second counts as seen
        decision = decide(view, assessment, WorkloadMemory(), T0 + 900, oldest_pod_start=started)
        assert decision == Adopt(assessment.desired)
    unknown = decide(view, assessment, WorkloadMemory(), T0 + 900, oldest_pod_start=None)
    assert unknown == Adopt(assessment.desired)


def test_never_roll_opts_out_of_stale_adoption() -> None:
    view = workload(adopt="never-roll")
    data = {APP: configmap(changed="2026-11-23T00:10:00Z", LEVEL="debug")}
    assessment = assess(view, data.get, KEY)
    decision = decide(view, assessment, WorkloadMemory(), T0 + 900, oldest_pod_start=T0)
    assert decision == Adopt(assessment.desired)


def test_stale_pods_with_missing_config_are_adopted_and_held_not_rolled() -> None:
    view = workload()
    data = {APP: configmap(changed="2026-11-23T00:10:00Z", OTHER="x")}  # LEVEL missing
    assessment = assess(view, data.get, KEY)
    decision = decide(view, assessment, WorkloadMemory(), T0 + 900, oldest_pod_start=T0)
    assert decision == Adopt(assessment.desired)


def test_a_release_lets_a_capped_workload_roll_now() -> None:
    clock = FakeClock()
    recorded = (clock.now() - 2, clock.now() - 1, clock.now())
    held = workload(template_hash="v1-old", rolled_at=recorded)
    memory = WorkloadMemory(rollouts=frozenset(recorded))
    assert isinstance(decide_now(held, sources(LEVEL="x"), memory, clock), Hold)
    clock.advance(0.5)
    released = workload(template_hash="v1-old", rolled_at=recorded, released_at=clock.now())
    decision = decide_now(released, sources(LEVEL="x"), memory, clock)
    assert isinstance(decision, Apply)
    assert decision.rolled_at == (clock.now(),)  # counting starts afresh from the release


def test_events_can_name_the_versions_of_the_changed_sources() -> None:
    view = workload(template_hash="v1-old")
    obj = {"metadata": {"name": "app", "namespace": NS, "resourceVersion": "4711"},
           "data": {"LEVEL": "x"}}  # fmt: skip
    data = {APP: project_source(obj)}
    assessment = assess(view, data.get, KEY)
    plan = Apply("v1-new", {APP: ["LEVEL"]}, (T0,), had_baseline=False)
    assert describe_versions(plan, assessment, NS) == "configmap/app@4711"
