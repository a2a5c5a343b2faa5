"""The support window (model/kubeversion.py): what a server's ``/version`` parses to, the one
Warning line outside the window, and every place that states the window following it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.kubeversion import (
    NEWEST,
    OLDEST,
    SUPPORTED_MINORS,
    ServerVersion,
    parse_server_version,
    support_window,
    version_warning,
)

REPO = Path(__file__).resolve().parents[2]
UNSTAMPED = "v0.0.0-master+$Format:%H$"  # a build without version stamps


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}, ServerVersion(1, 35, "v1.35.4")),
        (
            {"major": "1", "minor": "33+", "gitVersion": "v1.33.5-eks-3025e55"},
            ServerVersion(1, 33, "v1.33.5-eks-3025e55"),
        ),
        ({"major": "", "minor": "", "gitVersion": "v1.37.2"}, ServerVersion(1, 37, "v1.37.2")),
        ({"major": "1", "minor": "36"}, ServerVersion(1, 36, "v1.36")),
        ({"gitVersion": "v0.0.0-master+$Format:%H$"}, ServerVersion(0, 0, UNSTAMPED)),
        ({"gitVersion": "unknown"}, None),
        ({}, None),
    ],
)
def test_parse_server_version(body: dict[str, object], expected: ServerVersion | None) -> None:
    assert parse_server_version(body) == expected


def test_the_window_reads_oldest_to_newest() -> None:
    assert tuple(range(OLDEST, NEWEST + 1)) == SUPPORTED_MINORS  # contiguous, oldest first
    assert support_window() == f"1.{OLDEST} to 1.{NEWEST}"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (ServerVersion(1, OLDEST, "v1.x"), None),
        (ServerVersion(1, NEWEST, "v1.y"), None),
        (
            ServerVersion(1, OLDEST - 1, "v1.33.5-eks-3025e55"),
            f"Kubernetes v1.33.5-eks-3025e55 is older than the versions kube-nudge supports "
            f"({support_window()}): it runs, but features may be missing or behave differently",
        ),
        (
            ServerVersion(1, NEWEST + 1, "v1.38.0"),
            f"Kubernetes v1.38.0 is newer than the versions kube-nudge supports "
            f"({support_window()}): it runs, but features may be missing or behave differently",
        ),
        (
            None,
            f"the API server's version is unknown; kube-nudge supports Kubernetes "
            f"{support_window()}",
        ),
    ],
)
def test_version_warning(version: ServerVersion | None, expected: str | None) -> None:
    assert version_warning(version) == expected


@given(st.integers(0, 3), st.integers(0, 99))
def test_warned_exactly_outside_the_window(major: int, minor: int) -> None:
    warning = version_warning(ServerVersion(major, minor, f"v{major}.{minor}.0"))
    inside = major == 1 and minor in SUPPORTED_MINORS
    assert (warning is None) == inside
    if warning is not None:
        assert warning.count("\n") == 0
        assert f"v{major}.{minor}.0" in warning


def test_the_chart_refuses_clusters_older_than_the_window() -> None:
    # No upper bound: a newer cluster installs, and `kube-nudge run` warns in its log.
    chart = yaml.safe_load((REPO / "deploy/helm/kube-nudge/Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">=1.{OLDEST}.0-0"
