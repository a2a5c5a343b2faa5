"""Label selectors are checked with Kubernetes' grammar before any API call."""

from __future__ import annotations

import pytest

from kube_nudge.kube.selectors import check_label_selector


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
