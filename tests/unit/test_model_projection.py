"""What projections read from objects besides digests: change times, pod selectors, starts."""

from __future__ import annotations

from typing import Any

import pytest

from kube_nudge.kube.pods import pod_started
from kube_nudge.model.projection import data_changed_at, data_write, parse_timestamp, pod_selector
from kube_nudge.model.settings import parse_workload

T0 = 1_795_392_000.0  # 2026-11-23T00:00:00Z


def test_data_changes_come_from_managers_of_data_fields_only() -> None:
    metadata = {
        "creationTimestamp": "2026-11-22T00:00:00Z",
        "managedFields": [
            {"manager": "kubectl", "time": "2026-11-23T00:10:00Z", "fieldsV1": {"f:data": {}}},
            {"manager": "helm", "time": "2026-11-23T00:05:00Z", "fieldsV1": {"f:binaryData": {}}},
            {"manager": "labeller", "time": "2026-11-23T01:00:00Z",
             "fieldsV1": {"f:metadata": {"f:labels": {}}}},
        ],
    }  # fmt: skip
    assert data_changed_at(metadata) == T0 + 600


def test_without_managed_fields_the_creation_time_counts() -> None:
    assert data_changed_at({"creationTimestamp": "2026-11-23T00:00:00Z"}) == T0
    assert data_changed_at({}) is None


@pytest.mark.parametrize("junk", [None, 5, "", "yesterday", "2026-11-23T00:00:00"])
def test_unreadable_timestamps_are_unknown(junk: Any) -> None:
    assert parse_timestamp(junk) is None


def test_pod_selector_covers_labels_and_expressions() -> None:
    obj = {"spec": {"selector": {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [
            {"key": "t", "operator": "In", "values": ["x", "y"]},
            {"key": "u", "operator": "NotIn", "values": ["z"]},
            {"key": "e", "operator": "Exists"},
            {"key": "d", "operator": "DoesNotExist"},
        ],
    }}}  # fmt: skip
    assert pod_selector(obj) == "a=1,b=2,t in (x,y),u notin (z),e,!d"
    assert pod_selector({"spec": {}}) is None
    bad = {"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}}
    assert pod_selector(bad) is None


def test_a_pod_read_its_config_when_its_earliest_running_container_started() -> None:
    pod = {"status": {
        "startTime": "2026-11-23T00:00:00Z",
        "containerStatuses": [
            {"state": {"running": {"startedAt": "2026-11-23T00:03:00Z"}}},  # restarted
            {"state": {"running": {"startedAt": "2026-11-23T00:01:00Z"}}},
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ],
    }}  # fmt: skip
    assert pod_started(pod) == T0 + 60
    assert pod_started({"status": {"startTime": "2026-11-23T00:00:00Z"}}) == T0
    assert pod_started({"status": {}}) is None


def test_the_adopt_annotation() -> None:
    settings, errors = parse_workload({"kube-nudge.io/adopt": "never-roll"}, "ns")
    assert (settings.roll_stale_on_adoption, errors) == (False, [])
    settings, errors = parse_workload({"kube-nudge.io/adopt": "always"}, "ns")
    assert settings.roll_stale_on_adoption is True
    assert errors == ['kube-nudge.io/adopt must be "roll-stale" or "never-roll", got "always"']


def test_data_write_names_the_managers_of_the_latest_data_write() -> None:
    metadata = {
        "managedFields": [
            {"manager": "helm", "time": "2026-11-23T00:00:00Z", "fieldsV1": {"f:data": {}}},
            {"manager": "kubectl-client-side-apply", "time": "2026-11-23T00:10:00Z",
             "fieldsV1": {"f:data": {}}},
            {"manager": "kubectl-label", "time": "2026-11-23T00:20:00Z",
             "fieldsV1": {"f:metadata": {}}},  # not a data write
            {"manager": "kubectl", "time": "2026-11-23T00:10:00Z",
             "fieldsV1": {"f:stringData": {}}},
        ]
    }  # fmt: skip
    assert data_write(metadata) == (T0 + 600, ("kubectl", "kubectl-client-side-apply"))
    assert data_write({"creationTimestamp": "2026-11-23T00:00:00Z"}) == (T0, ())
