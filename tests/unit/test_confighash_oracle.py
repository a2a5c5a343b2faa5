"""The tests' hash oracle (`kube_nudge_dev.confighash`, written from the documents) and the
product's projection and assessment agree on generated workloads and sources.

The integration tests check the controller against the oracle on a real API server; this
is the fast check that the two readings of the documents have not drifted apart, on more
shapes than those tests build.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import SourceRef, assess, project_source, project_workload
from kube_nudge.strategies.registry import product_defaults
from kube_nudge_dev import confighash
from tests.unit.podspecs import KEYS, NAMES, Ref, refs_st, render

DEPLOYMENT = BUILTIN_KINDS[0]
NS, OTHER = "team", "elsewhere"
KEY = b"\x07" * 32
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Workload annotations README documents, well-formed and not.
WORKLOAD_ANNOTATIONS = [
    {},
    {"kube-nudge.io/exclude": "configmap/a,secret/b"},
    {"kube-nudge.io/exclude": "pod/x"},
    {"kube-nudge.io/configmaps": "b", "kube-nudge.io/secrets": f"c,{OTHER}/a"},
    {"kube-nudge.io/configmaps": f"{OTHER}/b,{OTHER}/c"},
    {"kube-nudge.io/secrets": "a,,b"},
    {"reloader.stakater.com/auto": "true"},
    {"wave.pusher.com/update-on-config-change": "true", "wave.pusher.com/extra-secrets": "c"},
    {"configmap.reloader.stakater.com/auto": "true"},
    {"secret.reloader.stakater.com/auto": "true"},
    {"configmap.reloader.stakater.com/reload": "a", "secret.reloader.stakater.com/reload": "b"},
    {"configmap.reloader.stakater.com/reload": "c", "reloader.stakater.com/auto": "true"},
]
#: Source annotations: ignore (both spellings), share-with (valid or not).
SOURCE_ANNOTATIONS = [
    {},
    {"kube-nudge.io/ignore": "true"},
    {"kube-nudge.io/ignore": "maybe"},
    {"reloader.stakater.com/ignore": "true"},
    {"kube-nudge.io/share-with": NS},
    {"kube-nudge.io/share-with": "*"},
    {"kube-nudge.io/share-with": "Not A Namespace!"},
]

values = st.sampled_from(["x", "y", "", "é"])
source_st = st.none() | st.fixed_dictionaries(
    {
        "data": st.dictionaries(st.sampled_from(KEYS), values, max_size=4),
        "binaryData": st.dictionaries(st.sampled_from(KEYS), st.just("eA=="), max_size=2),
        "metadata": st.fixed_dictionaries({"annotations": st.sampled_from(SOURCE_ANNOTATIONS)}),
    }
)
REFS = [
    (kind, ns, name) for kind in ("configmap", "secret") for ns in (NS, OTHER) for name in NAMES
]


def workload(refs: list[Ref], annotations: dict[str, str], copies: bool) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": render(refs)}
    if copies:  # the template names a copy standing for ConfigMap a
        template["spec"]["volumes"].append({"name": "copy", "configMap": {"name": "a-0123"}})
        template["metadata"] = {
            "annotations": {"kube-nudge.io/snapshots": '{"configmap/a-0123":"a"}'}
        }
    return {
        "metadata": {"namespace": NS, "annotations": annotations},
        "spec": {"template": template},
    }


def product_hash(obj: dict[str, Any], sources: dict[confighash.Ref, Any]) -> str:
    """What `kube-nudge status` and the reconciler compute: projection, then `assess`."""
    view = project_workload(obj, DEPLOYMENT.template_path, product_defaults(compat=True),
                            opted_out_too=True)  # fmt: skip
    assert view is not None
    views = {
        SourceRef(*ref): project_source(found, compat=True)  # type: ignore[arg-type]
        for ref, found in sources.items()
        if found is not None
    }
    return assess(view, views.get, KEY).desired


@PROPS
@given(
    st.lists(refs_st, max_size=6),
    st.sampled_from(WORKLOAD_ANNOTATIONS),
    st.booleans(),
    st.fixed_dictionaries(dict.fromkeys(REFS, source_st)),
)
def test_the_oracle_computes_the_products_hash(
    refs: list[Ref],
    annotations: dict[str, str],
    copies: bool,
    sources: dict[confighash.Ref, Any],
) -> None:
    obj = workload(refs, annotations, copies)
    uses = confighash.consumed(obj, DEPLOYMENT.template_path)
    oracle = confighash.config_hash(KEY, confighash.counted(obj, uses, sources), sources)
    assert oracle == product_hash(obj, sources)


def test_the_oracle_reads_each_documented_part() -> None:
    """A worked example: the keys a volume lists, a key an env var names, an extra source
    by annotation, an excluded one, an ignored one and another namespace's unshared one."""
    obj = workload([], {"kube-nudge.io/configmaps": f"b,{OTHER}/c",
                        "kube-nudge.io/exclude": "secret/a"}, copies=False)  # fmt: skip
    obj["spec"]["template"]["spec"] = {
        "volumes": [{"name": "v",
                     "configMap": {"name": "a", "items": [{"key": "k1", "path": "p"}]}}],
        "containers": [{"name": "c", "env": [
            {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "a", "key": "k2"}}},
            {"name": "S", "valueFrom": {"secretKeyRef": {"name": "a", "key": "k1"}}},
        ], "envFrom": [{"secretRef": {"name": "c"}}]}],
    }  # fmt: skip
    uses = confighash.consumed(obj, DEPLOYMENT.template_path)
    assert uses == {
        ("configmap", OTHER, "c"): None,
        ("configmap", NS, "a"): frozenset({"k1", "k2"}),
        ("configmap", NS, "b"): None,
        ("secret", NS, "c"): None,
    }
    ignored = {"metadata": {"annotations": {"kube-nudge.io/ignore": "true"}}}
    sources: dict[confighash.Ref, Any] = {
        ("configmap", OTHER, "c"): {"data": {}},
        ("secret", NS, "c"): ignored,
    }
    assert confighash.counted(obj, uses, sources) == {
        ("configmap", NS, "a"): frozenset({"k1", "k2"}),
        ("configmap", NS, "b"): None,
    }


def test_the_oracle_reads_what_mounts_show() -> None:
    """A worked example of what a volume's mounts show: a subPath naming a key's file, a
    directory of listed paths, a volume whole in one container and by subPath in another,
    a subPathExpr with a variable, and a volume nobody mounts."""
    listed = {"name": "a", "items": [{"key": "k1", "path": "conf/one"},
                                     {"key": "k2", "path": "conf/two"},
                                     {"key": "k3", "path": "three"}]}  # fmt: skip
    obj = workload([], {}, copies=False)
    obj["spec"]["template"]["spec"] = {
        "volumes": [
            {"name": "file", "configMap": {"name": "b"}},
            {"name": "dir", "configMap": listed},
            {"name": "mixed", "secret": {"secretName": "a"}},
            {"name": "expr", "secret": {"secretName": "b", "items": [{"key": "k1", "path": "p"}]}},
            {"name": "idle", "secret": {"secretName": "c"}},
        ],
        "containers": [{"name": "app", "volumeMounts": [
            {"name": "file", "mountPath": "/etc/k2", "subPath": "k2"},
            {"name": "dir", "mountPath": "/etc/conf", "subPath": "./conf/"},
            {"name": "mixed", "mountPath": "/etc/k3", "subPath": "k3"},
            {"name": "expr", "mountPath": "/etc/x", "subPathExpr": "$(POD_NAME)"},
        ]}, {"name": "side", "volumeMounts": [{"name": "mixed", "mountPath": "/all"}]}],
    }  # fmt: skip
    assert confighash.consumed(obj, DEPLOYMENT.template_path) == {
        ("configmap", NS, "a"): frozenset({"k1", "k2"}),
        ("configmap", NS, "b"): frozenset({"k2"}),
        ("secret", NS, "a"): None,
        ("secret", NS, "b"): frozenset({"k1"}),
        ("secret", NS, "c"): None,
    }
