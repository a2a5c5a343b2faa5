"""The sabotage switch and its report, without a cluster (the runs are `make test-sabotage`)."""

from __future__ import annotations

import sys

import pytest

from tests.integration import sabotage
from tests.integration.sabotage_report import caught


def test_a_sabotage_is_caught_only_when_every_scenario_failed() -> None:
    failed = {"test": "a", "outcome": "failure", "message": "lost"}
    passed = {"test": "b", "outcome": "passed", "message": ""}
    assert caught({"tests": [failed, failed]})
    assert not caught({"tests": [failed, passed]})
    assert not caught({"tests": [failed, {**failed, "outcome": "error"}]})  # in its setup
    assert not caught({"tests": [{**failed, "outcome": "skipped"}]})
    assert not caught({"tests": []})  # -k selected nothing: nothing was proven


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


@pytest.mark.parametrize("name", list(sabotage.SABOTAGES))
def test_each_sabotage_applies_to_the_code_and_is_undone(name: str) -> None:
    # A sabotage whose target moved fails here, not as a setup error of its fault scenario.
    with pytest.MonkeyPatch.context() as patch:
        sabotage.SABOTAGES[name].apply(patch)
