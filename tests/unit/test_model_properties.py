"""Property-based tests of discovery, digests, hashing and parsing."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kube_nudge.model.annotations import (
    CONFIGMAPS,
    DEBOUNCE,
    ENABLED,
    EXCLUDE,
    MAX_ROLLOUTS,
    SECRETS,
    SHARE_WITH,
    STRATEGY,
    WorkloadDefaults,
)
from kube_nudge.model.digests import key_digests
from kube_nudge.model.hashing import (
    ABSENT,
    SourceState,
    canonical_encoding,
    config_hash,
    consumed_digests,
    source_state,
)
from kube_nudge.model.parsing import parse_duration
from kube_nudge.model.references import Consumption, SourceKind, SourceRef, discover, merge
from kube_nudge.model.settings import parse_source, parse_workload

NS = "team"
KEY = b"\x07" * 32
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ------------------------------------------------------------------------

VOCAB = [
    "volumes",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "env",
    "envFrom",
    "valueFrom",
    "configMapKeyRef",
    "secretKeyRef",
    "configMapRef",
    "secretRef",
    "configMap",
    "secret",
    "secretName",
    "projected",
    "sources",
    "items",
    "key",
    "path",
    "name",
    "optional",
    "prefix",
    "data",
    "binaryData",
]
NAMES = ["a", "b", "c"]
KEYS = ["k1", "k2", "k3", "k4"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from(["", *NAMES, *KEYS])
    | st.text(st.characters(), max_size=6)
)
junk: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(VOCAB) | st.text(max_size=4), children, max_size=6)
    ),
    max_leaves=40,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly `strategy`, sometimes (1 in 10) arbitrary junk in its place."""
    return st.integers(0, 9).flatmap(lambda i: junk if i == 0 else strategy)


def obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A JSON object with all of `fields`, or any subset of them, or junk."""
    full, some = st.fixed_dictionaries(fields), st.fixed_dictionaries({}, optional=fields)
    return st.integers(0, 9).flatmap(lambda i: junk if i == 0 else some if i < 3 else full)


def array(element: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return maybe(st.lists(element, min_size=1, max_size=3) | st.just([]))


name_st = maybe(st.sampled_from(NAMES))
optional_st = maybe(st.booleans())
items_st = array(obj(key=maybe(st.sampled_from(KEYS)), path=maybe(st.just("p"))))
source_fields = {"name": name_st, "items": items_st, "optional": optional_st}
key_ref_st = obj(name=name_st, key=maybe(st.sampled_from(KEYS)), optional=optional_st)
env_ref_st = obj(name=name_st, optional=optional_st)
mount_st = obj(
    name=name_st,
    mountPath=maybe(st.just("/m")),
    subPath=maybe(st.sampled_from(["", ".", "k1", "p", "p/q", "/abs", "../up"])),
    subPathExpr=maybe(st.sampled_from(["", "k2", "$(POD_NAME)"])),
)
container_st = obj(
    name=name_st,
    volumeMounts=array(mount_st),
    env=array(
        obj(name=name_st, valueFrom=obj(configMapKeyRef=key_ref_st, secretKeyRef=key_ref_st))
    ),
    envFrom=array(obj(configMapRef=env_ref_st, secretRef=env_ref_st, prefix=maybe(st.just("P_")))),
)
volume_st = obj(
    name=name_st,
    configMap=obj(**source_fields),
    secret=obj(secretName=name_st, items=items_st, optional=optional_st),
    projected=obj(sources=array(obj(configMap=obj(**source_fields), secret=obj(**source_fields)))),
)
shaped_spec: st.SearchStrategy[Any] = maybe(
    st.fixed_dictionaries(
        {},
        optional={
            "volumes": array(volume_st),
            "containers": array(container_st),
            "initContainers": array(container_st),
            "ephemeralContainers": array(container_st),
        },
    )
)
"""Pod specs of the right shape with junk at every level: reaches every branch of discover."""


@dataclass(frozen=True)
class Ref:
    """One well-formed reference, as the generator planned it."""

    kind: SourceKind
    name: str
    form: str  # volume, projected, env, envFrom
    keys: tuple[str, ...]  # empty = all keys
    optional: bool
    containers: str  # which container list env/envFrom go to


# The kinds a pod spec names by these forms (a CSI class: tests/unit/test_model_csi.py).
OBJECT_KINDS = (SourceKind.CONFIGMAP, SourceKind.SECRET)
refs_st = st.builds(
    Ref,
    kind=st.sampled_from(OBJECT_KINDS),
    name=st.sampled_from(NAMES),
    form=st.sampled_from(["volume", "projected", "env", "envFrom"]),
    keys=st.lists(st.sampled_from(KEYS), max_size=3, unique=True).map(tuple),
    optional=st.booleans(),
    containers=st.sampled_from(["containers", "initContainers", "ephemeralContainers"]),
)


def render(refs: list[Ref], start: int = 0) -> dict[str, Any]:
    """A pod spec with one volume or container per planned reference, numbered from `start`."""
    spec: dict[str, Any] = {"volumes": [], "containers": [], "initContainers": []}
    for i, ref in enumerate(refs, start):
        cm = ref.kind is SourceKind.CONFIGMAP
        items = [{"key": k, "path": f"p{j}"} for j, k in enumerate(ref.keys)]
        if ref.form in ("volume", "projected"):
            source: dict[str, Any] = {"optional": ref.optional}
            if ref.form == "volume":
                source["name" if cm else "secretName"] = ref.name
            else:
                source["name"] = ref.name
            if items:
                source["items"] = items
            field = "configMap" if cm else "secret"
            if ref.form == "volume":
                volume: dict[str, Any] = {"name": f"v{i}", field: source}
            else:
                sources = [{"downwardAPI": {}}, {field: source}]
                volume = {"name": f"v{i}", "projected": {"sources": sources}}
            spec["volumes"].append(volume)
        elif ref.form == "env":
            key = ref.keys[0] if ref.keys else "k1"
            key_ref = {"name": ref.name, "key": key, "optional": ref.optional}
            env = [
                {"name": "X", "valueFrom": {"configMapKeyRef" if cm else "secretKeyRef": key_ref}}
            ]
            spec.setdefault(ref.containers, []).append({"name": f"c{i}", "env": env})
        else:
            env_ref = {"name": ref.name, "optional": ref.optional}
            env_from = [{"configMapRef" if cm else "secretRef": env_ref, "prefix": "P_"}]
            spec.setdefault(ref.containers, []).append({"name": f"c{i}", "envFrom": env_from})
    return spec


def oracle(refs: list[Ref]) -> dict[SourceRef, Consumption]:
    """What discover() must return for render(refs), computed independently."""
    by_source: dict[SourceRef, list[tuple[Ref, int]]] = {}
    for i, ref in enumerate(refs):
        by_source.setdefault(SourceRef(ref.kind, NS, ref.name), []).append((ref, i))
    out = {}
    for source, uses in sorted(by_source.items()):
        key_sets: list[frozenset[str] | None] = []
        required: set[str] = set()
        via = set()
        restart: set[str] | None = set()  # env vars only: these volumes are never sub-pathed
        for ref, i in uses:
            if ref.form == "env":
                keys: frozenset[str] | None = frozenset({ref.keys[0] if ref.keys else "k1"})
                via.add(f"env c{i}")
                restart = None if restart is None or keys is None else restart | keys
            elif ref.form == "envFrom":
                keys = None
                via.add(f"envFrom c{i}")
                restart = None
            else:
                keys = frozenset(ref.keys) or None
                via.add(f"volume v{i}")
            key_sets.append(keys)
            if not ref.optional and keys is not None:
                required |= keys
        listed = [k for k in key_sets if k is not None]
        out[source] = Consumption(
            keys=None if len(listed) < len(key_sets) else frozenset(k for ks in listed for k in ks),
            optional=all(ref.optional for ref, _ in uses),
            required_keys=frozenset(required),
            via=tuple(sorted(via)),
            restart_keys=None if restart is None else frozenset(restart),
        )
    return out


def shuffled(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every list and every dict's key order shuffled."""
    if isinstance(value, list):
        items = [shuffled(v, rnd) for v in value]
        rnd.shuffle(items)
        return items
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: shuffled(value[k], rnd) for k in keys}
    return value


def with_junk(spec: dict[str, Any], extra: list[Any], rnd: random.Random) -> dict[str, Any]:
    """`spec` with junk entries inserted into its reference lists (not into `items`)."""
    spec = copy.deepcopy(spec)
    lists: list[list[Any]] = [spec["volumes"]]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        lists.append(spec.setdefault(field, []))
        for c in spec[field]:
            lists += [c[k] for k in ("env", "envFrom") if k in c]
    for v in spec["volumes"]:
        if "projected" in v:
            lists.append(v["projected"]["sources"])
    for item in extra:
        target = rnd.choice(lists)
        target.insert(rnd.randrange(len(target) + 1), item)
    return spec


data_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["x", "y", "z", ""]), max_size=4)
source_obj_st = st.none() | st.builds(lambda d: {"data": d}, data_st)


def states_for(objs: Mapping[SourceRef, Mapping[str, Any] | None]) -> dict[SourceRef, SourceState]:
    return {ref: source_state(obj) for ref, obj in objs.items()}


all_refs = [SourceRef(kind, NS, name) for kind in OBJECT_KINDS for name in NAMES]
source_objs_st = st.fixed_dictionaries({ref: source_obj_st for ref in all_refs})


# --- discovery -------------------------------------------------------------------------


@PROPS
@given(junk | shaped_spec)
def test_discover_is_total_and_deterministic(spec: Any) -> None:
    first = discover(spec, NS)
    again = discover(copy.deepcopy(spec), NS)
    assert list(first.items()) == list(again.items())
    for ref, use in first.items():
        assert ref.namespace == NS and ref.name
        # Listed keys stay required where no mount shows them: not `required <= keys`.
        assert use.keys is None or (use.restart_keys is not None and use.restart_keys <= use.keys)
        assert not (use.optional and use.required_keys)
        assert list(use.via) == sorted(set(use.via))


@PROPS
@given(shaped_spec, st.randoms())
def test_discover_ignores_order_even_of_junk(spec: Any, rnd: random.Random) -> None:
    assert discover(shuffled(spec, rnd), NS) == discover(spec, NS)


@PROPS
@given(st.lists(refs_st, max_size=8))
def test_discover_matches_oracle(refs: list[Ref]) -> None:
    assert discover(render(refs), NS) == oracle(refs)


@PROPS
@given(st.lists(refs_st, min_size=1, max_size=8), st.randoms())
def test_discover_is_order_independent(refs: list[Ref], rnd: random.Random) -> None:
    spec = render(refs)
    assert discover(shuffled(spec, rnd), NS) == discover(spec, NS)


@PROPS
@given(
    st.lists(refs_st, min_size=1, max_size=6), st.lists(junk, min_size=1, max_size=6), st.randoms()
)
def test_junk_never_hides_a_well_formed_reference(
    refs: list[Ref], extra: list[Any], rnd: random.Random
) -> None:
    expected = oracle(refs)
    found = discover(with_junk(render(refs), extra, rnd), NS)
    for ref, want in expected.items():
        got = found[ref]
        assert got.keys is None or (want.keys is not None and want.keys <= got.keys)
        assert want.required_keys <= got.required_keys
        assert got.optional <= want.optional
        assert set(want.via) <= set(got.via)


@PROPS
@given(st.lists(refs_st, max_size=6), st.lists(refs_st, max_size=6))
def test_merge_equals_discovering_both(left: list[Ref], right: list[Ref]) -> None:
    separately = merge(discover(render(left), NS), discover(render(right, len(left)), NS))
    assert separately == discover(render(left + right), NS)
    assert list(separately) == sorted(separately)


# --- what the kubelet projects into the containers ------------------------------------

FILE_KEYS = ["k1", "k2", "app.yaml", "x", "conf"]
"""Keys of the sources: without `items` each is a file of that name (`conf` too, which a
nested subPath then runs into)."""
ITEM_PATHS = ["k1", "app.yaml", "x", "y", "conf/k1", "conf/./app.yaml", "conf/d/x"]
SUB_PATHS = ["", ".", "k1", "app.yaml", "x", "x/y", "conf", "conf/", "./conf", "conf/k1",
             "conf/app.yaml", "conf/d", "conf/d/x/z", "nope"]  # fmt: skip
VARIABLE = "$(POD_NAME)"
Tree = dict[str, Any]
"""A volume's directory as the kubelet writes it: a file is the (source, key) it holds."""


@dataclass(frozen=True)
class Projection:
    """One ConfigMap or Secret a volume projects."""

    ref: SourceRef
    items: tuple[tuple[str, str], ...] | None  # (key, path); None: every key, by its name
    optional: bool

    def render(self, projected: bool) -> dict[str, Any]:
        name = "name" if projected or self.ref.kind is SourceKind.CONFIGMAP else "secretName"
        body: dict[str, Any] = {name: self.ref.name, "optional": self.optional}
        if self.items is not None:
            body["items"] = [{"key": key, "path": path} for key, path in self.items]
        return {"configMap" if self.ref.kind is SourceKind.CONFIGMAP else "secret": body}


@dataclass(frozen=True)
class Mount:
    volume: int
    field: str  # "", "subPath" or "subPathExpr"
    path: str


projection_st = st.builds(
    Projection,
    ref=st.builds(
        SourceRef, st.sampled_from(OBJECT_KINDS), st.just(NS), st.sampled_from(["a", "b"])
    ),
    items=st.none()
    | st.lists(
        st.tuples(st.sampled_from(FILE_KEYS), st.sampled_from(ITEM_PATHS)), min_size=1, max_size=3
    ).map(tuple),
    optional=st.booleans(),
)
volumes_st = st.lists(
    st.tuples(st.booleans(), st.lists(projection_st, min_size=1, max_size=2)).map(
        lambda pair: (pair[0], pair[1] if pair[0] else pair[1][:1])  # (projected, sources)
    ),
    min_size=1,
    max_size=3,
)


def mounts_st(volumes: int) -> st.SearchStrategy[list[tuple[str, list[Mount]]]]:
    """Containers (app, init or native sidecar) with their mounts of the volumes (some
    maybe unmounted)."""
    mount = st.builds(
        Mount,
        volume=st.integers(0, volumes - 1),
        field=st.sampled_from(["", "subPath", "subPathExpr"]),
        path=st.sampled_from([*SUB_PATHS, VARIABLE]),
    ).filter(lambda m: m.field == "subPathExpr" or m.path != VARIABLE)
    where = st.sampled_from(["containers", "initContainers", "sidecar"])  # a native sidecar
    box = st.tuples(where, st.lists(mount, min_size=1, max_size=3))
    return st.lists(box, max_size=3)


def pod(volumes: list[tuple[bool, list[Projection]]], boxes: list[tuple[str, list[Mount]]]) -> Any:
    spec: dict[str, Any] = {"volumes": [], "containers": [], "initContainers": []}
    for i, (projected, sources) in enumerate(volumes):
        if projected:
            rendered = [p.render(projected=True) for p in sources]
            spec["volumes"].append({"name": f"v{i}", "projected": {"sources": rendered}})
        else:
            spec["volumes"].append({"name": f"v{i}", **sources[0].render(projected=False)})
    for j, (where, mounts) in enumerate(boxes):
        rendered_mounts = [
            {
                "name": f"v{m.volume}",
                "mountPath": f"/m{k}",
                **({m.field: m.path} if m.field else {}),
            }
            for k, m in enumerate(mounts)
        ]
        box = {"name": f"c{j}", "volumeMounts": rendered_mounts}
        if where == "sidecar":
            box["restartPolicy"] = "Always"
        spec["initContainers" if where == "sidecar" else where].append(box)
    return spec


class Conflict(Exception):
    """Two files at one path, or a file where a directory must be."""


def kubelet_tree(
    sources: list[Projection], data: Mapping[SourceRef, frozenset[str]]
) -> Tree | None:
    """The volume's directory tree; None when the kubelet can't set it up (a listed key
    missing from a source that isn't optional)."""
    tree: Tree = {}
    for source in sources:
        present = data[source.ref]
        if source.items is None:
            files = [(key, key) for key in sorted(present)]
        else:
            if not source.optional and any(key not in present for key, _ in source.items):
                return None
            files = [(path, key) for key, path in source.items if key in present]
        for path, key in files:
            *dirs, name = PurePosixPath(path).parts
            node = tree
            for part in dirs:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise Conflict(path)
            if name in node:
                raise Conflict(path)
            node[name] = (source.ref, key)
    return tree


def files_below(node: Any) -> set[tuple[SourceRef, str]]:
    if isinstance(node, dict):
        return {f for child in node.values() for f in files_below(child)}
    return {node}


def seen(tree: Tree, path: str) -> set[tuple[SourceRef, str]]:
    """What a container finds at ``path`` in the volume ("": the whole volume)."""
    if VARIABLE in path:  # the variable may hold any path, "." (the whole volume) too
        return {f for each in SUB_PATHS for f in seen(tree, path.replace(VARIABLE, each))}
    node: Any = tree
    for part in PurePosixPath(path).parts:
        if not isinstance(node, dict) or part not in node:
            return set()  # a missing path: the kubelet mounts an empty directory
        node = node[part]
    return files_below(node)


@settings(PROPS, max_examples=300)
@given(volumes_st, st.data())
def test_discovery_reads_what_the_kubelet_projects(
    volumes: list[tuple[bool, list[Projection]]], data: st.DataObject
) -> None:
    """Per source, the keys discovery counts (resolved against the source's keys) are those
    whose file the kubelet puts at or under some container's mount, and the keys it says
    only a restart delivers those a subPath mount or an init container shows (a native
    sidecar runs beside the app: its whole mounts are refreshed). A volume no container
    mounts counts whole (a container injected at admission may mount it)."""
    boxes = data.draw(mounts_st(len(volumes)))
    refs = sorted({p.ref for _, sources in volumes for p in sources})
    keys = data.draw(st.fixed_dictionaries(
        {ref: st.frozensets(st.sampled_from(FILE_KEYS), min_size=2) for ref in refs}))  # fmt: skip
    found = discover(pod(volumes, boxes), NS)
    assert sorted(found) == refs
    try:
        trees = [kubelet_tree(sources, keys) for _, sources in volumes]
    except Conflict:
        assume(False)  # the API or the kubelet refuses it: nothing is projected
    missing = {ref for ref in refs if not found[ref].required_keys <= keys[ref]}
    assert bool(missing) == (None in trees)  # a hold for missing config iff no pod starts
    if None in trees:
        return
    mounts = [(where, m) for where, ms in boxes for m in ms]
    mounts += [("", Mount(i, "", "")) for i in range(len(volumes)) if i not in
               {m.volume for _, m in mounts}]  # fmt: skip
    visible: set[tuple[SourceRef, str]] = set()
    restart: set[tuple[SourceRef, str]] = set()
    for where, mount in mounts:
        tree = trees[mount.volume]
        assert tree is not None
        files = seen(tree, mount.path if mount.field else "")
        visible |= files
        if (mount.field and mount.path) or where == "initContainers":
            restart |= files
    for ref in refs:
        use = found[ref]
        counted = keys[ref] if use.keys is None else use.keys & keys[ref]
        frozen = keys[ref] if use.restart_keys is None else use.restart_keys & keys[ref]
        assert counted == {key for r, key in visible if r == ref}
        assert frozen == {key for r, key in restart if r == ref}


# --- digests ---------------------------------------------------------------------------


@PROPS
@given(junk)
def test_key_digests_is_total(obj: Any) -> None:
    digests = key_digests(obj)
    assert all(isinstance(k, str) and len(d) == 16 for k, d in digests.items())


@PROPS
@given(
    st.dictionaries(st.text(st.characters()), st.text(st.characters()), max_size=5),
    st.dictionaries(st.text(st.characters()), st.text(st.characters()), max_size=5),
)
def test_key_digests_covers_every_string_entry(
    data: dict[str, str], binary: dict[str, str]
) -> None:
    digests = key_digests({"data": data, "binaryData": binary})
    assert set(digests) == set(data) | set(binary)


# --- hashing ---------------------------------------------------------------------------


@PROPS
@given(st.lists(refs_st, max_size=6), source_objs_st, st.randoms())
def test_hash_ignores_all_ordering(
    refs: list[Ref], objs: dict[SourceRef, dict[str, Any] | None], rnd: random.Random
) -> None:
    spec = render(refs)
    states = states_for(objs)
    shuffled_states = states_for(shuffled(objs, rnd))
    expected = config_hash(KEY, discover(spec, NS), states)
    assert config_hash(KEY, discover(shuffled(spec, rnd), NS), shuffled_states) == expected


@PROPS
@given(st.lists(refs_st, min_size=1, max_size=6), source_objs_st, st.data())
def test_changing_a_consumed_value_changes_the_hash(
    refs: list[Ref], objs: dict[SourceRef, dict[str, Any] | None], data: st.DataObject
) -> None:
    consumed = discover(render(refs), NS)
    ref = data.draw(st.sampled_from(sorted(consumed)))
    use = consumed[ref]
    obj = objs[ref] or {"data": {}}
    key = data.draw(st.sampled_from(sorted(use.keys) if use.keys is not None else KEYS))
    before = config_hash(KEY, consumed, states_for({**objs, ref: obj}))
    changed = {"data": {**obj["data"], key: obj["data"].get(key, "") + "!"}}
    assert config_hash(KEY, consumed, states_for({**objs, ref: changed})) != before


@PROPS
@given(st.lists(refs_st, min_size=1, max_size=6), source_objs_st, st.data())
def test_unconsumed_values_do_not_change_the_hash(
    refs: list[Ref], objs: dict[SourceRef, dict[str, Any] | None], data: st.DataObject
) -> None:
    consumed = discover(render(refs), NS)
    listed = [r for r, use in consumed.items() if use.keys is not None and objs[r] is not None]
    unconsumed = [r for r in all_refs if r not in consumed]
    assume(listed or unconsumed)
    ref = data.draw(st.sampled_from(listed + unconsumed))
    obj = objs[ref] or {"data": {}}
    use = consumed.get(ref)
    free = [k for k in [*KEYS, "k5"] if use is None or use.keys is None or k not in use.keys]
    key = data.draw(st.sampled_from(free))
    before = config_hash(KEY, consumed, states_for({**objs, ref: obj}))
    edited = {"data": {**obj["data"], key: data.draw(st.text(max_size=3))}}
    assert config_hash(KEY, consumed, states_for({**objs, ref: edited})) == before


@PROPS
@given(
    st.lists(refs_st, min_size=1, max_size=6),
    source_objs_st,
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=32, max_size=32),
)
def test_hmac_keys_give_different_hashes(
    refs: list[Ref], objs: dict[SourceRef, dict[str, Any] | None], k1: bytes, k2: bytes
) -> None:
    assume(k1 != k2)
    consumed, states = discover(render(refs), NS), states_for(objs)
    assert config_hash(k1, consumed, states) != config_hash(k2, consumed, states)


def _view(
    consumed: Mapping[SourceRef, Consumption], states: Mapping[SourceRef, SourceState]
) -> list[tuple[SourceRef, bool, bool, dict[str, bytes | None]]]:
    """Everything the hash is documented to cover."""
    view = []
    for ref in sorted(consumed):
        state = states.get(ref, ABSENT)
        all_keys = consumed[ref].keys is None
        view.append((ref, state.present, all_keys, consumed_digests(consumed[ref], state)))
    return view


@PROPS
@given(
    st.lists(refs_st, max_size=4),
    source_objs_st,
    st.lists(refs_st, max_size=4),
    source_objs_st,
)
def test_encoding_is_injective_on_what_it_covers(
    refs1: list[Ref],
    objs1: dict[SourceRef, dict[str, Any] | None],
    refs2: list[Ref],
    objs2: dict[SourceRef, dict[str, Any] | None],
) -> None:
    c1, s1 = discover(render(refs1), NS), states_for(objs1)
    c2, s2 = discover(render(refs2), NS), states_for(objs2)
    same_encoding = canonical_encoding(c1, s1) == canonical_encoding(c2, s2)
    assert same_encoding == (_view(c1, s1) == _view(c2, s2))


# --- annotations -----------------------------------------------------------------------

ANNOTATIONS = [ENABLED, CONFIGMAPS, SECRETS, EXCLUDE, DEBOUNCE, MAX_ROLLOUTS, STRATEGY]
annotation_values = st.text(st.characters(), max_size=30) | st.sampled_from(
    ["true", "false", "a,b", "ns/a", "configmap/a", "2s", "3/5m", "rollout", "*"]
)


@PROPS
@given(st.dictionaries(st.sampled_from(ANNOTATIONS), annotation_values), st.booleans())
def test_parse_workload_is_total(annotations: dict[str, str], compat: bool) -> None:
    settings_, errors = parse_workload(annotations, NS, WorkloadDefaults(compat=compat))
    assert len(errors) <= len(annotations)
    assert all(e.split(" ", 1)[0] in annotations for e in errors)
    assert settings_.debounce is None or 0 <= settings_.debounce <= 3600
    assert 1 <= settings_.max_rollouts <= 1000
    assert 1 <= settings_.rollout_window <= 86400
    assert settings_.enabled == _true(annotations.get(ENABLED, ""))


def _true(value: str) -> bool:
    """Whether a boolean annotation's value means true (Go's strconv.ParseBool spellings, as
    README's Booleans paragraph lists them; anything else counts as unset)."""
    return value.strip() in {"true", "True", "TRUE", "t", "T", "1"}


@PROPS
@given(st.dictionaries(st.sampled_from([SHARE_WITH, "kube-nudge.io/ignore"]), annotation_values))
def test_parse_source_is_total(annotations: dict[str, str]) -> None:
    _, errors = parse_source(annotations)
    assert len(errors) <= len(annotations)


@PROPS
@given(
    st.lists(
        st.tuples(st.integers(0, 999), st.sampled_from(["h", "m", "s", "ms", "us", "ns"])),
        min_size=1,
        max_size=5,
    )
)
def test_parse_duration_sums_components(parts: list[tuple[int, str]]) -> None:
    scale = {"h": 3600 * 10**9, "m": 60 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
    expected_ns = sum(n * scale[unit] for n, unit in parts)
    text = "".join(f"{n}{unit}" for n, unit in parts)
    assert parse_duration(text) == expected_ns / 1e9


@PROPS
@given(st.text(st.characters(), max_size=20))
def test_parse_duration_raises_only_value_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        assert str(exc).startswith("invalid duration")
    else:
        assert abs(seconds) < 2**63 / 1e9
