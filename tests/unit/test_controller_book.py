"""The rollout book on its own: own echoes, phases, the failed and rolling sets, who waits,
a write forgotten when it fails, and deleted workloads forgotten (no API server)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_nudge.controller.book import WAITING, RolloutBook, WorkloadKey
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import WorkloadMemory, WorkloadView
from kube_nudge.model.progress import Progress
from kube_nudge.model.tracking import Phase
from kube_nudge.runtime.expectations import WriteExpectations
from kube_nudge.runtime.metrics import Metrics
from tests.unit.fakes import NS, FakeClock, workload

DEPLOYMENT = BUILTIN_KINDS[0]
APP: WorkloadKey = (DEPLOYMENT, NS, "app")
OTHER: WorkloadKey = (DEPLOYMENT, NS, "other")


def rolling(config_hash: str = "h1", *, started: float = 1_700_000_000.0) -> WorkloadView:
    """A workload kube-nudge rolled to ``config_hash``, its controller still at it."""
    progress = Progress(done=False, deadline_exceeded=False, detail="1/2", observed=True)
    view = workload(template_hash=config_hash, rolled_at=(started,))
    return dataclasses.replace(view, progress=progress)


def book_over(
    cluster: dict[WorkloadKey, WorkloadView], *, capped: bool = True, count_rolling: bool = True
) -> tuple[RolloutBook, Metrics]:
    metrics = Metrics()
    book = RolloutBook(cluster.get, capped=lambda view: capped, metrics=metrics,
                       clock=FakeClock(), count_rolling=count_rolling)  # fmt: skip
    return book, metrics


def complete(config_hash: str = "h1") -> WorkloadView:
    """A workload kube-nudge rolled to ``config_hash``, its controller done."""
    progress = Progress(done=True, deadline_exceeded=False, detail="2/2", observed=True)
    return dataclasses.replace(rolling(config_hash), progress=progress)


def unobserved(view: WorkloadView) -> WorkloadView:
    """``view`` with a status its controller has not caught up with (it says nothing)."""
    progress = Progress(done=False, deadline_exceeded=False, detail="", observed=False)
    return dataclasses.replace(view, progress=progress)


def followed(book: RolloutBook) -> Phase | None:
    """The phase APP's rollout was last seen in, as a pass reads it (starts its record;
    over an unobserved status, so the read follows nothing itself)."""
    return book.page(APP, unobserved(workload()), capped=True).followed


def counted(metrics: Metrics, state: str) -> float:
    """``kube_nudge_workloads{state}`` as scraped."""
    return metrics.registry.get_sample_value("kube_nudge_workloads", {"state": state}) or 0.0


def test_the_echo_of_our_own_write_is_recognised_once() -> None:
    book, _ = book_over({})
    assert not book.observed(APP, workload(template_hash="h1"))  # nothing written yet
    book.remember(APP)  # as a pass's page starts it
    book.applying(APP, "rollout", "h2")
    assert not book.observed(APP, workload(template_hash="h1"))  # someone else's edit
    assert book.observed(APP, workload(template_hash="h2"))  # ours
    assert not book.observed(APP, workload(template_hash="h2"))  # once


def test_a_write_whose_echo_is_on_its_way_is_rolling_then_the_view_decides() -> None:
    book, _ = book_over({})
    assert book.tracking(APP, workload(template_hash="h1")).phase is Phase.IDLE
    book.remember(APP)  # as a pass's page starts it
    book.applying(APP, "rollout", "h2")
    assert book.tracking(APP, workload(template_hash="h1")).phase is Phase.ROLLING
    assert book.tracking(APP, rolling("h2")).phase is Phase.ROLLING
    uncapped, _ = book_over({}, capped=False)
    assert uncapped.tracking(APP, rolling("h2")).phase is Phase.IDLE  # nothing to follow


def test_a_pass_reads_the_whole_page_of_its_workload_in_one_call() -> None:
    expectations: WriteExpectations[WorkloadKey] = WriteExpectations(FakeClock())
    cluster: dict[WorkloadKey, WorkloadView] = {}
    book = RolloutBook(cluster.get, capped=lambda view: True, metrics=Metrics(),
                       clock=FakeClock(), expectations=expectations)  # fmt: skip
    view = dataclasses.replace(rolling("h1"), resource_version=7)
    first = book.page(APP, view, capped=True)
    assert first.memory == book.memory(APP) == WorkloadMemory()  # started at the first pass
    assert (first.lagging, first.tracking.phase, first.followed) == (None, Phase.ROLLING, None)
    expectations.wrote(APP, {"metadata": {"resourceVersion": "8"}})  # our write, not seen
    second = book.page(APP, view, capped=False)  # the pass's strategy restarts nothing
    assert second.memory == first.memory and second.followed is Phase.ROLLING
    assert second.lagging is not None and second.tracking.phase is Phase.IDLE


def test_a_pass_follows_the_phase_it_sees_unless_it_waits_or_the_status_says_nothing() -> None:
    expectations: WriteExpectations[WorkloadKey] = WriteExpectations(FakeClock())
    cluster: dict[WorkloadKey, WorkloadView] = {}
    book = RolloutBook(cluster.get, capped=lambda view: True, metrics=Metrics(),
                       clock=FakeClock(), expectations=expectations)  # fmt: skip
    book.applying(APP, "rollout", "h1")
    book.page(APP, unobserved(rolling("h1")), capped=True)  # nothing said: not followed
    assert followed(book) is None
    book.page(APP, rolling("h1"), capped=True)
    assert followed(book) is Phase.ROLLING
    expectations.wrote(APP, {"metadata": {"resourceVersion": "9"}})  # our write, not seen
    assert book.page(APP, complete("h1"), capped=True).lagging is not None
    assert followed(book) is Phase.ROLLING  # a pass that waits for its echo follows nothing
    seen = dataclasses.replace(complete("h1"), resource_version=9)
    assert book.page(APP, seen, capped=True).followed is Phase.ROLLING  # what it was before
    assert followed(book) is Phase.COMPLETE


def test_a_failure_is_followed_once_it_is_recorded() -> None:
    """The pass that records a failure may fail or be cancelled: until the record is on the
    workload the rollout stays followed as rolling, so one that then completes is still
    announced."""
    book, _ = book_over({})
    book.applying(APP, "rollout", "h1")
    book.page(APP, rolling("h1"), capped=True)
    exceeded = Progress(done=False, deadline_exceeded=True, detail="1/2", observed=True)
    stuck = dataclasses.replace(rolling("h1"), progress=exceeded)
    page = book.page(APP, stuck, capped=True)
    assert (page.tracking.phase, page.tracking.recorded) == (Phase.FAILED, False)
    assert followed(book) is Phase.ROLLING
    recorded = dataclasses.replace(stuck, failed=("h1", 5.0))
    assert book.page(APP, recorded, capped=True).tracking.recorded
    assert followed(book) is Phase.FAILED


def test_rolling_count_checks_its_superset_against_the_caches() -> None:
    cluster = {APP: rolling(), OTHER: rolling()}
    book, _ = book_over(cluster)
    for key, view in cluster.items():
        book.observed(key, view)
    assert book.rolling_count() == 2
    assert book.rolling_count(exclude=APP) == 1
    cluster[OTHER] = dataclasses.replace(
        cluster[OTHER], progress=Progress(done=True, deadline_exceeded=False, detail="",
                                          observed=True),
    )  # fmt: skip
    assert book.rolling_count() == 1
    del cluster[APP]
    assert book.rolling_count() == 0


def test_views_update_the_rolling_set_only_when_rollouts_are_counted() -> None:
    cluster = {APP: rolling()}
    book, _ = book_over(cluster, count_rolling=False)
    book.observed(APP, cluster[APP])
    assert book.rolling_count() == 0
    book.started(APP, "rollout", "h2", followed=True)  # always counted: this controller's
    assert book.rolling_count() == 1
    assert followed(book) is Phase.ROLLING


def test_who_waits_is_who_was_last_held_for_another_rollout() -> None:
    book, metrics = book_over({})
    book.remember(APP)
    book.remember(OTHER)
    book.set_state(APP, "held-order")
    book.set_state(OTHER, "held-missing")
    assert book.waiting() == [APP]
    book.set_state(APP, "applied")
    assert book.waiting() == []
    assert counted(metrics, "applied") == 1
    assert counted(metrics, "held-order") == 0


def test_a_deleted_workload_is_forgotten_with_its_count() -> None:
    book, metrics = book_over({})
    book.remember(APP)
    book.set_state(APP, "held-turn")
    book.started(APP, "rollout", "h1", followed=True)
    book.observed(APP, dataclasses.replace(rolling("h1"), failed=("h1", 5.0)))
    assert not book.observed(APP, None)
    assert book.memory(APP) is None
    assert book.waiting() == []
    assert counted(metrics, "held-turn") == 0
    book.set_state(APP, "applied")  # a pass finishing after the deletion counts nothing
    assert counted(metrics, "applied") == 0
    assert followed(book) is None


@pytest.mark.parametrize("error", [RuntimeError("API down"), asyncio.CancelledError()])
def test_a_write_that_raises_is_forgotten(error: BaseException) -> None:
    book, _ = book_over({})
    book.remember(APP)  # as a pass's page starts it
    book.applying(APP, "rollout", "h1")
    book.page(APP, complete("h1"), capped=True)
    with pytest.raises(type(error)), book.writing(APP):
        book.started(APP, "notify", "h2", followed=True)
        raise error
    memory = book.remember(APP)
    assert (memory.applied, memory.strategy) == ("h1", "rollout")
    assert followed(book) is Phase.COMPLETE
    with book.writing(APP):  # one that returns is kept
        book.started(APP, "rollout", "h2", followed=True)
    assert book.remember(APP).applied == "h2" and followed(book) is Phase.ROLLING


def test_a_record_is_a_value_only_the_book_replaces() -> None:
    """A record handed out never changes under its reader: the book replaces it."""
    book, _ = book_over({})
    read = book.remember(APP)
    book.applying(APP, "rollout", "h1")
    book.rolled(APP, 100.0, workload(template_hash="h0"))
    book.set_state(APP, "applied")
    assert read == WorkloadMemory() and book.remember(APP) != read
    assert (book.remember(APP).applied, book.remember(APP).state) == ("h1", "applied")
    assert book.remember(APP).rollouts == {100.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        read.applied = "h2"  # type: ignore[misc]


_STATES = (None, "applied", "held-order", "held-line-stopped", "held-turn", "held-missing")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("remember", "state", "forget")),
                          st.sampled_from((APP, OTHER)), st.sampled_from(_STATES))))  # fmt: skip
def test_who_waits_follows_every_sequence_of_states_and_deletions(
    steps: list[tuple[str, WorkloadKey, str | None]],
) -> None:
    book, _ = book_over({})
    for step, key, state in steps:
        if step == "remember":
            book.remember(key)
        elif step == "state":
            book.set_state(key, state)
        else:
            book.forget(key)
        memories = {k: book.memory(k) for k in (APP, OTHER)}
        expected = {k for k, memory in memories.items() if memory and memory.state in WAITING}
        assert set(book.waiting()) == expected


def test_a_workload_deleted_during_its_pass_stays_forgotten() -> None:
    """The pass's later steps (its write, what it remembers, the state it leaves) never
    bring a forgotten record back: it would stay, counted in the state gauge, for good."""
    book, metrics = book_over({})
    book.remember(APP)  # the pass's page
    book.set_state(APP, "held-order")
    assert not book.observed(APP, None)  # deleted while the pass awaited
    with book.writing(APP):
        book.started(APP, "rollout", "h1", followed=True)
    book.rolled(APP, 100.0, workload(template_hash="h0"))
    book.runs(APP, {})
    book.set_state(APP, "applied")
    assert book.memory(APP) is None and book.waiting() == []
    assert counted(metrics, "applied") == counted(metrics, "held-order") == 0
