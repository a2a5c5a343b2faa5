"""--analysis-namespace-label: a query is run only when every series it selects is scoped
to the workload's namespace by that label (as prom-label-proxy would require), judged on
the query as PromQL parses it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model.query_scope import QueryScopeError, unscoped_selectors

NS = "shop"


@pytest.mark.parametrize(
    "query",
    [
        'sum(rate(http_requests_total{namespace="shop",code=~"5.."}[2m]))',
        'sum(rate(errors{namespace="shop"}[1m])) / sum(rate(requests{namespace="shop"}[1m]))',
        'histogram_quantile(0.99, sum by (le) (rate(latency_bucket{namespace="shop"}[5m])))',
        'max_over_time(up{namespace="shop"}[10m:1m])',  # a subquery
        'up{namespace="shop", namespace!="other"} offset 5m',
        'absent(up{job="x", namespace="shop"})',
        '{__name__=~"up|down", namespace="shop"}',
        'up{namespace="shop" or namespace="shop", job="a"}',
        "vector(1)",  # reads no series
        "time() - 5",
    ],
)
def test_a_query_whose_every_selector_names_the_namespace_is_scoped(query: str) -> None:
    assert unscoped_selectors(query, "namespace", NS) == []


@pytest.mark.parametrize(
    ("query", "unscoped"),
    [
        ("up", ["up"]),
        ('up{namespace="other"}', ['up{namespace="other"}']),
        ('up{namespace=~"shop"}', ['up{namespace=~"shop"}']),  # a regex can match more
        ('up{namespace=~"shop|other"}', ['up{namespace=~"shop|other"}']),
        ('up{namespace!="other"}', ['up{namespace!="other"}']),
        ('up{kubernetes_namespace="shop"}', ['up{kubernetes_namespace="shop"}']),
        ('sum(rate(a{namespace="shop"}[1m])) / sum(rate(kube_pod_info[1m]))',
         ["kube_pod_info"]),
        ('max_over_time(kube_secret_info{namespace="kube-system"}[5m:1m])',
         ['kube_secret_info{namespace="kube-system"}']),
        ('up{namespace="shop" or job="x"}', ['up{namespace="shop" or job="x"}']),
        ('info(rate(a{namespace="shop"}[1m]))',
         ["info(…), which reads series no selector names"]),
        ('a{namespace="shop"} and on() b', ["b"]),
    ],
)  # fmt: skip
def test_each_selector_that_may_read_another_namespace_is_named(
    query: str, unscoped: list[str]
) -> None:
    assert unscoped_selectors(query, "namespace", NS) == unscoped


def test_a_query_that_does_not_parse_is_an_error_of_one_line() -> None:
    with pytest.raises(QueryScopeError, match=r"^not PromQL: .*parenthesis") as caught:
        unscoped_selectors("sum(rate(up[1m])", "namespace", NS)
    assert "\n" not in str(caught.value)


@given(
    metric=st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
    namespace=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True),
    other=st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True),
)
def test_a_selector_is_scoped_exactly_when_it_names_the_workloads_namespace(
    metric: str, namespace: str, other: str
) -> None:
    query = f'sum(rate({metric}{{namespace="{other}"}}[1m]))'
    expected = [] if other == namespace else [f'{metric}{{namespace="{other}"}}']
    assert unscoped_selectors(query, "namespace", namespace) == expected


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("+".join(['up{namespace="shop"}'] * 400), "8399 characters, more than the 4096"),
        ("(" * 32 + 'up{namespace="shop"}' + ")" * 32, "nested 33 brackets deep, more than 32"),
    ],
)
def test_a_query_too_big_or_deep_to_check_cheaply_is_refused_before_parsing(
    query: str, says: str
) -> None:
    """A template author chooses the query: checking it must not hold the controller
    (an 8 KB sum of selectors once took 25 s of the event loop to check)."""
    with pytest.raises(QueryScopeError, match=says):
        unscoped_selectors(query, "namespace", NS)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    regex = "(" * 40 + 'x\\"' + ")" * 40  # a quote escaped inside: still the string
    query = f'up{{namespace="shop", path=~"{regex}"}}'
    assert unscoped_selectors(query, "namespace", NS) == []
    deepest = "(" * 31 + 'up{namespace="shop"}' + ")" * 31  # 32 with the braces: checked
    assert unscoped_selectors(deepest, "namespace", NS) == []
