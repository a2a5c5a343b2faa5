"""The rollout patch: recorded rollout times (the flap cap survives restarts), change cause."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import BASELINE_HASH, CONFIG_HASH, ROLLED_AT
from kube_nudge.model.annotations import KEY_ID
from kube_nudge.model.records import parse_rolled_at
from kube_nudge.strategies.writes import CHANGE_CAUSE, rollout_patch


def test_rolled_at_round_trips_through_the_rollout_patch() -> None:
    patch = rollout_patch(
        BUILTIN_KINDS[0].template_path,
        "uid-1",
        "v1-abc",
        rolled_at=[1700000000.5, 17e8],
        cause="configmap/app keys [LEVEL] changed",
        key_id="0123abcd",
    )
    annotations = patch["metadata"]["annotations"]
    # The Deployment controller copies it to the new ReplicaSet: `kubectl rollout history`.
    assert annotations[CHANGE_CAUSE] == "kube-nudge: configmap/app keys [LEVEL] changed"
    assert annotations[BASELINE_HASH] is None  # always: the template carries the hash now
    assert parse_rolled_at(annotations[ROLLED_AT]) == (17e8, 1700000000.5)
    assert annotations[KEY_ID] == "0123abcd"
    assert patch["metadata"]["uid"] == "uid-1"
    assert patch["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH] == "v1-abc"


def test_unreadable_entries_are_skipped() -> None:
    assert parse_rolled_at("12.5, junk,,-3,inf,nan,7") == (7.0, 12.5)
    assert parse_rolled_at(None) == ()
    assert parse_rolled_at(["1"]) == ()


@given(st.text(max_size=5000))
def test_any_text_parses_to_a_bounded_sorted_tuple(text: str) -> None:
    stamps = parse_rolled_at(text)
    assert len(stamps) <= 100
    assert list(stamps) == sorted(stamps)
    assert all(stamp > 0 for stamp in stamps)
