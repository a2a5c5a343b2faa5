"""The status table reads well at 80 columns (the cluster behaviour is in
tests/integration/test_status_cli.py)."""

from __future__ import annotations

from kube_nudge.app.errors import EXIT_UNVERIFIED
from kube_nudge.app.status_command import exit_code, render_table
from kube_nudge.reporting.status import WorkloadStatus, status_document
from tests.schema_support import status_validator


def row(name: str, state: str, detail: str, pods: dict[str, int], **more: object) -> WorkloadStatus:
    fields: dict[str, object] = {"desired_hash": "v1-a", **more}
    return WorkloadStatus(
        namespace="shop", kind="Deployment", name=name, opted_in=True, strategy="rollout",
        state=state, detail=detail, applied_hash="v1-a", pods=pods,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_table_fits_80_columns_and_keeps_every_row() -> None:
    rows = [
        row("web", "current", "pods run the config in the cluster", {"v1-a": 3}),
        row("api", "rolling", "1 pod(s) still run an older config", {"v1-a": 2, "v1-b": 1}),
        row("a-very-long-workload-name-that-goes-on-and-on", "drift", "x" * 200, {}),
    ]
    lines = render_table(rows, width=80).splitlines()
    assert [line.split()[0] for line in lines] == [
        "WORKLOAD", "shop/Deployment/web", "shop/Deployment/api", lines[3].split()[0]
    ]  # fmt: skip
    assert all(len(line) <= 80 for line in lines)
    assert lines[2].split()[1:4] == ["rolling", "3", "(1"]
    assert lines[3].endswith("…") and lines[3].split()[0].endswith("…")


def test_colour_marks_the_state_only_on_request() -> None:
    rows = [row("web", "drift", "changed", {"v1-a": 1})]
    assert "\x1b[" not in render_table(rows)
    assert "\x1b[31mdrift" in render_table(rows, colour=True)


def test_no_workloads_says_how_to_opt_in() -> None:
    assert "kube-nudge.io/enabled" in render_table([])


def test_the_json_document_matches_its_documented_schema() -> None:
    rows = [
        row("web", "current", "pods run the config in the cluster", {"v1-ab12": 3},
            sources=("configmap/app [LEVEL]", "secret/other/db [*]"), rolled_out=True),
        row("legacy", "stale", "1 pod(s) started before …", {"-": 1}, stale_pods=1),
    ]  # fmt: skip
    document = status_document(rows, desired_known=True)
    validator = status_validator()
    validator.validate(document)
    assert document["drift"] is True
    # The schema is strict enough to catch a shape change.
    document["workloads"][0]["value"] = "leaked"
    assert not validator.is_valid(document)
    document["workloads"][0].pop("value")
    document["workloads"][0]["state"] = "unknown"
    assert not validator.is_valid(document)


def test_unverified_has_its_own_exit_code_and_drift_wins() -> None:
    current = row("web", "current", "pods run the config in the cluster", {"v1-a": 1})
    unsure = row("api", "unverified", "cannot verify: …", {"v1-a": 1}, desired_hash=None)
    drift = row("db", "drift", "its config changed", {"v1-a": 1})
    assert exit_code([current]) == 0
    assert exit_code([current, unsure]) == EXIT_UNVERIFIED == 6
    assert exit_code([current, unsure, drift]) == 1  # a known drift is the answer
    # Its own state in the documented schema, and never counted as drift.
    document = status_document([current, unsure], desired_known=False)
    status_validator().validate(document)
    assert document["drift"] is False
    assert "\x1b[33munverified" in render_table([unsure], colour=True)
