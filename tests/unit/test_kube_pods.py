"""A pod as the pod-selector replacement sees it."""

from __future__ import annotations

from kube_nudge.kube.pods import pod_record
from kube_nudge.model.replacement import PodRecord


def test_pod_record_reads_names_labels_start_readiness_and_owner() -> None:
    pod = {
        "metadata": {
            "name": "web-1", "uid": "u1", "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "controller": True}],
        },
        "spec": {"containers": [{"name": "app", "env": [{"name": "TOKEN", "value": "s3cret"}]}]},
        "status": {
            "phase": "Running", "startTime": "2026-01-01T00:00:05Z",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"state": {"running": {"startedAt": "2026-01-01T00:00:07Z"}}},
            ],
        },
    }  # fmt: skip
    record = pod_record(pod)
    assert record == PodRecord(
        "web-1", "u1", {"app": "web"}, started=1767225607.0, ready=True, owned=True
    )
    assert "s3cret" not in repr(record)  # nothing of the spec is kept


def test_pod_record_of_bare_terminating_and_finished_pods() -> None:
    bare = pod_record({"metadata": {"name": "b", "ownerReferences": [{"kind": "X"}]}})
    assert (bare.owned, bare.ready, bare.started) == (False, False, None)
    going = pod_record({"metadata": {"name": "g", "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert going.terminating
    done = pod_record({"metadata": {"name": "j"}, "status": {"phase": "Succeeded",
                       "conditions": [{"type": "Ready", "status": "False"}]}})  # fmt: skip
    assert done.finished and not done.ready
