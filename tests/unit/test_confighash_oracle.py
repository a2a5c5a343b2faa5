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

DEPLOYMENT = BUILTIN_KINDS[0]
NS, OTHER = "team", "elsewhere"
NAMES, KEYS = ["a", "b", "c"], ["k1", "k2", "k3"]
KEY = b"\x07" * 32
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Ref = tuple[str, str, str, tuple[str, ...]]
"""(kind, name, form, keys) of one reference a pod spec makes."""
refs_st = st.tuples(
    st.sampled_from(["configmap", "secret"]),
    st.sampled_from(NAMES),
    st.sampled_from(["volume", "projected", "env", "envFrom", "init env"]),
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True).map(tuple) | st.just(()),
)


def render(refs: list[Ref]) -> dict[str, Any]:
    """A pod spec making each reference, in its own volume or container."""
    spec: dict[str, Any] = {"volumes": [], "containers": [], "initContainers": []}
    for i, (kind, name, form, keys) in enumerate(refs):
        cm = kind == "configmap"
        items = [{"key": k, "path": f"p{j}"} for j, k in enumerate(keys)]
        if form == "volume":
            source = {"name" if cm else "secretName": name, **({"items": items} if items else {})}
            spec["volumes"].append({"name": f"v{i}", "configMap" if cm else "secret": source})
        elif form == "projected":
            source = {"name": name, **({"items": items} if items else {})}
            sources = [{"downwardAPI": {}}, {"configMap" if cm else "secret": source}]
            spec["volumes"].append({"name": f"v{i}", "projected": {"sources": sources}})
        elif form.endswith("envFrom"):
            env_from = [{"configMapRef" if cm else "secretRef": {"name": name}}]
            spec["containers"].append({"name": f"c{i}", "envFrom": env_from})
        else:
            ref = {"name": name, "key": keys[0] if keys else "k1"}
            env = [{"name": "X", "valueFrom": {"configMapKeyRef" if cm else "secretKeyRef": ref}}]
            where = "initContainers" if form.startswith("init") else "containers"
            spec[where].append({"name": f"c{i}", "env": env})
    return spec


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
