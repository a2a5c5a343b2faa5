"""Example-based tests of pod template paths."""

from __future__ import annotations

from typing import Any

import pytest

from kube_nudge.model.podtemplate import (
    annotation_patch,
    get_pod_spec,
    get_template,
    parse_path,
    template_annotation,
)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "spec": {
        "template": {
            "metadata": {"annotations": {"kube-nudge.io/config-hash": "v1-abc", "n": 1}},
            "spec": {"containers": [{"name": "app"}]},
        }
    },
}
CRONJOB: dict[str, Any] = {
    "kind": "CronJob",
    "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
}


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("spec.template", ("spec", "template")),
        ("spec.jobTemplate.spec.template", ("spec", "jobTemplate", "spec", "template")),
        ("template", ("template",)),
    ],
)
def test_parse_path(text: str, path: tuple[str, ...]) -> None:
    assert parse_path(text) == path


@pytest.mark.parametrize("text", ["", ".", "spec.", ".spec", "spec..template"])
def test_parse_path_rejects_empty_segments(text: str) -> None:
    with pytest.raises(ValueError, match="invalid pod template path"):
        parse_path(text)


def test_get_template() -> None:
    assert get_template(DEPLOYMENT, ("spec", "template")) is DEPLOYMENT["spec"]["template"]
    cron_path = ("spec", "jobTemplate", "spec", "template")
    assert get_template(CRONJOB, cron_path) == {"spec": {"containers": []}}


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"spec": None},
        {"spec": []},
        {"spec": {"template": "x"}},
        {"spec": {"template": None}},
        {"spec": {"template": [{"spec": {}}]}},
    ],
)
def test_get_template_absent_or_malformed(obj: dict[str, Any]) -> None:
    assert get_template(obj, ("spec", "template")) is None
    assert get_pod_spec(obj, ("spec", "template")) is None
    assert template_annotation(obj, ("spec", "template"), "a") is None


def test_get_pod_spec() -> None:
    assert get_pod_spec(DEPLOYMENT, ("spec", "template")) == {"containers": [{"name": "app"}]}
    assert get_pod_spec({"spec": {"template": {"spec": "x"}}}, ("spec", "template")) is None


def test_template_annotation() -> None:
    path = ("spec", "template")
    assert template_annotation(DEPLOYMENT, path, "kube-nudge.io/config-hash") == "v1-abc"
    assert template_annotation(DEPLOYMENT, path, "missing") is None
    assert template_annotation(DEPLOYMENT, path, "n") is None
    assert template_annotation({"spec": {"template": {"metadata": None}}}, path, "x") is None
    bad = {"spec": {"template": {"metadata": {"annotations": ["x"]}}}}
    assert template_annotation(bad, path, "x") is None


def test_annotation_patch() -> None:
    assert annotation_patch(("spec", "template"), "kube-nudge.io/config-hash", "v1-x") == {
        "spec": {"template": {"metadata": {"annotations": {"kube-nudge.io/config-hash": "v1-x"}}}}
    }
    assert annotation_patch(("spec", "jobTemplate", "spec", "template"), "a", None) == {
        "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"annotations": {"a": None}}}}}}
    }


def test_patch_round_trips_through_template_annotation() -> None:
    path = ("spec", "jobTemplate", "spec", "template")
    patched = annotation_patch(path, "kube-nudge.io/config-hash", "v1-y")
    assert template_annotation(patched, path, "kube-nudge.io/config-hash") == "v1-y"
