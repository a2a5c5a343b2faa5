"""The workload-kind registry and the ``--workload`` flag (resolution against a real API
server is in tests/integration/test_controller_behaviour.py)."""

from __future__ import annotations

import pytest

from kube_nudge.kube.resources import Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS, WorkloadKind, parse_workload_flag, registry


def test_builtin_kinds_and_their_template_paths() -> None:
    assert {(k.resource.kind, k.template_path) for k in BUILTIN_KINDS} == {
        ("Deployment", ("spec", "template")),
        ("StatefulSet", ("spec", "template")),
        ("DaemonSet", ("spec", "template")),
        ("CronJob", ("spec", "jobTemplate", "spec", "template")),
    }


def test_a_flag_without_kind_leaves_it_to_discovery() -> None:
    spec = parse_workload_flag("example.com/v1/policies=spec.podTemplate")
    assert (spec.group, spec.version, spec.plural, spec.kind) == (
        "example.com", "v1", "policies", None
    )  # fmt: skip
    assert spec.template_path == ("spec", "podTemplate")
    assert spec.known() is None  # never guessed from the plural ("Policie")


def test_an_explicit_kind_needs_no_discovery() -> None:
    spec = parse_workload_flag("example.com/v1/policies:NetworkPolicyThing=spec.template")
    assert spec.known() == WorkloadKind(
        Resource("example.com", "v1", "policies", "NetworkPolicyThing"), ("spec", "template")
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("example.com/v1/policies", "want GROUP/VERSION/PLURAL=PATH"),
        ("v1/policies=spec.template", "want GROUP/VERSION/PLURAL=PATH"),
        ("example.com/v1/Policies=spec.template", "lowercase"),
        ("example.com/v1/policies:policy=spec.template", "CamelCase"),
        ("example.com/v1/policies=spec..template", "invalid pod template path"),
    ],
)
def test_bad_flags_name_the_value_and_the_fix(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        parse_workload_flag(text)
    assert text in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_kind_registered_twice_is_refused() -> None:
    deployments = BUILTIN_KINDS[0]
    with pytest.raises(ValueError, match="registered twice"):
        registry([WorkloadKind(deployments.resource, ("spec", "other"))])
    custom = WorkloadKind(Resource("example.com", "v1", "things", "Thing"), ("spec", "template"))
    assert registry([custom]) == (*BUILTIN_KINDS, custom)
