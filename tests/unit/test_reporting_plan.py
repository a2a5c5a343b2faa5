"""How ``kube-nudge plan`` reads an apply: what the input sets wins, the rest stays, and a
template changes only where the input sets something else."""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import replace

from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import CONFIG_HASH, SourceKind, SourceRef
from kube_nudge.reporting.plan import (
    api_object,
    applied,
    changes_template,
    offline_inputs,
    sort_objects,
)
from kube_nudge.reporting.planning import Change
from kube_nudge.reporting.sourcechanges import source_changes
from kube_nudge.strategies.registry import product_defaults
from kube_nudge_dev import manifests

PATH = ("spec", "template")


def live_of(given: dict[str, object]) -> dict[str, object]:
    """``given`` as the API server stores it: defaults filled in, kube-nudge's hash on the
    template."""
    live = copy.deepcopy(given)
    template = live["spec"]["template"]  # type: ignore[index]
    container = template["spec"]["containers"][0]
    container |= {
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
    }
    template["spec"]["restartPolicy"] = "Always"
    template["metadata"]["annotations"] = {CONFIG_HASH: "v1-abc"}
    return live


def test_defaults_and_kube_nudges_hash_are_no_change_and_stay() -> None:
    given = manifests.deployment("web")
    live = live_of(given)
    assert not changes_template(live, given, PATH)
    merged = applied(live, given)
    assert merged["spec"]["template"]["metadata"]["annotations"] == {CONFIG_HASH: "v1-abc"}


def test_a_field_the_input_sets_otherwise_changes_the_template() -> None:
    given = manifests.deployment("web")
    live = live_of(given)
    given["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.invalid/app:2"
    assert changes_template(live, given, PATH)
    merged = applied(live, given)
    assert merged["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.invalid/app:2"


def test_a_secrets_string_data_is_stored_as_data() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
              "data": {"a": "YQ=="}, "stringData": {"b": "bee"}}  # fmt: skip
    stored = api_object(secret, "team")
    assert stored["metadata"]["namespace"] == "team"
    assert stored["data"] == {"a": "YQ==", "b": base64.b64encode(b"bee").decode()}
    assert "stringData" not in stored and "stringData" in secret


def test_a_key_the_last_apply_set_goes_and_one_it_did_not_set_stays() -> None:
    """As kubectl apply's three-way merge: the last-applied configuration says which keys
    the applier owns."""
    live = manifests.configmap("app", {"A": "1", "B": "2", "SET_BY_HAND": "3"})
    last = manifests.configmap("app", {"A": "1", "B": "2"})
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(last)
    }
    given = manifests.configmap("app", {"A": "9"})
    assert applied(live, given)["data"] == {"A": "9", "SET_BY_HAND": "3"}
    del live["metadata"]["annotations"]  # created otherwise: nothing is the applier's to drop
    assert applied(live, given)["data"] == {"A": "9", "B": "2", "SET_BY_HAND": "3"}


def test_each_changed_source_with_its_key_names() -> None:
    """Created, deleted, changed (keys added, removed, changed), its annotations, or not
    readable: names only, and a source neither side changes is left out."""
    selector = {"kube-nudge.io/pod-selector": "app=legacy"}
    base = [manifests.configmap("a", {"K": "1", "GONE": "x", "SAME": "s"}),
            manifests.configmap("old", {"X": "1"}), manifests.configmap("same", {"S": "1"}),
            manifests.configmap("tagged", {"T": "1"})]  # fmt: skip
    head = [manifests.configmap("a", {"K": "2", "NEW": "n", "SAME": "s"}),
            manifests.secret("new", {"password": "p"}), manifests.configmap("same", {"S": "1"}),
            manifests.configmap("tagged", {"T": "1"}, selector)]  # fmt: skip
    defaults = product_defaults(compat=False, csi_secrets=False)
    before, after = (sort_objects(side, "default", BUILTIN_KINDS) for side in (base, head))
    inputs = offline_inputs(before, after, defaults=defaults)
    found = {
        s.ref.name: (s.change, s.added, s.removed, s.changed, s.annotations, s.consumers)
        for s in source_changes(inputs, [])
    }
    assert found == {
        "a": (Change.CHANGED, ("NEW",), ("GONE",), ("K",), False, ()),
        "new": (Change.CREATED, ("canary", "password"), (), (), False, ()),
        "old": (Change.DELETED, (), ("X",), (), False, ()),
        "tagged": (Change.CHANGED, (), (), (), True, ()),
    }
    new = SourceRef(SourceKind.SECRET, "default", "new")
    hidden = source_changes(replace(inputs, unreadable=frozenset({new})), [])
    assert [(s.change, s.added) for s in hidden if s.ref == new] == [(Change.UNREADABLE, ())]
