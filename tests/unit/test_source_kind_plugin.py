"""A source kind is one row of the table (``model/source_kinds.py``): a kind that lives
only in the tests (tests/unit/toy_source_kind, registered with ``register_source_kind``)
is discovered, read key by key, decided for, reproduced by strategy hot, copied by
strategy snapshot and named on the command line exactly as a ConfigMap is, with no
product file changed. The key-level cases are the hash oracle's generated pod specs,
each made once with ConfigMaps and once with ToyMaps."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_nudge.app.manifest_checks import annotation_problem
from kube_nudge.app.wait_command import parse_target
from kube_nudge.kube.resources import Resource, source_resource
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import (
    SourceKind,
    SourceRef,
    assess,
    parse_workload,
    project_source,
    project_workload,
)
from kube_nudge.model.annotations import EXCLUDE, IGNORE
from kube_nudge.model.references import discover, rename_references
from kube_nudge.model.source_kinds import (
    BUILTIN_SOURCE_KINDS,
    DataField,
    is_source_kind,
    register_source_kind,
    source_row,
    unregister_source_kind,
)
from kube_nudge.reporting.plan import api_object
from kube_nudge.strategies.hot.claims import volume_files
from kube_nudge.strategies.registry import product_defaults
from kube_nudge.strategies.snapshot.copies import copy_manifest
from tests.unit.podspecs import Ref, refs_st, render
from tests.unit.toy_source_kind import TOY, TOY_ROW, as_toy, registered

DEPLOYMENT = BUILTIN_KINDS[0]
CM = SourceKind.CONFIGMAP
NS = "team"
KEY = b"\x07" * 32
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def toy() -> Iterator[None]:
    with registered():
        yield


def as_toy_ref(ref: SourceRef) -> SourceRef:
    return replace(ref, kind=TOY) if ref.kind is CM else ref


def configmap_refs(refs: list[Ref]) -> list[Ref]:
    return [ref for ref in refs if ref[0] == "configmap"]


@PROPS
@given(st.lists(refs_st, max_size=6).map(configmap_refs))
def test_a_toy_kind_is_discovered_key_by_key_as_a_configmap_is(refs: list[Ref]) -> None:
    spec = render(refs)
    expected = {as_toy_ref(ref): use for ref, use in discover(spec, NS).items()}
    assert discover(as_toy(spec), NS) == expected


def desired(spec: dict[str, Any], data: dict[str, str], kind: SourceKind) -> str:
    """The hash a workload with pod spec ``spec`` wants, every source of ``kind`` holding
    ``data``."""
    obj = {"metadata": {"namespace": NS}, "spec": {"template": {"spec": spec}}}
    view = project_workload(obj, DEPLOYMENT.template_path, product_defaults(), opted_out_too=True)
    assert view is not None
    source = project_source({"metadata": {}, "data": data})
    return assess(view, lambda ref: source if ref.kind is kind else None, KEY).desired


@PROPS
@given(
    st.lists(refs_st, min_size=1, max_size=4).map(configmap_refs),
    st.dictionaries(st.sampled_from(["k1", "k2", "k3"]), st.sampled_from(["x", "y"])),
    st.dictionaries(st.sampled_from(["k1", "k2", "k3"]), st.sampled_from(["x", "y"])),
)
def test_a_change_to_a_toy_kind_rolls_exactly_when_the_same_change_to_a_configmap_does(
    refs: list[Ref], before: dict[str, str], after: dict[str, str]
) -> None:
    spec = render(refs)
    rolls_cm = desired(spec, before, CM) != desired(spec, after, CM)
    rolls_toy = desired(as_toy(spec), before, TOY) != desired(as_toy(spec), after, TOY)
    assert rolls_toy == rolls_cm


def test_a_toy_kind_is_read_as_its_row_says() -> None:
    assert source_resource(TOY) == Resource("toy.example", "v1", "toymaps", "ToyMap")
    assert (
        source_resource(TOY).path("team", "app")
        == "/apis/toy.example/v1/namespaces/team/toymaps/app"
    )
    assert is_source_kind("toymap")
    assert SourceKind("toymap") is TOY


def test_strategy_hot_lays_out_a_toy_volume_as_the_kubelet_would() -> None:
    volume = {"name": "v", "toyMap": {"name": "app", "items": [{"key": "k1", "path": "d/one"}]}}
    toy = {"data": {"k1": "one", "k2": "two"}}
    assert volume_files(volume, NS, {SourceRef(TOY, NS, "app"): toy}) == {"d/one": b"one"}


def test_strategy_snapshot_copies_and_renames_a_toy_source() -> None:
    ref = SourceRef(TOY, NS, "app")
    copy = copy_manifest({"data": {"k": "v"}, "other": 1}, ref, "app-123", {"uid": "u"})
    assert (copy["apiVersion"], copy["kind"], copy["data"]) == (
        "toy.example/v1",
        "ToyMap",
        {"k": "v"},
    )
    assert "other" not in copy
    spec = {
        "volumes": [
            {"name": "v", "toyMap": {"name": "app"}},
            {"name": "w", "configMap": {"name": "app"}},
        ]
    }
    renamed = rename_references(spec, lambda kind, name: f"{name}-123" if kind is TOY else None)
    assert renamed["volumes"] == [
        {"name": "v", "toyMap": {"name": "app-123"}},
        {"name": "w", "configMap": {"name": "app"}},
    ]


def test_a_toy_source_is_named_in_annotations_and_on_the_command_line() -> None:
    settings, errors = parse_workload({EXCLUDE: "toymap/app"}, NS, product_defaults())
    assert errors == []
    assert settings.exclude == frozenset({SourceRef(TOY, NS, "app")})
    for text in ("toymap/app", "toymaps/app", "tm/app"):
        target = parse_target(text)
        assert (target.kind, target.name, target.is_source) == ("toymap", "app", True)


def test_plan_reads_a_kinds_write_only_data_and_annotations_by_its_row() -> None:
    """What ``plan`` knows of a manifest's kind is its row's: write-only text data folded
    into its data as the API server stores it (a Secret's ``stringData``), and a source's
    annotations checked as ``run`` would."""
    kind = SourceKind.define("toysecret")
    row = replace(TOY_ROW, kind=kind, plural="toysecrets", api_kind="ToySecret", aliases=(),
                  data=(DataField("data", base64=True),), string_data="textData")  # fmt: skip
    register_source_kind(row)
    try:
        given = {"apiVersion": "toy.example/v1", "kind": "ToySecret",
                 "metadata": {"name": "db"}, "textData": {"pw": "hi"}}  # fmt: skip
        assert api_object(given, NS)["data"] == {"pw": "aGk="}
        assert "textData" not in api_object(given, NS)
        bad = {**given, "metadata": {"name": "db", "annotations": {IGNORE: "maybe"}}}
        assert annotation_problem(bad, NS, product_defaults(), ()) is not None
    finally:
        unregister_source_kind(kind)


def test_unregistered_it_is_no_kind_at_all() -> None:
    unregister_source_kind(TOY)
    try:
        assert not is_source_kind("toymap")
        with pytest.raises(ValueError, match="'toymap' is not a source kind"):
            SourceKind("toymap")
        assert discover(as_toy({"volumes": [{"name": "v", "configMap": {"name": "a"}}]}), NS) == {}
    finally:
        register_source_kind(TOY_ROW)


def test_the_built_in_kinds_stay() -> None:
    with pytest.raises(ValueError, match="built in"):
        unregister_source_kind(CM)
    with pytest.raises(ValueError, match="already registered"):
        register_source_kind(BUILTIN_SOURCE_KINDS[0])
    assert source_row(CM) is BUILTIN_SOURCE_KINDS[0]


SRC = Path(__file__).resolve().parents[2] / "src" / "kube_nudge"


def kind_tests(source: str) -> list[int]:
    """Lines of ``source`` comparing something with a kind by name (``kind is SourceKind.X``,
    ``== SourceKind.X``, ``in (SourceKind.X, ...)``), or mapping kinds by name in a dict."""
    found = []
    for node in ast.walk(ast.parse(source)):
        named = [
            sub
            for sub in ast.walk(node)
            if isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "SourceKind"
        ]
        if named and isinstance(node, ast.Compare | ast.Dict | ast.IfExp):
            found.append(node.lineno)
    return sorted(set(found))


def test_no_product_module_asks_which_kind_a_source_is() -> None:
    """What differs between kinds is in their rows: a third kind is never silently read as
    a Secret by an ``if kind is CONFIGMAP ... else`` somewhere."""
    table = SRC / "model" / "source_kinds.py"
    asking = {
        str(path.relative_to(SRC)): lines
        for path in SRC.rglob("*.py")
        if path != table and (lines := kind_tests(path.read_text()))
    }
    assert asking == {}
    # The search sees each form where there is one (cache.py, desired.py, wait had these).
    assert kind_tests("r = CONFIGMAPS if ref.kind is SourceKind.CONFIGMAP else SECRETS") == [1]
    assert kind_tests("f = {SourceKind.CONFIGMAP: None, SourceKind.SECRET: SELECTOR}") == [1]
    assert kind_tests("if ref.kind is not SourceKind.CSI:\n    pass") == [1]
