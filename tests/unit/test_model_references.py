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
    assert found[cm("app")] == use(
        {"app.yaml"}, via=("volume cfg (subPath)",), restart={"app.yaml"}
    )
    assert found[secret("tls")].via == ("volume expr (subPath) (init container)",)
    assert [ref.name for ref, u in found.items() if u.never_refreshed] == ["app", "tls"]
    assert not found[cm("flags")].never_refreshed  # a whole-volume mount refreshes


# --- what a container sees: subPath, items, mixed mounts ------------------------------


def mounted(
    volume: dict[str, Any], *mounts: dict[str, Any], where: str = "containers"
) -> dict[str, Any]:
    """A pod spec with ``volume`` and one container (in ``where``) per mount of it."""
    containers = [
        container(f"c{i}", volumeMounts=[{"name": volume["name"], "mountPath": "/m", **m}])
        for i, m in enumerate(mounts)
    ]
    return {"volumes": [volume], where: containers}


ITEMS = [
    {"key": "a.yaml", "path": "conf/a.yaml"},
    {"key": "b.yaml", "path": "conf/b.yaml"},
    {"key": "c", "path": "other/c"},
]


def test_a_subpath_mount_consumes_only_the_key_it_names() -> None:
    """Without `items` every key is a file named by the key: a subPath names one, and a
    change to any other key never reaches the container."""
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    found = discover(mounted(volume, {"subPath": "app.yaml"}), NS)
    assert found == {cm("app"): use({"app.yaml"}, via=("volume cfg (subPath)",),
                                    restart={"app.yaml"})}  # fmt: skip
    assert found[cm("app")].never_refreshed  # a subPath mount is read at start only


@pytest.mark.parametrize(
    ("sub_path", "keys"),
    [
        ("conf/a.yaml", {"a.yaml"}),  # a file an item path names
        ("conf", {"a.yaml", "b.yaml"}),  # a directory of item paths: every file under it
        ("./conf/", {"a.yaml", "b.yaml"}),  # the kubelet cleans the path
        ("other/c", {"c"}),
        ("a.yaml", set()),  # with items, a key's file is its path, not its name
        ("conf/a", set()),  # a prefix of a name is not a directory
        ("other/c/x", set()),  # below a file: nothing
        ("missing", set()),
        (".", {"a.yaml", "b.yaml", "c"}),  # the volume's root
        ("..data", {"a.yaml", "b.yaml", "c"}),  # the kubelet's own directory of every file
    ],
)
def test_a_subpath_mount_of_items_consumes_the_files_at_or_under_it(
    sub_path: str, keys: set[str]
) -> None:
    """With `items`, key -> path (nested paths make directories): a subPath exposes the
    file or directory at it. Every listed key is still required: the kubelet sets up the
    whole volume, and a missing one stops the pod from starting."""
    volume = {"name": "cfg", "configMap": {"name": "app", "items": ITEMS}}
    found = discover(mounted(volume, {"subPath": sub_path}), NS)
    assert found == {cm("app"): use(keys, required={"a.yaml", "b.yaml", "c"},
                                    via=("volume cfg (subPath)",), restart=keys)}  # fmt: skip


def test_a_nested_subpath_without_items_names_no_key() -> None:
    """Keys hold no `/`: without items, a nested subPath can't reach a key's file."""
    volume = {"name": "cfg", "secret": {"secretName": "tls", "optional": True}}
    found = discover(mounted(volume, {"subPath": "certs/tls.crt"}), NS)
    assert found == {secret("tls"): use(set(), optional=True, via=("volume cfg (subPath)",))}


def test_a_volume_mounted_whole_anywhere_consumes_every_key() -> None:
    """subPath in one container, the whole volume in another: every key is read, and only
    the subPath's key needs a restart to be seen."""
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    whole = discover(mounted(volume, {"subPath": "app.yaml"}, {}), NS)
    assert whole == {cm("app"): use(via=("volume cfg (subPath)",), restart={"app.yaml"})}
    with_items = {"name": "cfg", "configMap": {"name": "app", "items": ITEMS}}
    found = discover(mounted(with_items, {"subPath": "conf/b.yaml"}, {"mountPath": "/all"}), NS)
    assert found == {cm("app"): use({"a.yaml", "b.yaml", "c"}, required={"a.yaml", "b.yaml", "c"},
                                    via=("volume cfg (subPath)",), restart={"b.yaml"})}  # fmt: skip


def test_one_container_mounting_a_volume_twice_by_subpath_reads_both_paths() -> None:
    volume = {"name": "cfg", "configMap": {"name": "app", "items": ITEMS}}
    mounts = [{"name": "cfg", "mountPath": "/a", "subPath": "conf/a.yaml"},
              {"name": "cfg", "mountPath": "/c", "subPath": "other"}]  # fmt: skip
    spec = {"volumes": [volume], "containers": [container(volumeMounts=mounts)]}
    assert discover(spec, NS)[cm("app")].keys == frozenset({"a.yaml", "c"})
    mounts[1] = {"name": "cfg", "mountPath": "/all"}  # the same container, whole
    assert discover(spec, NS)[cm("app")].keys == frozenset({"a.yaml", "b.yaml", "c"})


def test_an_init_container_reads_its_subpath_at_start_only() -> None:
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    spec = mounted(volume, {"subPath": "seed"}, where="initContainers")
    spec["containers"] = [container(volumeMounts=[{"name": "cfg", "mountPath": "/etc/app"}])]
    assert discover(spec, NS) == {
        cm("app"): use(via=("volume cfg (subPath) (init container)",), restart={"seed"})
    }


def test_a_native_sidecar_sees_its_whole_volume_refreshed() -> None:
    """An init container with `restartPolicy: Always` runs beside the app (the reload agent
    may be one): the kubelet refreshes its whole mounts, as an app container's."""
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    spec = mounted(volume, {}, {"subPath": "seed"}, where="initContainers")
    spec["initContainers"][0]["restartPolicy"] = "Always"
    assert discover(spec, NS) == {
        cm("app"): use(via=("volume cfg (subPath) (init container)",), restart={"seed"})
    }
    spec["initContainers"][1]["restartPolicy"] = "Always"  # a subPath is never refreshed
    assert discover(spec, NS) == {cm("app"): use(via=("volume cfg (subPath)",), restart={"seed"})}


def test_a_subpath_expr_without_a_variable_is_a_subpath() -> None:
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    found = discover(mounted(volume, {"subPathExpr": "app.yaml"}), NS)
    assert found[cm("app")] == use({"app.yaml"}, via=("volume cfg (subPath)",),
                                   restart={"app.yaml"})  # fmt: skip


@pytest.mark.parametrize("expr", ["$(POD_NAME)", "conf/$(POD_NAME).yaml", "$$(X)"])
def test_a_subpath_expr_with_a_variable_reads_every_key(expr: str) -> None:
    """The kubelet expands `$(VAR)` from the container's env at start, which may come from
    the downward API or any source: which key it names can't be known from the template."""
    volume = {"name": "cfg", "configMap": {"name": "app", "items": ITEMS}}
    found = discover(mounted(volume, {"subPathExpr": expr}), NS)
    every = {"a.yaml", "b.yaml", "c"}
    assert found[cm("app")] == use(every, required=every, via=("volume cfg (subPath)",),
                                   restart=every)  # fmt: skip


def test_projected_sources_mounted_by_subpath_count_each_its_files() -> None:
    volume = {"name": "all", "projected": {"sources": [
        {"configMap": {"name": "app", "items": [{"key": "x", "path": "conf/x"},
                                                {"key": "y", "path": "y"}]}},
        {"secret": {"name": "db"}},  # every key a file named by the key
        {"downwardAPI": {"items": [{"path": "conf/labels"}]}},
    ]}}  # fmt: skip
    found = discover(mounted(volume, {"subPath": "conf"}), NS)
    assert found == {
        cm("app"): use({"x"}, required={"x", "y"}, via=("volume all (subPath)",), restart={"x"}),
        secret("db"): use({"conf"}, via=("volume all (subPath)",), restart={"conf"}),
    }


def test_a_volume_no_container_mounts_counts_whole() -> None:
    """A container injected at admission (a mesh's sidecar mounting user volumes) may read
    it; discovery can't see it, so it guesses towards consuming more."""
    volume = {"name": "cfg", "configMap": {"name": "app", "items": ITEMS}}
    spec = {"volumes": [volume], "containers": [container(volumeMounts=[
        {"name": "other", "mountPath": "/o", "subPath": "a.yaml"}])]}  # fmt: skip
    every = {"a.yaml", "b.yaml", "c"}
    assert discover(spec, NS) == {cm("app"): use(every, required=every, via=("volume cfg",))}


@pytest.mark.parametrize(
    "mount",
    [
        {"subPath": 7},
        {"subPath": "/etc/app.yaml"},  # absolute: the API refuses it
        {"subPath": "../app.yaml"},  # leaves the volume: the API refuses it
        {"subPathExpr": ["x"]},
        {"subPath": "a.yaml", "subPathExpr": "b.yaml"},  # both: the API refuses it
    ],
)
def test_an_unreadable_subpath_reads_every_key(mount: dict[str, Any]) -> None:
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    assert discover(mounted(volume, mount), NS)[cm("app")].keys is None


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
