"""What a Prometheus answer measures, and which servers may be asked (the allow-list of
--prometheus-url). The queries themselves run against the real Prometheus in
tests/integration/test_analysis.py."""

from __future__ import annotations

import json
import math

import pytest

from kube_nudge.runtime.prometheus import (
    PrometheusAccess,
    PrometheusClient,
    QueryError,
    _value,
    normalised,
)

ADDRESS = "http://prometheus.monitoring:9090"


def answer(kind: str, result: object, status: str = "success") -> bytes:
    return json.dumps({"status": status, "data": {"resultType": kind, "result": result}}).encode()


def test_a_vector_gives_its_values_and_a_scalar_its_number() -> None:
    vector = [{"metric": {"a": "1"}, "value": [1.5, "0.01"]},
              {"metric": {"a": "2"}, "value": [1.5, "NaN"]}]  # fmt: skip
    values = _value(ADDRESS, 200, answer("vector", vector))
    assert isinstance(values, list) and values[0] == 0.01 and math.isnan(values[1])
    assert _value(ADDRESS, 200, answer("vector", [])) == []  # no data: the conditions decide
    assert _value(ADDRESS, 200, answer("scalar", [1.5, "+Inf"])) == math.inf


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (200, answer("matrix", []), "a matrix result; an analysis query must give an instant"),
        (400, json.dumps({"status": "error", "error": "parse error at char 3"}).encode(),
         "the query failed: parse error at char 3"),
        (502, b"<html>bad gateway</html>", "answered 502, not Prometheus JSON"),
        (200, answer("vector", [{"value": [1, "many"]}]), "a sample that is not a number"),
    ],
)  # fmt: skip
def test_an_answer_without_a_value_is_an_error_naming_the_server(
    status: int, body: bytes, says: str
) -> None:
    with pytest.raises(QueryError) as caught:
        _value(ADDRESS, status, body)
    assert str(caught.value).startswith(f"{ADDRESS}: ") and says in str(caught.value)


def test_only_the_allowed_servers_may_be_asked() -> None:
    access = PrometheusAccess((normalised("HTTP://Prometheus.Monitoring:9090/"),))
    assert access.allowed == (ADDRESS,)
    assert access.allows("http://prometheus.monitoring:9090")
    assert access.allows("http://PROMETHEUS.monitoring:9090/")
    for other in (
        "http://prometheus.monitoring:9091",
        "http://169.254.169.254/latest",
        "https://prometheus.monitoring:9090",
        "http://prometheus.monitoring:9090/x",
        "http://user:pw@prometheus.monitoring:9090",
        "file:///etc/passwd",
        "nonsense",
    ):
        assert not access.allows(other), other  # fmt: skip


@pytest.mark.parametrize(
    "url", ["ftp://x", "http://", "http://x/?q=1", "http://u:p@x", "prometheus:9090"]
)
def test_a_flag_value_that_is_no_plain_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="URL"):
        normalised(url)


async def test_an_address_not_allowed_is_refused_before_any_connection() -> None:
    client = PrometheusClient(PrometheusAccess((ADDRESS,)))
    with pytest.raises(QueryError, match="is not a --prometheus-url"):
        await client.query("http://169.254.169.254", "up")
    assert client._session is None  # no connection was ever made
