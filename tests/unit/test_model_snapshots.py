"""Snapshot copies: names that always mean the same bytes, references renamed in every
form, copies mapped back to their sources, and an undo left alone."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.model import (
    CONFIG_HASH,
    Apply,
    Hold,
    Noop,
    SourceKind,
    WorkloadMemory,
    assess,
    decide,
    describe_apply,
    discover,
    project_source,
    project_workload,
    source_state,
)
from kube_nudge.model.annotations import WorkloadDefaults
from kube_nudge.model.references import SourceRef, rename_references
from kube_nudge.model.standins import format_stand_ins as format_snapshots
from kube_nudge.model.standins import parse_stand_ins as parse_snapshots
from kube_nudge.model.standins import restore_sources
from kube_nudge.strategies.snapshot.admission import restore_snapshot_template
from kube_nudge.strategies.snapshot.copies import (
    MAX_NAME,
    SNAPSHOT_FOR,
    SNAPSHOT_LABEL,
    SNAPSHOT_OF,
    copy_manifest,
    copy_name,
    is_copy_of,
)
from kube_nudge.strategies.snapshot.model import (
    ROLLED_TO,
    SNAPSHOT_MODEL,
    SNAPSHOTS,
    Baseline,
    format_baseline,
    parse_baseline,
)
from kube_nudge.strategies.snapshot.rollback import _onto_baseline

KEY = b"k" * 32
#: The workloads here use strategy snapshot: decided with what it adds to the model.
decide = partial(decide, strategy=SNAPSHOT_MODEL)
NS = "shop"
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
DB = SourceRef(SourceKind.SECRET, NS, "db")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
OWNER = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u1"}


def configmap(name: str = "app", **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "data": data}


def test_a_copy_name_is_the_source_plus_a_keyed_digest_of_its_data() -> None:
    state = source_state(configmap(LEVEL="info"))
    name = copy_name(KEY, APP, state, "u1")
    assert re.fullmatch(r"app-[0-9a-f]{12}", name)
    assert copy_name(KEY, APP, source_state(configmap(LEVEL="info")), "u1") == name  # stable
    assert copy_name(KEY, APP, source_state(configmap(LEVEL="debug")), "u1") != name
    assert copy_name(b"other-key" * 4, APP, state, "u1") != name  # keyed: no guessing values
    assert copy_name(KEY, SourceRef(SourceKind.SECRET, NS, "app"), state, "u1") != name
    assert copy_name(KEY, APP, state, "u2") != name  # each workload has its own


@given(st.from_regex(SUBDOMAIN, fullmatch=True).filter(lambda n: len(n) <= MAX_NAME))
def test_any_source_name_gives_a_valid_copy_name(source: str) -> None:
    ref = SourceRef(SourceKind.CONFIGMAP, NS, source)
    name = copy_name(KEY, ref, source_state(configmap()), "u1")
    assert len(name) <= MAX_NAME
    assert SUBDOMAIN.fullmatch(name), name


def test_the_mapping_round_trips_and_ignores_junk() -> None:
    mapping = {(SourceKind.CONFIGMAP, "app-1"): "app", (SourceKind.SECRET, "db-2"): "db"}
    text = format_snapshots(mapping)
    assert text == '{"configmap/app-1":"app","secret/db-2":"db"}'
    assert parse_snapshots(text) == mapping
    assert parse_snapshots("not json") == {}
    assert parse_snapshots('{"pod/x": "y", "configmap/": "z", "secret/a": 3}') == {}
    assert parse_snapshots(None) == {}


def pod_spec(cm: str, secret: str) -> dict[str, Any]:
    """Every reference form, naming `cm` and `secret`."""
    return {
        "volumes": [
            {"name": "v1", "configMap": {"name": cm}},
            {"name": "v2", "secret": {"secretName": secret}},
            {"name": "v3", "projected": {"sources": [
                {"configMap": {"name": cm, "items": [{"key": "LEVEL", "path": "l"}]}},
                {"secret": {"name": secret}},
            ]}},
        ],
        "containers": [{"name": "c", "env": [
            {"name": "L", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "LEVEL"}}},
            {"name": "P", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}},
        ], "envFrom": [{"configMapRef": {"name": cm}}, {"secretRef": {"name": secret}}]}],
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": secret}}]}],
        "ephemeralContainers": [{"name": "e", "env": [
            {"name": "L", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "LEVEL"}}},
        ]}],
    }  # fmt: skip


def test_renaming_reaches_every_reference_form_and_copies_the_spec() -> None:
    original = pod_spec("app", "db")
    names = {SourceKind.CONFIGMAP: "app-c0ffee", SourceKind.SECRET: "db-beef"}
    renamed = rename_references(original, lambda kind, name: names[kind])
    assert renamed == pod_spec("app-c0ffee", "db-beef")
    assert original == pod_spec("app", "db")  # untouched
    unchanged = rename_references(original, lambda kind, name: None)
    assert unchanged == original


def test_copies_consume_what_their_sources_would() -> None:
    copies = pod_spec("app-c0ffee", "db-beef")
    mapping = {(SourceKind.CONFIGMAP, "app-c0ffee"): "app", (SourceKind.SECRET, "db-beef"): "db"}
    assert restore_sources(discover(copies, NS), mapping) == discover(pod_spec("app", "db"), NS)


def workload(spec: dict[str, Any], *, template: dict[str, str], rolled_to: str | None) -> Any:
    annotations = {"kube-nudge.io/enabled": "true", "kube-nudge.io/strategy": "snapshot"}
    if rolled_to:
        annotations[ROLLED_TO] = rolled_to
    obj = {
        "metadata": {"namespace": NS, "uid": "u1", "annotations": annotations},
        "spec": {"template": {"metadata": {"annotations": template}, "spec": spec}},
    }
    defaults = WorkloadDefaults(strategies=("rollout", "snapshot"), extensions=(SNAPSHOT_MODEL,))
    view = project_workload(obj, ("spec", "template"), defaults)
    assert view is not None
    return view


def test_a_snapshot_template_hashes_like_its_sources_and_an_undo_is_left_alone() -> None:
    sources = {
        APP: project_source(configmap(LEVEL="info")),
        DB: project_source({"metadata": {"name": "db", "namespace": NS},
                            "data": {"password": "c2VjcmV0"}}),
    }  # fmt: skip
    plain = workload(pod_spec("app", "db"), template={}, rolled_to=None)
    desired = assess(plain, sources.get, KEY).desired
    mapping = {(SourceKind.CONFIGMAP, "app-new"): "app", (SourceKind.SECRET, "db-new"): "db"}
    current = workload(
        pod_spec("app-new", "db-new"), rolled_to=desired,
        template={CONFIG_HASH: desired, SNAPSHOTS: format_snapshots(mapping)},
    )  # fmt: skip
    assert current.consumed == plain.consumed
    assert current.stand_ins == frozenset(mapping)
    assert (
        decide(
            current,
            assess(current, sources.get, KEY),
            WorkloadMemory(),
            1e9,
        )
        == Noop()
    )

    # kubectl rollout undo: the template of an earlier snapshot comes back.
    old = {(SourceKind.CONFIGMAP, "app-old"): "app", (SourceKind.SECRET, "db-old"): "db"}
    undone = workload(
        pod_spec("app-old", "db-old"), rolled_to=desired,
        template={CONFIG_HASH: "v1-older", SNAPSHOTS: format_snapshots(old)},
    )  # fmt: skip
    assert undone.rolled_back
    decision = decide(undone, assess(undone, sources.get, KEY), WorkloadMemory(), 1e9)
    assert isinstance(decision, Hold)
    assert (decision.reason, decision.event_reason) == ("rolled-back", "ConfigRolledBack")
    # The next real change rolls forward again.
    sources[APP] = project_source(configmap(LEVEL="debug"))
    changed = decide(undone, assess(undone, sources.get, KEY), WorkloadMemory(), 1e9)
    assert not isinstance(changed, Hold | Noop)


def test_only_kube_nudges_copy_of_exactly_the_data_is_accepted() -> None:
    source = configmap(LEVEL="info")
    copy = copy_manifest(source, APP, "app-c0ffee", OWNER)
    assert copy["immutable"] is True and copy["data"] == {"LEVEL": "info"}
    assert copy["metadata"]["labels"][SNAPSHOT_LABEL] == "true"
    assert copy["metadata"]["labels"][SNAPSHOT_FOR] == "u1"
    assert copy["metadata"]["annotations"][SNAPSHOT_OF] == "configmap/app"
    assert copy["metadata"]["ownerReferences"] == [OWNER]
    assert is_copy_of(copy, APP, source, "u1")
    assert not is_copy_of(copy, APP, source, "u2")  # another workload's copy
    squatters = [
        {**copy, "data": {"LEVEL": "evil"}},
        {**copy, "immutable": False},
        {**copy, "metadata": {**copy["metadata"], "labels": {}}},
        {**copy, "metadata": {**copy["metadata"], "annotations": {SNAPSHOT_OF: "configmap/x"}}},
        {**copy, "type": "Opaque"},
    ]
    assert not any(is_copy_of(s, APP, source, "u1") for s in squatters)


def test_a_template_naming_its_sources_again_goes_back_onto_copies() -> None:
    sources = {
        APP: project_source(configmap(LEVEL="info")),
        DB: project_source({"metadata": {"name": "db", "namespace": NS},
                            "data": {"password": "eA=="}}),
    }  # fmt: skip
    desired = assess(
        workload(pod_spec("app", "db"), template={}, rolled_to=None), sources.get, KEY
    ).desired
    # A re-applied manifest: the sources' own names, kube-nudge's annotations kept.
    mapping = {(SourceKind.CONFIGMAP, "app-new"): "app", (SourceKind.SECRET, "db-new"): "db"}
    reapplied = workload(
        pod_spec("app", "db"), rolled_to=desired,
        template={CONFIG_HASH: desired, SNAPSHOTS: format_snapshots(mapping)},
    )  # fmt: skip
    decision = decide(
        reapplied,
        assess(reapplied, sources.get, KEY),
        WorkloadMemory(),
        1e9,
    )
    assert isinstance(decision, Apply) and decision.config_hash == desired
    assert decision.uncopied == (APP, DB)
    assert describe_apply(decision, {}, NS) == (
        "the template names configmap/app, secret/db directly again (a re-applied manifest?)"
    )
    # Before its first snapshot (only adopted), naming sources is normal: nothing to do.
    adopted = workload(pod_spec("app", "db"), rolled_to=None, template={CONFIG_HASH: desired})
    assert (
        decide(
            adopted,
            assess(adopted, sources.get, KEY),
            WorkloadMemory(),
            1e9,
        )
        == Noop()
    )


def deployment(spec: dict[str, Any], template_annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": NS, "uid": "u1", "annotations": {
            "kube-nudge.io/enabled": "true", "kube-nudge.io/strategy": "snapshot"}},
        "spec": {"template": {"metadata": {"annotations": template_annotations},
                              "spec": spec}},
    }  # fmt: skip


def test_the_webhook_keeps_a_reapplied_manifest_on_its_stored_or_current_copies() -> None:
    states = {APP: source_state(configmap(LEVEL="info")),
              DB: source_state({"data": {"password": "eA=="}})}  # fmt: skip
    copies = {ref: copy_name(KEY, ref, state, "u1") for ref, state in states.items()}
    mapping = {(ref.kind, name): ref.name for ref, name in copies.items()}
    kept = {CONFIG_HASH: "v1-abc", SNAPSHOTS: format_snapshots(mapping)}
    stored = deployment(pod_spec(copies[APP], copies[DB]), kept)
    defaults = WorkloadDefaults(strategies=("rollout", "snapshot"), extensions=(SNAPSHOT_MODEL,))
    path = ("spec", "template")

    def restore(new: dict[str, Any], old: dict[str, Any] | None) -> Any:
        return restore_snapshot_template(new, old, path, defaults, states.get, KEY)

    # kubectl apply keeps the annotations it never set; a replace drops them: both restored.
    for template_annotations in (kept, {}):
        reapplied = deployment(pod_spec("app", "db"), template_annotations)
        assert restore(reapplied, stored) == stored["spec"]["template"]
    assert restore(stored, stored) is None  # nothing to do
    # A source whose data changed since: the template keeps the copy it stores (its pods
    # run it), and the controller rolls once onto a new copy. A GitOps sync applies the
    # changed ConfigMap and then the unchanged Deployment: naming the source there rolled
    # the workload onto the source, then kube-nudge onto the copy (two rollouts).
    states[APP] = source_state(configmap(LEVEL="debug"))
    assert restore(deployment(pod_spec("app", "db"), kept), stored) == stored["spec"]["template"]
    # A copy the stored template doesn't name is never brought in for changed data (on
    # create, or a template already back on the source): such a source keeps its name.
    for old in (None, deployment(pod_spec("app", copies[DB]), kept)):
        partly = restore(deployment(pod_spec("app", "db"), kept), old)
        assert partly["spec"] == pod_spec("app", copies[DB])
    # Not a snapshot workload: never touched.
    rollout = deployment(pod_spec("app", "db"), kept)
    rollout["metadata"]["annotations"]["kube-nudge.io/strategy"] = "rollout"
    assert restore(rollout, stored) is None


def test_the_adopted_configs_copies_round_trip_and_junk_is_none() -> None:
    baseline = Baseline("v1-abc", {(SourceKind.CONFIGMAP, "app-1"): "app",
                                   (SourceKind.SECRET, "db-2"): "db"})  # fmt: skip
    text = format_baseline(baseline)
    assert text == '{"hash":"v1-abc","copies":{"configmap/app-1":"app","secret/db-2":"db"}}'
    assert parse_baseline(text) == baseline
    for junk in (None, "", "{", "[]", '{"copies":{"configmap/a-1":"a"}}',
                 '{"hash":"h","copies":{}}', '{"hash":"h","copies":{"pod/x":"y"}}'):  # fmt: skip
        assert parse_baseline(junk) is None, junk


def test_a_rollback_onto_the_adopted_config_points_every_reference_at_its_copies() -> None:
    """The adopted revision names the sources themselves: going back to it as it is would
    run whatever they hold now (the failed config). Its template goes back onto the copies
    made at adoption instead, recording them and that config's hash, as a rolled one."""
    baseline = Baseline("v1-abc", {(SourceKind.CONFIGMAP, "app-1"): "app",
                                   (SourceKind.SECRET, "db-2"): "db"})  # fmt: skip
    revision = {"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
                "spec": pod_spec("app", "db")}  # fmt: skip
    template = _onto_baseline(revision, baseline)
    assert template == {
        "metadata": {"labels": {"app": "web"}, "annotations": {
            "a": "b", CONFIG_HASH: "v1-abc", SNAPSHOTS: format_baseline_copies(baseline)}},
        "spec": pod_spec("app-1", "db-2"),
    }  # fmt: skip
    assert revision["spec"] == pod_spec("app", "db")  # untouched
    other = {"spec": pod_spec("other", "db")}  # a source the adopted config had no copy of
    assert _onto_baseline(other, baseline)["spec"] == pod_spec("other", "db-2")


def format_baseline_copies(baseline: Baseline) -> str:
    return format_snapshots(dict(baseline.copies))
