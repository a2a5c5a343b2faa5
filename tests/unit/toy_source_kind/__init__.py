"""A source kind that exists only in the tests: one row, registered through the table's
public API (``model.source_kinds.register_source_kind``), as the toy strategy is.

A ``ToyMap`` (``toy.example/v1``) holds text ``data`` as a ConfigMap does, and a pod spec
names one where it would name a ConfigMap, under the toy's own field names: a ``toyMap``
volume or projected source, ``toyMapKeyRef`` and ``toyMapRef``. The API server serves no
such thing: it is for the tests of the pure decisions (discovery, hashing, hot's files,
the read-only commands' parsing), which must treat it as they treat a ConfigMap without
naming it anywhere in the product.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kube_nudge.model.source_kinds import (
    DataField,
    NameAt,
    SourceKind,
    SourceKindRow,
    register_source_kind,
    unregister_source_kind,
)

__all__ = ["TOY", "TOY_ROW", "as_toy", "registered"]

TOY = SourceKind.define("toymap")
TOY_ROW = SourceKindRow(
    TOY, "toy.example", "v1", "toymaps", "ToyMap", aliases=("tm",),
    data=(DataField("data", base64=False),),
    volume=NameAt("toyMap"), projected=NameAt("toyMap"),
    env_key="toyMapKeyRef", env_from="toyMapRef",
)  # fmt: skip

#: Where a pod spec names a ConfigMap, and where it names a ToyMap instead.
_FIELDS = {"configMap": "toyMap", "configMapKeyRef": "toyMapKeyRef", "configMapRef": "toyMapRef"}


@contextmanager
def registered() -> Iterator[SourceKindRow]:
    """The toy kind, registered for the duration."""
    register_source_kind(TOY_ROW)
    try:
        yield TOY_ROW
    finally:
        unregister_source_kind(TOY)


def as_toy(value: Any) -> Any:
    """``value`` (a pod spec, or any part of one) with every ConfigMap it names named as
    a ToyMap instead: the same reference, made to the toy kind."""
    if isinstance(value, Mapping):
        return {_FIELDS.get(key, key): as_toy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_toy(item) for item in value]
    return value
