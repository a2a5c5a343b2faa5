"""Example-based tests of reference discovery and merging."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from kube_nudge.model.references import (
    Consumption,
    SourceKind,
    SourceRef,
    consume_all,
    discover,
    merge,
)

NS = "team"
CM = SourceKind.CONFIGMAP
SEC = SourceKind.SECRET


def cm(name: str, namespace: str = NS) -> SourceRef:
    return SourceRef(CM, namespace, name)


def secret(name: str, namespace: str = NS) -> SourceRef:
    return SourceRef(SEC, namespace, name)


def use(
    keys: set[str] | None = None,
    *,
    optional: bool = False,
    required: set[str] | None = None,
    via: tuple[str, ...],
    restart: Iterable[str] | None = (),
) -> Consumption:
    return Consumption(
        keys=None if keys is None else frozenset(keys),
        optional=optional,
        required_keys=frozenset(required or ()),
        via=via,
        restart_keys=None if restart is None else frozenset(restart),
    )


def container(name: str = "app", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **fields}


# --- SourceRef -------------------------------------------------------------------------


def test_source_ref_str_and_display() -> None:
    ref = secret("db")
    assert str(ref) == "secret/team/db"
    assert ref.display() == "secret/team/db"
    assert ref.display("team") == "secret/db"
    assert ref.display("other") == "secret/team/db"


def test_source_refs_sort_by_kind_namespace_name() -> None:
    refs = [secret("a"), cm("b", "z"), cm("b", "a"), cm("a", "z")]
    assert sorted(refs) == [cm("b", "a"), cm("a", "z"), cm("b", "z"), secret("a")]


# --- volumes ---------------------------------------------------------------------------


def test_configmap_volume_without_items_consumes_all_keys() -> None:
    spec = {"volumes": [{"name": "cfg", "configMap": {"name": "app"}}]}
    assert discover(spec, NS) == {cm("app"): use(via=("volume cfg",))}


def test_a_subpath_mount_marks_its_volume_never_refreshed() -> None:
    spec = {
        "volumes": [
            {"name": "cfg", "configMap": {"name": "app"}},
            {"name": "live", "configMap": {"name": "flags"}},
            {"name": "expr", "secret": {"secretName": "tls"}},
        ],
        "containers": [container(volumeMounts=[
            {"name": "cfg", "mountPath": "/etc/app.yaml", "subPath": "app.yaml"},
            {"name": "live", "mountPath": "/etc/flags"},
        ])],
        "initContainers": [container("init", volumeMounts=[
            {"name": "expr", "mountPath": "/tls", "subPathExpr": "$(POD_NAME)"},
        ])],
    }  # fmt: skip
    found = discover(spec, NS)
    assert found[cm("app")] == use(via=("volume cfg (subPath)",), restart=None)
    assert found[secret("tls")].via == ("volume expr (subPath) (init container)",)
    assert [ref.name for ref, u in found.items() if u.never_refreshed] == ["app", "tls"]
    assert not found[cm("flags")].never_refreshed  # a whole-volume mount refreshes


def test_restart_keys_are_those_only_a_restart_delivers() -> None:
    spec = {
        "volumes": [
            {"name": "live", "configMap": {"name": "app"}},
            {"name": "seed", "configMap": {"name": "seed", "items": [{"key": "s", "path": "s"}]}},
        ],
        "containers": [container(
            env=[{"name": "L", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "level"}}}],
            volumeMounts=[{"name": "live", "mountPath": "/etc/app"}],
        )],
        "initContainers": [container("init", volumeMounts=[{"name": "seed", "mountPath": "/s"}])],
    }  # fmt: skip
    found = discover(spec, NS)
    assert found[cm("app")].restart_keys == frozenset({"level"})
    assert found[cm("app")].needs_restart(["level", "port"]) == ["level"]
    assert found[cm("app")].needs_restart(["port"]) == []
    assert found[cm("seed")].via == ("volume seed (init container)",)
    assert found[cm("seed")].needs_restart(["s"]) == ["s"]


def test_env_consumers_are_never_refreshed() -> None:
    spec = {"containers": [container(envFrom=[{"configMapRef": {"name": "app"}}])]}
    assert discover(spec, NS)[cm("app")].never_refreshed


def test_configmap_volume_with_items_consumes_and_requires_listed_keys() -> None:
    items = [{"key": "a.yaml", "path": "a"}, {"key": "b.yaml", "path": "b"}]
    spec = {"volumes": [{"name": "cfg", "configMap": {"name": "app", "items": items}}]}
    expected = use({"a.yaml", "b.yaml"}, required={"a.yaml", "b.yaml"}, via=("volume cfg",))
    assert discover(spec, NS) == {cm("app"): expected}


def test_optional_volume_with_items_requires_nothing() -> None:
    source = {"name": "app", "optional": True, "items": [{"key": "a", "path": "a"}]}
    spec = {"volumes": [{"name": "cfg", "configMap": source}]}
    assert discover(spec, NS) == {cm("app"): use({"a"}, optional=True, via=("volume cfg",))}


def test_empty_items_list_consumes_all_keys() -> None:
    spec = {"volumes": [{"name": "cfg", "configMap": {"name": "app", "items": []}}]}
    assert discover(spec, NS) == {cm("app"): use(via=("volume cfg",))}


def test_secret_volume_uses_secret_name() -> None:
    spec = {
        "volumes": [
            {"name": "tls", "secret": {"secretName": "cert", "optional": False}},
            {"name": "wrong", "secret": {"name": "not-a-secret-volume-field"}},
        ]
    }
    assert discover(spec, NS) == {secret("cert"): use(via=("volume tls",))}


def test_secret_volume_with_items_and_optional() -> None:
    source = {"secretName": "cert", "optional": True, "items": [{"key": "tls.crt", "path": "c"}]}
    spec = {"volumes": [{"name": "tls", "secret": source}]}
    assert discover(spec, NS) == {
        secret("cert"): use({"tls.crt"}, optional=True, via=("volume tls",))
    }


def test_projected_volume_sources() -> None:
    spec = {
        "volumes": [
            {
                "name": "all",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "app", "items": [{"key": "x", "path": "x"}]}},
                        {"secret": {"name": "db", "optional": True}},
                        {"secret": {"secretName": "ignored-wrong-field"}},
                        {"downwardAPI": {"items": [{"path": "labels"}]}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            }
        ]
    }
    assert discover(spec, NS) == {
        cm("app"): use({"x"}, required={"x"}, via=("volume all",)),
        secret("db"): use(optional=True, via=("volume all",)),
    }


def test_non_config_volumes_are_ignored() -> None:
    spec = {
        "volumes": [
            {"name": "tmp", "emptyDir": {}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        ]
    }
    assert discover(spec, NS) == {}


# --- env and envFrom -------------------------------------------------------------------


def test_env_key_refs() -> None:
    env = [
        {"name": "A", "value": "literal"},
        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "b"}}},
        {
            "name": "C",
            "valueFrom": {"secretKeyRef": {"name": "db", "key": "password", "optional": True}},
        },
        {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    assert discover({"containers": [container(env=env)]}, NS) == {
        cm("app"): use({"b"}, required={"b"}, via=("env app",), restart={"b"}),
        secret("db"): use({"password"}, optional=True, via=("env app",), restart={"password"}),
    }


def test_env_from_refs_ignore_prefix() -> None:
    env_from = [
        {"configMapRef": {"name": "app"}, "prefix": "APP_"},
        {"secretRef": {"name": "db", "optional": True}},
    ]
    assert discover({"containers": [container(envFrom=env_from)]}, NS) == {
        cm("app"): use(via=("envFrom app",), restart=None),
        secret("db"): use(optional=True, via=("envFrom app",), restart=None),
    }


@pytest.mark.parametrize("field", ["containers", "initContainers", "ephemeralContainers"])
def test_every_container_list_is_searched(field: str) -> None:
    ref = {"configMapKeyRef": {"name": "app", "key": "k"}}
    spec = {field: [container("c1", env=[{"name": "K", "valueFrom": ref}])]}
    expected = use({"k"}, required={"k"}, via=("env c1",), restart={"k"})
    assert discover(spec, NS) == {cm("app"): expected}


def test_references_use_the_given_namespace() -> None:
    spec = {"volumes": [{"name": "v", "configMap": {"name": "app"}}]}
    assert list(discover(spec, "prod")) == [cm("app", "prod")]


def test_result_is_sorted_by_reference() -> None:
    spec = {
        "volumes": [
            {"name": "v1", "secret": {"secretName": "a"}},
            {"name": "v2", "configMap": {"name": "z"}},
            {"name": "v3", "configMap": {"name": "b"}},
        ]
    }
    assert list(discover(spec, NS)) == [cm("b"), cm("z"), secret("a")]


# --- merging ---------------------------------------------------------------------------


def test_merge_keys_union_and_required_only_from_non_optional() -> None:
    spec = {
        "containers": [
            container(
                "app",
                env=[
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a"}}},
                    {
                        "name": "B",
                        "valueFrom": {
                            "configMapKeyRef": {"name": "c", "key": "b", "optional": True}
                        },
                    },
                ],
            )
        ]
    }
    expected = use({"a", "b"}, required={"a"}, via=("env app",), restart={"a", "b"})
    assert discover(spec, NS) == {cm("c"): expected}


def test_merge_all_keys_wins_and_optional_is_and() -> None:
    spec = {
        "volumes": [
            {"name": "v", "configMap": {"name": "c", "items": [{"key": "a", "path": "a"}]}}
        ],
        "containers": [
            container("side", envFrom=[{"configMapRef": {"name": "c", "optional": True}}])
        ],
    }
    assert discover(spec, NS) == {
        cm("c"): use(None, required={"a"}, via=("envFrom side", "volume v"), restart=None)
    }


def test_all_optional_references_stay_optional() -> None:
    spec = {
        "volumes": [{"name": "v", "secret": {"secretName": "s", "optional": True}}],
        "initContainers": [
            container("init", envFrom=[{"secretRef": {"name": "s", "optional": True}}])
        ],
    }
    expected = use(optional=True, via=("envFrom init", "volume v"), restart=None)
    assert discover(spec, NS) == {secret("s"): expected}


def test_same_name_different_kind_are_different_sources() -> None:
    spec = {
        "volumes": [
            {"name": "v1", "configMap": {"name": "x"}},
            {"name": "v2", "secret": {"secretName": "x"}},
        ]
    }
    assert set(discover(spec, NS)) == {cm("x"), secret("x")}


def test_via_is_unique_and_sorted() -> None:
    spec = {
        "containers": [
            container("b", envFrom=[{"configMapRef": {"name": "c"}}]),
            container(
                "a", envFrom=[{"configMapRef": {"name": "c"}}, {"configMapRef": {"name": "c"}}]
            ),
        ]
    }
    assert discover(spec, NS)[cm("c")].via == ("envFrom a", "envFrom b")


def test_merge_function_combines_and_keeps_disjoint() -> None:
    found = {cm("a"): use({"k"}, required={"k"}, via=("env app",), restart={"k"})}
    extra = consume_all([cm("a"), secret("b"), secret("b")], "annotation")
    assert extra == {
        cm("a"): use(via=("annotation",), restart=None),
        secret("b"): use(via=("annotation",), restart=None),
    }
    assert merge(found, extra) == {
        cm("a"): use(None, required={"k"}, via=("annotation", "env app"), restart=None),
        secret("b"): use(via=("annotation",), restart=None),
    }
    assert merge({}, found) == found
    assert merge(found, {}) == found


def test_annotation_source_makes_optional_source_required() -> None:
    found = {cm("a"): use(optional=True, via=("envFrom app",))}
    merged = merge(found, consume_all([cm("a")], "annotation"))
    assert merged[cm("a")].optional is False


# --- malformed input -------------------------------------------------------------------

GOOD_VOLUME = {"name": "good", "configMap": {"name": "ok"}}


@pytest.mark.parametrize(
    "junk",
    [
        None,
        "volumes",
        42,
        [],
        {"name": "v"},
        {"name": "v", "configMap": None},
        {"name": "v", "configMap": "app"},
        {"name": "v", "configMap": ["app"]},
        {"name": "v", "configMap": {"name": ""}},
        {"name": "v", "configMap": {"name": None}},
        {"name": "v", "configMap": {"name": 7}},
        {"name": "v", "secret": {"secretName": ["x"]}},
        {"name": "v", "projected": None},
        {"name": "v", "projected": {"sources": "x"}},
        {"name": "v", "projected": {"sources": [None, 1, {"configMap": {}}]}},
    ],
)
def test_malformed_volumes_are_skipped_without_hiding_good_ones(junk: object) -> None:
    spec = {"volumes": [junk, GOOD_VOLUME]}
    assert discover(spec, NS) == {cm("ok"): use(via=("volume good",))}


@pytest.mark.parametrize(
    "env",
    [
        None,
        "x",
        {"valueFrom": None},
        {"valueFrom": []},
        {"valueFrom": {"configMapKeyRef": None}},
        {"valueFrom": {"configMapKeyRef": {"name": "c"}}},
        {"valueFrom": {"configMapKeyRef": {"name": "c", "key": ""}}},
        {"valueFrom": {"configMapKeyRef": {"name": "c", "key": 1}}},
        {"valueFrom": {"secretKeyRef": {"key": "k"}}},
    ],
)
def test_malformed_env_entries_are_skipped(env: object) -> None:
    good = {"name": "G", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    spec = {"containers": [container(env=[env, good])]}
    expected = use({"k"}, required={"k"}, via=("env app",), restart={"k"})
    assert discover(spec, NS) == {secret("s"): expected}


@pytest.mark.parametrize(
    "spec",
    [None, [], "spec", 3, {"volumes": {"name": "v"}}, {"containers": "app"}, {"containers": [[]]}],
)
def test_malformed_specs_give_nothing(spec: Any) -> None:
    assert discover(spec, NS) == {}


def test_non_bool_optional_is_not_optional() -> None:
    spec = {"volumes": [{"name": "v", "configMap": {"name": "c", "optional": "true"}}]}
    assert discover(spec, NS)[cm("c")].optional is False


def test_unusable_items_fall_back_to_all_keys() -> None:
    for items in ("a", {"key": "a"}, [None, {"key": ""}, {"path": "p"}]):
        spec = {"volumes": [{"name": "v", "configMap": {"name": "c", "items": items}}]}
        assert discover(spec, NS)[cm("c")].keys is None, items


def test_junk_items_entries_are_skipped_but_good_ones_kept() -> None:
    items = [None, {"key": 3}, {"key": "a", "path": "a"}]
    spec = {"volumes": [{"name": "v", "configMap": {"name": "c", "items": items}}]}
    assert discover(spec, NS)[cm("c")].keys == frozenset({"a"})


def test_unnamed_volume_and_container_still_count() -> None:
    spec = {
        "volumes": [{"configMap": {"name": "c"}}],
        "containers": [{"envFrom": [{"secretRef": {"name": "s"}}]}],
    }
    assert discover(spec, NS) == {
        cm("c"): use(via=("volume <unnamed>",)),
        secret("s"): use(via=("envFrom <unnamed>",), restart=None),
    }
