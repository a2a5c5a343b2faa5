"""The sabotage switch and its report, without a cluster (the runs are `make test-sabotage`)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import pytest

from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.informer import INITIAL_EVENTS_END, Informer
from kube_nudge.kube.resources import CONFIGMAPS
from tests.integration import sabotage
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
