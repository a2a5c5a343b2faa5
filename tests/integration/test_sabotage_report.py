"""The sabotage switch and its report, without a cluster (the runs are `make test-sabotage`)."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from bench.gitstate import TreeState

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer
from kube_nudge.kube.resources import CONFIGMAPS
from tests.integration import sabotage, sabotage_report
from tests.integration.reliability_tables import SABOTAGE
from tests.integration.sabotage_report import caught


def test_a_sabotage_is_caught_only_when_every_scenario_failed_on_its_own_check() -> None:
    failed = {"test": "a", "outcome": "failure", "message": "AssertionError: lost: ['w0']"}
    passed = {"test": "b", "outcome": "passed", "message": ""}
    assert caught({"catches": "lost", "tests": [failed, failed]})
    assert not caught({"catches": "lost", "tests": [failed, passed]})
    assert not caught({"catches": "lost", "tests": [failed, {**failed, "outcome": "error"}]})
    assert not caught({"catches": "lost", "tests": [{**failed, "outcome": "skipped"}]})
    assert not caught({"catches": "lost", "tests": []})  # -k selected nothing
    other = {**failed, "message": "assert 0.0 >= 6"}  # another check: not the row's guarantee
    assert not caught({"catches": "lost", "tests": [failed, other]})


def test_the_switch_names_a_known_sabotage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sabotage.ENV, raising=False)
    assert sabotage.chosen() is None
    assert sabotage.replica_command() == [sys.executable, "-m", "kube_nudge"]
    monkeypatch.setenv(sabotage.ENV, "no-watch-timeout")
    assert sabotage.chosen() is sabotage.SABOTAGES["no-watch-timeout"]
    assert sabotage.replica_command() == [sys.executable, "-m", "tests.integration.sabotage"]
    monkeypatch.setenv(sabotage.ENV, "no-such-thing")
    with pytest.raises(pytest.UsageError, match="'no-such-thing': use one of no-relist-on-410"):
        sabotage.chosen()


def test_the_stale_write_merges_as_a_json_merge_patch() -> None:
    workload = {"metadata": {"annotations": {"a": "1", "b": "2"}, "labels": {"x": "y"}}}
    sabotage._merge(workload, {"metadata": {"annotations": {"a": None, "c": "3"}}})
    assert workload == {"metadata": {"annotations": {"b": "2", "c": "3"}, "labels": {"x": "y"}}}


_ABSENT = object()


def _current(owner: object, name: str) -> object:
    return inspect.getattr_static(owner, name, _ABSENT)


@pytest.mark.parametrize("name", list(sabotage.SABOTAGES))
def test_each_sabotage_applies_to_the_code_and_is_undone(name: str) -> None:
    # A sabotage whose target moved fails here, not as a setup error of its fault scenario.
    chosen = sabotage.SABOTAGES[name]
    assert chosen.targets, f"{name} names nothing it patches"
    before = [_current(owner, attribute) for owner, attribute in chosen.targets]
    with pytest.MonkeyPatch.context() as patch:
        chosen.apply(patch)
        during = [_current(owner, attribute) for owner, attribute in chosen.targets]
        assert all(now is not then for now, then in zip(during, before, strict=True)), name
    after = [_current(owner, attribute) for owner, attribute in chosen.targets]
    assert all(now is then for now, then in zip(after, before, strict=True)), name


def test_the_429_switch_fails_loudly_when_its_attribute_is_renamed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sabotage, "HOLD", "_held_until")  # as if the product renamed it
    with (
        pytest.MonkeyPatch.context() as patch,
        pytest.raises(AttributeError, match="no '_held_until' any more"),
    ):
        sabotage.SABOTAGES["retry-after-per-request"].apply(patch)
    assert _current(KubeClient, "_held_until") is _ABSENT


class _Expiring:
    """A client whose streaming list brings one ConfigMap and closes, and which refuses every
    watch resumed from a version with 410 Gone."""

    def __init__(self) -> None:
        self.watches: list[tuple[bool, str]] = []  # (a streaming list?, resumed from)

    async def watch(
        self, path: str, params: Mapping[str, Any], *, resource_version: str, **_: Any
    ) -> AsyncIterator[JSON]:
        self.watches.append((params.get("sendInitialEvents") == "true", resource_version))
        if resource_version:
            raise ApiError(410, "Expired", "too old resource version")
        metadata = {"namespace": "ns", "name": "c", "resourceVersion": "5"}
        yield {"type": "ADDED", "object": {"metadata": metadata}}
        end = {"resourceVersion": "5", "annotations": {INITIAL_EVENTS_END: "true"}}
        yield {"type": "BOOKMARK", "object": {"metadata": end}}


async def _after_expiries(watches: int) -> tuple[list[tuple[bool, str]], list[str]]:
    """The watches an informer made on ``_Expiring`` and the restarts it reported."""
    client, restarts = _Expiring(), list[str]()
    informer: Informer[str] = Informer(
        cast(KubeClient, client), CONFIGMAPS, lambda obj: "c", lambda *_: None,
        on_restart=restarts.append,
    )  # fmt: skip
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(100):
            if len(client.watches) >= watches:
                break
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
    return client.watches[:watches], restarts


async def test_no_relist_on_410_breaks_the_relist_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The product: the 410 is counted as expired, and the informer lists again.
    watches, restarts = await _after_expiries(3)
    assert watches == [(True, ""), (False, "5"), (True, "")]
    assert restarts[:1] == ["expired"]
    # Sabotaged: still counted as expired (the scenarios' other check holds), but resumed
    # from the expired version, again and again, so changes in the gap are lost.
    monkeypatch.setattr(sabotage, "RESUME_PAUSE", 0.01)
    with pytest.MonkeyPatch.context() as patch:
        sabotage.SABOTAGES["no-relist-on-410"].apply(patch)
        watches, restarts = await _after_expiries(4)
    assert watches == [(True, ""), (False, "5"), (False, "5"), (False, "5")]
    assert restarts[:2] == ["expired", "expired"]


@pytest.fixture
def page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The report's page, records and build directory in ``tmp_path``; every sabotage's run
    stubbed as caught on its own check."""
    monkeypatch.setattr(sabotage_report, "RAW", tmp_path / "raw.jsonl")
    monkeypatch.setattr(sabotage_report, "BUILD", tmp_path)

    def caught_run(name: str, chosen: sabotage.Sabotage) -> dict[str, Any]:
        test = {
            "test": "t::x",
            "outcome": "failure",
            "message": f"AssertionError: {chosen.catches}",
        }
        return {"sabotage": name, "broken": chosen.broken, "scenarios": chosen.scenarios,
                "catches": chosen.catches, "seconds": 1.0, "tests": [test]}  # fmt: skip

    monkeypatch.setattr(sabotage_report, "run", caught_run)
    path = tmp_path / "page.md"
    path.write_text(f"<!-- sabotage-table:begin {SABOTAGE} -->\nold\n<!-- sabotage-table:end -->\n")
    return path


def _trees(monkeypatch: pytest.MonkeyPatch, *states: TreeState) -> None:
    answers = iter(states)
    monkeypatch.setattr(sabotage_report, "tree_state", lambda _root: next(answers))


def test_every_record_carries_its_commit_and_the_checks_before_and_after(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _trees(monkeypatch, TreeState("abc1234"), TreeState("abc1234"))
    assert sabotage_report.main([str(page)]) == 0
    records = [json.loads(line) for line in sabotage_report.RAW.read_text().splitlines()]
    assert [r["sabotage"] for r in records] == list(sabotage.SABOTAGES)
    assert all(r["commit"] == "abc1234" and r["clean_before"] and r["clean_after"]
               for r in records)  # fmt: skip
    assert "Run at commit abc1234, on a tree that was that commit before and after" in (
        page.read_text()
    )


@pytest.mark.parametrize("after", [TreeState("abc1234", ("M src/x.py",)), TreeState("def5678")])
def test_a_tree_that_changed_during_the_runs_writes_nothing(
    page: Path, monkeypatch: pytest.MonkeyPatch, after: TreeState
) -> None:
    before = page.read_text()
    _trees(monkeypatch, TreeState("abc1234"), after)
    assert sabotage_report.main([str(page)]) == 1
    assert page.read_text() == before and not sabotage_report.RAW.exists()


def test_a_subset_never_stands_in_for_the_whole_table(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = page.read_text()
    _trees(monkeypatch, TreeState("abc1234"), TreeState("abc1234"))
    assert sabotage_report.main([str(page), "no-watch-timeout"]) == 0
    assert page.read_text() == before and not sabotage_report.RAW.exists()
    assert json.loads((sabotage_report.BUILD / "sabotage.jsonl").read_text())["commit"] == "abc1234"
