"""The pod-selector replacement decision: examples, and a simulated cluster run against it
(hypothesis) that never loses more pods at once than the budget allows and always ends."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_nudge.model.replacement import (
    REPLACEMENT_WAIT,
    Floor,
    PodRecord,
    Replacement,
    plan_replacement,
    stale,
)
from tests.unit.fakes import FakeClock

CHANGED = 1_000.0
LABELS = {"app": "web"}
BUDGET = {"matchLabels": {"app": "web"}}


def pod(name: str, started: float | None = 900.0, **changes: object) -> PodRecord:
    return replace(PodRecord(name, labels=LABELS, started=started, ready=True), **changes)  # type: ignore[arg-type]


def names(plan: Replacement) -> list[str]:
    return [p.name for p in plan.evict]


def test_a_pod_is_stale_only_when_it_started_in_an_earlier_second() -> None:
    assert stale(pod("a", 999.0), CHANGED)
    assert not stale(pod("a", CHANGED), CHANGED)  # the same whole second counts as fresh
    assert not stale(pod("a", 1_001.0), CHANGED)
    assert not stale(pod("a", None), CHANGED)  # not started: it will read the new data
    assert not stale(pod("a"), None)  # when the data changed is unknown
    assert not stale(pod("a", terminating=True), CHANGED)
    assert not stale(pod("a", finished=True), CHANGED)


def test_nothing_stale_is_done_even_with_pods_not_ready() -> None:
    pods = [pod("a", 1_000.0), pod("b", 1_005.0, ready=False), pod("c", None, ready=False)]
    plan = plan_replacement(pods, CHANGED, [], None, 2_000.0)
    assert plan.done and plan == Replacement(live=3)
    assert plan_replacement([pod("a")], None, [], None, 2_000.0).done


def test_without_a_budget_only_the_oldest_stale_pod_goes() -> None:
    pods = [pod("b", 950.0), pod("a", 900.0), pod("c", 950.0), pod("fresh", 1_000.0)]
    plan = plan_replacement(pods, CHANGED, [], None, 2_000.0)
    assert (names(plan), plan.waiting, plan.live) == (["a"], "", 4)
    other = {"matchLabels": {"app": "api"}}  # a budget that covers other pods
    assert names(plan_replacement(pods, CHANGED, [other], None, 2_000.0)) == ["a"]


def test_with_a_budget_every_stale_pod_is_offered_oldest_first() -> None:
    pods = [pod("c", 950.0), pod("a", 900.0), pod("b", 950.0), pod("fresh", 1_000.0)]
    plan = plan_replacement(pods, CHANGED, [None, BUDGET], None, 2_000.0)
    assert names(plan) == ["a", "b", "c"]  # the caller stops at the first 429


def test_a_pod_no_budget_covers_means_one_at_a_time() -> None:
    pods = [pod("a", 900.0), pod("b", 950.0, labels={"app": "web", "canary": "1"})]
    budget = {"matchLabels": {"app": "web"},
              "matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]}  # fmt: skip
    assert names(plan_replacement(pods, CHANGED, [budget], None, 2_000.0)) == ["a"]


def test_any_pod_not_ready_or_terminating_means_wait() -> None:
    not_ready = [pod("a"), pod("b", 1_001.0, ready=False)]
    plan = plan_replacement(not_ready, CHANGED, [BUDGET], None, 2_000.0)
    assert (plan.evict, plan.waiting, plan.done) == ((), "pods not Ready: b", False)
    going = [pod("a"), pod("b", terminating=True, ready=False)]
    assert plan_replacement(going, CHANGED, [BUDGET], None, 2_000.0).waiting == (
        "pods terminating: b"
    )
    many = [pod("a"), *(pod(f"p{n}", None, ready=False) for n in range(7))]
    assert plan_replacement(many, CHANGED, [], None, 2_000.0).waiting == (
        "pods not Ready: p0, p1, p2, p3, p4 and 2 more"
    )


def test_finished_pods_neither_block_nor_go() -> None:
    pods = [pod("a"), pod("job", ready=False, finished=True, owned=True)]
    assert names(plan_replacement(pods, CHANGED, [], None, 2_000.0)) == ["a"]


def test_pods_without_a_controller_are_reported_never_evicted() -> None:
    pods = [
        pod("bare", 800.0, owned=False),
        pod("a", 900.0),
        pod("fresh-bare", 1_000.0, owned=False),
    ]
    plan = plan_replacement(pods, CHANGED, [BUDGET], None, 2_000.0)
    assert (names(plan), plan.unowned) == (["a"], ("bare",))
    # also while waiting, and when nothing else is left
    waiting = plan_replacement([*pods, pod("new", 1_001.0, ready=False)], CHANGED, [], None, 0.0)
    assert (waiting.waiting, waiting.unowned) == ("pods not Ready: new", ("bare",))
    alone = plan_replacement([pods[0]], CHANGED, [BUDGET], None, 2_000.0)
    assert alone.done and alone.unowned == ("bare",)


def test_the_floor_waits_for_replacements_to_be_created_for_a_while() -> None:
    clock = FakeClock(2_000.0)
    floor = Floor(pods=3, since=clock.now())
    pods = [pod("b", 950.0), pod("c", 950.0)]  # "a" is gone, its replacement not there yet
    plan = plan_replacement(pods, CHANGED, [], floor, clock.now())
    assert plan.waiting == "replacements not created yet (2 of 3 pods)"
    clock.advance(REPLACEMENT_WAIT - 0.5)
    assert plan_replacement(pods, CHANGED, [], floor, clock.now()).waiting
    clock.advance(0.5)  # scaled down, presumably: the lower count is the new normal
    assert names(plan_replacement(pods, CHANGED, [], floor, clock.now())) == ["b"]
    back = [*pods, pod("a2", 2_001.0)]
    assert names(plan_replacement(back, CHANGED, [], Floor(3, 2_000.0), 2_002.0)) == ["b"]


# --- a simulated cluster ----------------------------------------------------------------


@dataclass
class Cluster:
    """Just enough of a cluster: a controller that replaces evicted pods (sometimes late),
    pods that become Ready a step after they are created, and a budget the Eviction API
    enforces."""

    pods: list[PodRecord]
    desired: int
    max_unavailable: int | None  # None: no PodDisruptionBudget
    owed: int = 0
    serial: int = 0
    worst: int = 0
    evicted: list[str] = field(default_factory=list)

    def unavailable(self) -> int:
        serving = [p for p in self.pods if p.owned and p.ready and not p.terminating]
        return self.desired - len(serving)

    def observe(self) -> None:
        self.worst = max(self.worst, self.unavailable())

    def evict(self, target: PodRecord) -> bool:
        if self.max_unavailable is not None and self.unavailable() >= self.max_unavailable:
            return False  # 429
        self.pods = [replace(p, terminating=True) if p is target else p for p in self.pods]
        self.evicted.append(target.name)
        self.observe()
        return True

    def progress(self, now: float, late: bool) -> None:
        kept = []
        for p in self.pods:
            if p.terminating and p.owned:
                self.owed += 1  # gone; its controller owes a replacement
            elif not p.ready:
                kept.append(replace(p, ready=True))
            else:
                kept.append(p)
        self.pods = kept
        self.observe()
        if not late:
            for _ in range(self.owed):
                self.serial += 1
                self.pods.append(PodRecord(f"new-{self.serial}", labels=LABELS, started=now))
            self.owed = 0
        self.observe()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    starts=st.lists(st.integers(min_value=990, max_value=1_000), min_size=1, max_size=8),
    bare=st.integers(min_value=0, max_value=2),
    budget=st.one_of(st.none(), st.integers(min_value=1, max_value=3)),
    lateness=st.lists(st.booleans(), max_size=12),
)
def test_a_replacement_keeps_the_budget_and_ends_with_every_owned_pod_fresh(
    starts: list[int], bare: int, budget: int | None, lateness: list[bool]
) -> None:
    pods = [PodRecord(f"old-{n}", labels=LABELS, started=float(s), ready=True)
            for n, s in enumerate(starts)]  # fmt: skip
    pods += [PodRecord(f"bare-{n}", labels=LABELS, started=900.0, ready=True, owned=False)
             for n in range(bare)]  # fmt: skip
    cluster = Cluster(list(pods), desired=len(starts), max_unavailable=budget)
    budgets = [BUDGET] if budget is not None else []
    clock = FakeClock(CHANGED + 1)
    floor: Floor | None = None
    late = iter(lateness)
    for _ in range(4 * len(starts) + len(lateness) + 5):
        plan = plan_replacement(cluster.pods, CHANGED, budgets, floor, clock.now())
        assert plan.unowned == tuple(f"bare-{n}" for n in range(bare))
        if plan.done:
            break
        if plan.evict:
            floor = Floor(plan.live, clock.now())
            for target in plan.evict:
                if not cluster.evict(target):
                    break
        clock.advance(2.0)
        cluster.progress(clock.now(), late=next(late, False))
    else:
        raise AssertionError(f"not done: {cluster.pods}")
    assert cluster.worst <= (budget or 1)
    stale_starts = [s for s in starts if s < CHANGED]
    assert sorted(cluster.evicted) == sorted(
        f"old-{n}" for n, s in enumerate(starts) if s < CHANGED
    )
    assert len(cluster.evicted) == len(stale_starts)
    assert not any(stale(p, CHANGED) for p in cluster.pods if p.owned)
    assert [p.name for p in cluster.pods if not p.owned] == [f"bare-{n}" for n in range(bare)]
