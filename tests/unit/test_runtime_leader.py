"""Leader election settings and the Lease time format (the election runs in integration)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from kube_nudge.runtime.leader import LeaseConfig, micro_time


def test_defaults_match_client_go() -> None:
    config = LeaseConfig(namespace="ops", identity="pod-1_abcd")
    assert config.name == "kube-nudge"
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15, 10, 2)


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [(10, 10, 2), (10, 15, 2), (15, 10, 10), (15, 10, 0), (15, 10, -1)],
)
def test_timings_that_could_allow_two_leaders_are_rejected(
    lease: float, renew: float, retry: float
) -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        LeaseConfig(
            namespace="ops",
            identity="me",
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
        )


def test_identity_is_required() -> None:
    with pytest.raises(ValueError, match="identity"):
        LeaseConfig(namespace="ops", identity="")


def test_micro_time_has_microseconds_in_utc() -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, 12, tzinfo=UTC)
    assert micro_time(moment) == "2024-05-06T07:08:09.000012Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", micro_time())
