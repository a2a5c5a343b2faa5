"""Confirmation by hash, the pure part: the kubelet's layout of ConfigMap, Secret and
projected volumes (``volume_files``), the agent's claim checked against the data delivered
(``check_claim``), and, by property, that the controller's hash of a layout is the agent's
hash of the same files laid out on disk the kubelet's way."""

from __future__ import annotations

import base64
import json
import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kube_nudge.agent.watch import dir_hash, directory_files, loaded_hash
from kube_nudge.agentwire import AGENT_KEY_SECRET, Claim, key_id, parse_claim
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.strategies.hot.claims import (
    NotReproducible,
    agent_dir_hash,
    agent_key,
    check_claim,
    claim_sources,
    volume_files,
)
from tests.agent_support import KEY, kubelet_write

NS = "team"
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
TLS = SourceRef(SourceKind.SECRET, NS, "tls")
OTHER_KEY = b"another-key-0123456789"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def configmap(data: dict[str, str], binary: dict[str, bytes] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"kind": "ConfigMap", "metadata": {"name": "app"}, "data": data}
    if binary:
        obj["binaryData"] = {k: b64(v) for k, v in binary.items()}
    return obj


def secret(data: dict[str, bytes]) -> dict[str, Any]:
    return {"kind": "Secret", "metadata": {"name": "tls"},
            "data": {k: b64(v) for k, v in data.items()}}  # fmt: skip


# The kubelet's layout ------------------------------------------------------------------


def test_a_configmap_volume_has_a_file_per_key_of_data_and_binary_data() -> None:
    volume = {"name": "cfg", "configMap": {"name": "app"}}
    sources = {APP: configmap({"app.conf": "port 80\n"}, {"logo.png": b"\x89PNG"})}
    assert volume_files(volume, NS, sources) == {"app.conf": b"port 80\n", "logo.png": b"\x89PNG"}


def test_items_put_only_the_listed_keys_at_their_paths() -> None:
    items = [{"key": "app.conf", "path": "conf.d//app.conf"}, {"key": "LEVEL", "path": "level"}]
    volume: dict[str, Any] = {"name": "cfg", "configMap": {"name": "app", "items": items}}
    sources = {APP: configmap({"app.conf": "x", "LEVEL": "info", "unused": "u"})}
    assert volume_files(volume, NS, sources) == {"conf.d/app.conf": b"x", "level": b"info"}
    # A listed key that isn't there: the kubelet refuses to update the volume ...
    missing = {APP: configmap({"app.conf": "x"})}
    with pytest.raises(NotReproducible, match="configmap/app has no key 'LEVEL'"):
        volume_files(volume, NS, missing)
    # ... unless the source is optional: then it leaves that one out.
    volume["configMap"]["optional"] = True
    assert volume_files(volume, NS, missing) == {"conf.d/app.conf": b"x"}


def test_a_secret_volume_decodes_its_data() -> None:
    volume = {"name": "tls", "secret": {"secretName": "tls"}}
    assert volume_files(volume, NS, {TLS: secret({"tls.key": b"\x00key"})}) == {
        "tls.key": b"\x00key"
    }
    with pytest.raises(NotReproducible, match=r"'tls\.key' is not base64"):
        volume_files(volume, NS, {TLS: {"data": {"tls.key": "not base64!"}}})


def test_a_source_that_does_not_exist_is_empty_only_when_optional() -> None:
    volume: dict[str, Any] = {"name": "cfg", "configMap": {"name": "app"}}
    with pytest.raises(NotReproducible, match="configmap/app doesn't exist"):
        volume_files(volume, NS, {APP: None})
    volume["configMap"]["optional"] = True
    assert volume_files(volume, NS, {APP: None}) == {}


def test_a_projected_volume_merges_its_sources_in_order() -> None:
    volume = {"name": "all", "projected": {"sources": [
        {"configMap": {"name": "app"}},
        {"secret": {"name": "tls", "items": [{"key": "tls.key", "path": "app.conf"}]}},
    ]}}  # fmt: skip
    sources = {APP: configmap({"app.conf": "cm", "b": "2"}), TLS: secret({"tls.key": b"s"})}
    assert volume_files(volume, NS, sources) == {"app.conf": b"s", "b": b"2"}  # later wins
    assert claim_sources(Claim("00000000", {"/etc/all": None}), _spec(volume, "/etc/all"), NS) == {
        APP, TLS,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("volume", "says"),
    [
        ({"name": "x", "emptyDir": {}}, "volume x is not a ConfigMap, Secret or projected"),
        ({"name": "x", "projected": {"sources": [{"downwardAPI": {"items": []}}]}},
         "volume x also projects downwardAPI, which only the kubelet knows"),
    ],
)  # fmt: skip
def test_what_only_the_kubelet_knows_is_not_reproduced(volume: dict[str, Any], says: str) -> None:
    with pytest.raises(NotReproducible, match=says):
        volume_files(volume, NS, {})


# The agent's claim, checked -------------------------------------------------------------


def _spec(volume: dict[str, Any], mount: str, **more: Any) -> dict[str, Any]:
    """An app and the agent beside it, both mounting ``volume`` at ``mount``."""
    return {
        "volumes": [volume],
        "containers": [
            {"name": "app",
             "volumeMounts": [{"name": volume["name"], "mountPath": mount, **more}]},
            {"name": "kube-nudge-agent",
             "volumeMounts": [{"name": volume["name"], "mountPath": mount, **more}]},
        ],
    }  # fmt: skip


def _agent_claim(root: Path, files: dict[str, bytes], key: bytes = KEY) -> Claim:
    """What the agent records after loading ``files`` laid out by the kubelet at ``root``."""
    kubelet_write(root, files)
    claim = parse_claim(loaded_hash((str(root),), key, key_id(key)))
    assert claim is not None
    return claim


VOLUME = {"name": "cfg", "configMap": {"name": "app"}}


def test_a_claim_of_the_data_delivered_is_confirmed(tmp_path: Path) -> None:
    sources = {APP: configmap({"app.conf": "port 81\n"})}
    claim = _agent_claim(tmp_path / "app", {"app.conf": b"port 81\n"})
    spec = _spec(VOLUME, str(tmp_path / "app"))
    assert claim_sources(claim, spec, NS) == {APP}
    assert check_claim(claim, spec, NS, KEY, sources) is None


def test_a_claim_of_old_data_a_wrong_key_or_no_config_volume_is_not(tmp_path: Path) -> None:
    delivered = {APP: configmap({"app.conf": "port 81\n"})}
    root = tmp_path / "app"
    spec = _spec(VOLUME, str(root))
    old = _agent_claim(root, {"app.conf": b"port 80\n"})
    assert check_claim(old, spec, NS, KEY, delivered) == (
        f"it loaded other data than delivered in {root}"
    )
    other_key = _agent_claim(root, {"app.conf": b"port 81\n"}, OTHER_KEY)
    assert check_claim(other_key, spec, NS, KEY, delivered) == (
        f"its agent hashes with key {key_id(OTHER_KEY)}, not {AGENT_KEY_SECRET}'s "
        f"({key_id(KEY)}): mount that Secret into the agent"
    )
    elsewhere = _spec(VOLUME, "/etc/other")
    assert check_claim(_agent_claim(root, {"app.conf": b"port 81\n"}), elsewhere, NS, KEY,
                       delivered) == f"{root}: no container mounts a volume there"  # fmt: skip
    by_subpath = _spec(VOLUME, str(root), subPath="conf")
    assert check_claim(_agent_claim(root, {"app.conf": b"port 81\n"}), by_subpath, NS, KEY,
                       delivered) == (
        f"{root}: volume cfg is mounted by subPath: never refreshed"
    )  # fmt: skip
    assert check_claim(None, spec, NS, KEY, delivered) == (
        "its kube-nudge.io/loaded-hash is missing or not of this version"
    )


def test_a_directory_below_the_mount_is_checked_against_its_files(tmp_path: Path) -> None:
    items = [{"key": "app.conf", "path": "conf.d/app.conf"}, {"key": "LEVEL", "path": "level"}]
    volume = {"name": "cfg", "configMap": {"name": "app", "items": items}}
    sources = {APP: configmap({"app.conf": "x", "LEVEL": "info"})}
    root = tmp_path / "app"
    kubelet_write(root, {"conf.d/app.conf": b"x", "level": b"info"})
    # The agent watches only conf.d, which the kubelet laid out inside the volume.
    watched = root / "conf.d"
    claim = parse_claim(loaded_hash((str(watched),), KEY, key_id(KEY)))
    assert claim is not None
    assert check_claim(claim, _spec(volume, str(root)), NS, KEY, sources) is None


@pytest.mark.parametrize(
    "value",
    [
        None, "", "ab" * 32, "{}", '{"dirs": {}, "key": "XYZ"}',
        '{"dirs": {"etc": null}, "key": "0123abcd"}',
        '{"dirs": {"/etc": "short"}, "key": "0123abcd"}',
        '{"dirs": {"/etc": null}, "key": "0123abcd", "more": 1}',
    ],
)  # fmt: skip
def test_a_claim_not_of_this_version_is_none(value: str | None) -> None:
    assert parse_claim(value) is None


def test_the_agent_key_comes_from_its_secret_as_the_agent_reads_the_file() -> None:
    assert agent_key({"data": {"key": b64(b"k" * 16 + b"\n")}}) == b"k" * 16
    with pytest.raises(NotReproducible, match=f"there is no Secret {AGENT_KEY_SECRET}"):
        agent_key(None)
    for data in ({}, {"key": b64(b"short")}, {"key": "%%%"}):
        with pytest.raises(NotReproducible, match="has no 'key' of 16 bytes or more"):
            agent_key({"data": data})


# By property: the controller's hash is the agent's ---------------------------------------

SEGMENT = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=8).filter(
    lambda s: not s.startswith("..") and s != "."
)
PATH = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)


def _no_file_is_a_directory(paths: list[str]) -> bool:
    return not any(other.startswith(path + "/") for path in paths for other in paths)


FILES = st.dictionaries(PATH, st.binary(max_size=64), max_size=6).filter(
    lambda files: _no_file_is_a_directory(list(files))
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILES)
def test_the_agents_hash_of_a_kubelet_layout_is_the_controllers(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "volume"
        kubelet_write(root, files)
        on_disk = directory_files(str(root))
        assert on_disk is not None
        assert dir_hash(KEY, on_disk) == agent_dir_hash(KEY, files)


KEYS = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=8).filter(
    lambda s: not s.startswith("..") and s != "."
)


@st.composite
def volumes(draw: st.DrawFn) -> tuple[dict[str, Any], dict[SourceRef, Any], SourceRef, str]:
    """A ConfigMap or Secret, a volume of it (all keys or some items, at nested paths),
    and one key it lays out."""
    kind = draw(st.sampled_from([SourceKind.CONFIGMAP, SourceKind.SECRET]))
    data = draw(st.dictionaries(KEYS, st.binary(min_size=1, max_size=32), min_size=1, max_size=5))
    ref = SourceRef(kind, NS, "src")
    if kind is SourceKind.CONFIGMAP:
        text = {k: v.hex() for k, v in data.items()}  # data is text; binaryData bytes
        split = draw(st.sets(st.sampled_from(sorted(text))))
        obj = configmap({k: v for k, v in text.items() if k not in split},
                        {k: bytes.fromhex(text[k]) for k in split})  # fmt: skip
        source: dict[str, Any] = {"name": "src"}
        wrapper = "configMap"
    else:
        obj = secret(data)
        source = {"secretName": "src"}
        wrapper = "secret"
    chosen = sorted(draw(st.sets(st.sampled_from(sorted(data)), min_size=1)))
    if draw(st.booleans()):
        paths = draw(st.lists(PATH, min_size=len(chosen), max_size=len(chosen), unique=True))
        assume(_no_file_is_a_directory(paths))
        source["items"] = [{"key": k, "path": p} for k, p in zip(chosen, paths, strict=True)]
    volume: dict[str, Any] = {"name": "v", wrapper: source}
    if draw(st.booleans()):
        volume = {"name": "v", "projected": {"sources": [{wrapper: {**source, "name": "src"}}]}}
        volume["projected"]["sources"][0][wrapper].pop("secretName", None)
    return volume, {ref: obj}, ref, chosen[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volumes())
def test_an_agent_that_loaded_the_delivered_layout_is_confirmed_and_an_older_one_is_not(
    case: tuple[dict[str, Any], dict[SourceRef, Any], SourceRef, str],
) -> None:
    volume, sources, ref, changed = case
    files = volume_files(volume, NS, sources)
    spec = _spec(volume, "/etc/app")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "app"
        kubelet_write(root, files)
        raw = json.loads(loaded_hash((str(root),), KEY, key_id(KEY)))
        claim = parse_claim(json.dumps({"dirs": {"/etc/app": raw["dirs"][str(root)]},
                                        "key": raw["key"]}))  # fmt: skip
    assert claim is not None and claim_sources(claim, spec, NS) == {ref}
    assert check_claim(claim, spec, NS, KEY, sources) is None
    # The source changes one key the volume lays out: the same claim is now old data.
    newer = json.loads(json.dumps(sources[ref]))
    for field in ("data", "binaryData"):
        if changed in newer.get(field, {}):
            value = base64.b64decode(newer[field][changed]) if field == "binaryData" or (
                ref.kind is SourceKind.SECRET) else newer[field][changed].encode()  # fmt: skip
            value += b"!"
            newer[field][changed] = value.decode() if field == "data" and (
                ref.kind is SourceKind.CONFIGMAP) else b64(value)  # fmt: skip
    assert check_claim(claim, spec, NS, KEY, {ref: newer}) == (
        "it loaded other data than delivered in /etc/app"
    )
    # And under another key it is no claim of the delivered data either.
    assert check_claim(Claim(key_id(OTHER_KEY), claim.dirs), spec, NS, KEY, sources) is not None
