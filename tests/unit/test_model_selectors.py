"""Label selectors: text checked with Kubernetes' grammar before any API call, structured
ones matched against labels as the API does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_nudge.model.selectors import check_label_selector, selector_matches


@pytest.mark.parametrize(
    "text",
    [
        "app=web",
        "app==web",
        "app!=web",
        "app",
        "!legacy",
        "app.kubernetes.io/name=web",
        "tier in (a, b),env notin (dev)",
        "empty=",
        "replicas>1",
        " app = web , tier ",
    ],
)
def test_valid_selectors_pass(text: str) -> None:
    assert check_label_selector("--source-selector", text) == text


@pytest.mark.parametrize(
    "text",
    ["app in web", "app=we b", "=web", "app=web,", "a b", "app=(web)", "-app=1", "x" * 64 + "=1"],
)
def test_invalid_selectors_name_the_flag_and_value(text: str) -> None:
    with pytest.raises(ValueError, match="not a label selector") as caught:
        check_label_selector("--source-selector", text)
    assert str(caught.value).startswith("--source-selector ")


# --- structured selectors (a PodDisruptionBudget's spec.selector) matched against labels ---

LABELS = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),  # empty: everything (policy/v1)
        (None, False),  # missing: nothing
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "web", "tier": "back"}}, False),
        ({"matchLabels": {"other": "x"}}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["api"]}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]}, True),
        ({"matchExpressions": [{"key": "gone", "operator": "In", "values": ["x"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "gone", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, False),
        ({"matchLabels": {"app": "web"},
          "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}, False),
        ({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, False),
        ({"matchExpressions": ["app"]}, False),
        ({"matchLabels": ["app"]}, False),
        ("app=web", False),
    ],
)  # fmt: skip
def test_selector_matches(selector: object, expected: bool) -> None:
    assert selector_matches(selector, LABELS) is expected


keys = st.sampled_from(["app", "tier", "zone", "example.com/role"])
values = st.sampled_from(["a", "b", "c"])
label_sets = st.dictionaries(keys, values, max_size=4)
operators = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"])
expressions = st.builds(
    lambda key, op, vals: {"key": key, "operator": op, "values": vals},
    keys, operators, st.lists(values, max_size=3),
)  # fmt: skip
parts: dict[str, st.SearchStrategy[Any]] = {
    "matchLabels": label_sets,
    "matchExpressions": st.lists(expressions, max_size=3),
}
selectors = st.fixed_dictionaries({}, optional=parts)


@settings(max_examples=300, deadline=None)
@given(labels=label_sets)
def test_a_selector_of_an_objects_own_labels_selects_it(labels: dict[str, str]) -> None:
    assert selector_matches({"matchLabels": labels}, labels)


@settings(max_examples=300, deadline=None)
@given(selector=selectors, labels=label_sets)
def test_requirements_are_anded(selector: dict[str, Any], labels: dict[str, str]) -> None:
    """A selector matches exactly when each of its requirements alone does."""
    alone: list[dict[str, Any]] = [
        {"matchLabels": {k: v}} for k, v in (selector.get("matchLabels") or {}).items()
    ]
    alone += [{"matchExpressions": [e]} for e in selector.get("matchExpressions") or ()]
    assert selector_matches(selector, labels) == all(selector_matches(p, labels) for p in alone)


@settings(max_examples=300, deadline=None)
@given(expression=expressions, labels=label_sets)
def test_in_and_notin_exists_and_doesnotexist_are_complements(
    expression: dict[str, Any], labels: dict[str, str]
) -> None:
    opposite = {"In": "NotIn", "NotIn": "In", "Exists": "DoesNotExist", "DoesNotExist": "Exists"}
    flipped = {**expression, "operator": opposite[expression["operator"]]}
    one = selector_matches({"matchExpressions": [expression]}, labels)
    assert one != selector_matches({"matchExpressions": [flipped]}, labels)
