"""Example-based tests of the config hash and requirement checks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kube_nudge.model.digests import key_digests, value_digest
from kube_nudge.model.hashing import (
    ABSENT,
    SourceState,
    canonical_encoding,
    changed_keys,
    config_hash,
    consumed_digests,
    missing_requirements,
    source_state,
)
from kube_nudge.model.references import Consumption, SourceKind, SourceRef

KEY = b"k" * 32
NS = "team"
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
DB = SourceRef(SourceKind.SECRET, NS, "db")


def all_keys(optional: bool = False) -> Consumption:
    return Consumption(keys=None, optional=optional, required_keys=frozenset(), via=("v",))


def listed(*keys: str, optional: bool = False) -> Consumption:
    required = frozenset() if optional else frozenset(keys)
    return Consumption(frozenset(keys), optional, required, ("v",))


def state(**data: str) -> SourceState:
    return source_state({"data": data})


def h(consumed: Mapping[SourceRef, Consumption], states: Mapping[SourceRef, SourceState]) -> str:
    return config_hash(KEY, consumed, states)


# --- config_hash -----------------------------------------------------------------------


def test_hash_format() -> None:
    assert re.fullmatch(r"v1-[0-9a-f]{40}", h({APP: all_keys()}, {APP: state(a="1")}))


def test_hash_is_pinned() -> None:
    # The hash lands on pod templates: changing the encoding rolls every workload.
    consumed = {APP: all_keys(), DB: listed("password", "user")}
    states = {APP: state(a="1", b="2"), DB: state(password="cw==")}
    assert h(consumed, states) == h(dict(reversed(consumed.items())), states)
    assert h(consumed, states) == "v1-58f1200e08e73b52583e8e3c955e7cec093d659b"


def test_consumed_key_change_changes_hash() -> None:
    consumed = {APP: listed("a")}
    assert h(consumed, {APP: state(a="1", b="x")}) != h(consumed, {APP: state(a="2", b="x")})


def test_unconsumed_key_change_or_addition_keeps_hash() -> None:
    consumed = {APP: listed("a")}
    base = h(consumed, {APP: state(a="1", b="x")})
    assert h(consumed, {APP: state(a="1", b="y")}) == base
    assert h(consumed, {APP: state(a="1", b="x", c="new")}) == base
    assert h(consumed, {APP: state(a="1")}) == base


def test_all_keys_consumption_sees_additions_and_removals() -> None:
    consumed = {APP: all_keys()}
    base = h(consumed, {APP: state(a="1")})
    assert h(consumed, {APP: state(a="1", b="2")}) != base
    assert h(consumed, {APP: state()}) != base


def test_presence_is_hashed() -> None:
    consumed = {APP: all_keys(optional=True)}
    assert h(consumed, {APP: state()}) != h(consumed, {APP: ABSENT})


def test_listed_key_appearing_changes_hash() -> None:
    consumed = {APP: listed("a", optional=True)}
    assert h(consumed, {APP: state(b="1")}) != h(consumed, {APP: state(a="1", b="1")})


def test_missing_state_is_absent() -> None:
    consumed = {APP: all_keys(), DB: all_keys()}
    assert h(consumed, {APP: state(a="1")}) == h(consumed, {APP: state(a="1"), DB: ABSENT})


def test_sources_not_consumed_are_ignored() -> None:
    consumed = {APP: all_keys()}
    assert h(consumed, {APP: state(a="1")}) == h(consumed, {APP: state(a="1"), DB: state(x="1")})


def test_hmac_key_matters() -> None:
    consumed, states = {APP: all_keys()}, {APP: state(a="1")}
    assert config_hash(b"a" * 32, consumed, states) != config_hash(b"b" * 32, consumed, states)


def test_kind_namespace_and_name_are_hashed() -> None:
    refs = [
        APP,
        SourceRef(SourceKind.SECRET, NS, "app"),
        SourceRef(SourceKind.CONFIGMAP, "other", "app"),
        SourceRef(SourceKind.CONFIGMAP, NS, "app2"),
    ]
    assert len({h({ref: all_keys()}, {ref: state(a="1")}) for ref in refs}) == len(refs)


def test_field_boundaries_are_unambiguous() -> None:
    a = SourceRef(SourceKind.CONFIGMAP, "ab", "c")
    b = SourceRef(SourceKind.CONFIGMAP, "a", "bc")
    assert canonical_encoding({a: all_keys()}, {}) != canonical_encoding({b: all_keys()}, {})
    keys_a = canonical_encoding({APP: listed("ab", "c")}, {})
    keys_b = canonical_encoding({APP: listed("a", "bc")}, {})
    assert keys_a != keys_b


def test_all_keys_and_listed_keys_encode_differently() -> None:
    states = {APP: state(a="1")}
    assert h({APP: all_keys()}, states) != h({APP: listed("a")}, states)


def test_empty_consumption_hashes() -> None:
    assert h({}, {}) == h({}, {APP: state(a="1")})
    assert h({}, {}) != h({APP: all_keys()}, {})


# --- consumed_digests ------------------------------------------------------------------


def test_consumed_digests() -> None:
    present = state(b="2", a="1", c="3")
    assert consumed_digests(all_keys(), present) == {
        "a": value_digest("1"),
        "b": value_digest("2"),
        "c": value_digest("3"),
    }
    assert consumed_digests(listed("c", "z"), present) == {"c": value_digest("3"), "z": None}
    assert consumed_digests(all_keys(), ABSENT) == {}
    assert consumed_digests(listed("a"), ABSENT) == {"a": None}


def test_absent_state_digests_are_ignored() -> None:
    stale = SourceState(present=False, digests={"a": value_digest("1")})
    assert consumed_digests(all_keys(), stale) == {}
    assert h({APP: all_keys()}, {APP: stale}) == h({APP: all_keys()}, {APP: ABSENT})


# --- source_state ----------------------------------------------------------------------


def test_source_state() -> None:
    obj: dict[str, Any] = {"data": {"a": "1"}, "binaryData": {"b": "Mg=="}}
    assert source_state(obj) == SourceState(True, key_digests(obj))
    assert source_state(None) == ABSENT
    assert source_state({}).present is True


def test_source_state_repr_hides_digests() -> None:
    text = repr(source_state({"data": {"password": "hunter2"}}))
    assert text == "SourceState(present=True, keys=['password'])"


# --- missing_requirements --------------------------------------------------------------


def test_missing_non_optional_source() -> None:
    assert missing_requirements({APP: all_keys()}, {}) == ["configmap/team/app not found"]
    assert missing_requirements({APP: all_keys()}, {}, namespace=NS) == ["configmap/app not found"]


def test_missing_optional_source_is_fine() -> None:
    assert missing_requirements({APP: all_keys(optional=True)}, {APP: ABSENT}) == []
    assert missing_requirements({APP: listed("a", optional=True)}, {}) == []


def test_missing_required_key() -> None:
    problems = missing_requirements(
        {DB: listed("user", "password")}, {DB: state(user="dQ==")}, namespace=NS
    )
    assert problems == ["secret/db has no key 'password'"]


def test_optional_key_ref_may_be_absent() -> None:
    consumed = {APP: Consumption(frozenset({"a", "b"}), False, frozenset({"a"}), ("v",))}
    assert missing_requirements(consumed, {APP: state(a="1")}) == []
    assert missing_requirements(consumed, {APP: state(b="1")}) == [
        "configmap/team/app has no key 'a'"
    ]


def test_problems_are_sorted_and_never_show_values() -> None:
    other = SourceRef(SourceKind.SECRET, "shared", "tls")
    consumed = {
        DB: listed("password", "user"),
        APP: all_keys(),
        other: all_keys(),
    }
    states = {DB: state(other="c2VjcmV0LXZhbHVl")}
    problems = missing_requirements(consumed, states, namespace=NS)
    assert problems == [
        "configmap/app not found",
        "secret/db has no key 'password'",
        "secret/db has no key 'user'",
        "secret/shared/tls not found",
    ]
    assert not any("c2VjcmV0" in p for p in problems)


# --- changed_keys ----------------------------------------------------------------------


def test_changed_keys() -> None:
    consumed = {APP: all_keys(), DB: listed("password")}
    old = {APP: state(a="1", b="2", c="3"), DB: state(password="x", user="u")}
    new = {APP: state(a="1", b="changed", d="4"), DB: state(password="x", user="v")}
    assert changed_keys(consumed, old, new) == {APP: ["b", "c", "d"]}


def test_changed_keys_reports_appearing_source() -> None:
    consumed = {APP: all_keys(), DB: listed("password")}
    new = {APP: state(), DB: state(password="x")}
    assert changed_keys(consumed, {}, new) == {APP: [], DB: ["password"]}
    assert changed_keys(consumed, new, new) == {}
