"""Example-based tests of per-key digests."""

from __future__ import annotations

from typing import Any

import pytest

from kube_nudge.model.digests import DIGEST_SIZE, key_digests, value_digest


def test_every_key_of_data_and_binary_data_is_digested() -> None:
    digests = key_digests({"data": {"b": "2", "a": "1"}, "binaryData": {"c": "Mw=="}})
    assert list(digests) == ["a", "b", "c"]
    assert all(len(d) == DIGEST_SIZE for d in digests.values())
    assert digests["a"] == value_digest("1")
    assert digests["c"] == value_digest("Mw==", binary=True)


def test_equal_values_digest_equal_and_different_values_differ() -> None:
    digests = key_digests({"data": {"a": "same", "b": "same", "c": "other"}})
    assert digests["a"] == digests["b"]
    assert digests["a"] != digests["c"]


def test_data_and_binary_data_are_domain_separated() -> None:
    as_data = key_digests({"data": {"k": "aGVsbG8="}})
    as_binary = key_digests({"binaryData": {"k": "aGVsbG8="}})
    assert as_data["k"] != as_binary["k"]


def test_key_in_both_fields_depends_on_both_values() -> None:
    both = key_digests({"data": {"k": "x"}, "binaryData": {"k": "y"}})["k"]
    other = key_digests({"data": {"k": "x"}, "binaryData": {"k": "z"}})["k"]
    assert both not in (value_digest("x"), value_digest("y", binary=True))
    assert both != other


def test_secret_data_is_digested_as_text() -> None:
    secret = {"kind": "Secret", "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}
    assert key_digests(secret) == {"password": value_digest("aHVudGVyMg==")}


def test_empty_value_and_empty_key_are_kept() -> None:
    assert set(key_digests({"data": {"": "", "k": ""}})) == {"", "k"}


def test_lone_surrogates_do_not_raise() -> None:
    digests = key_digests({"data": {"\ud800": "\udfff"}})
    assert digests["\ud800"] != value_digest("\udffe")


@pytest.mark.parametrize(
    "obj",
    [
        None,
        "data",
        [],
        {},
        {"data": None},
        {"data": "k=v"},
        {"data": ["k"]},
        {"data": {"k": None}},
        {"data": {"k": 1}},
        {"data": {"k": {"v": "x"}}},
        {"binaryData": {"k": b"bytes"}},
        {"data": {1: "v"}},
    ],
)
def test_malformed_input_gives_no_digests(obj: Any) -> None:
    assert key_digests(obj) == {}


def test_malformed_entries_do_not_hide_good_ones() -> None:
    digests = key_digests({"data": {"bad": None, "good": "v", 2: "x"}, "binaryData": "junk"})
    assert digests == {"good": value_digest("v")}
