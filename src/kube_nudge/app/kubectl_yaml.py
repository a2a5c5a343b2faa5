"""YAML read as ``kubectl`` reads it: PyYAML's parser with the scalar rules of Go's YAML 1.1
reader kubectl uses (go-yaml v2, ``resolve.go``, through sigs.k8s.io/yaml's ``YAMLToJSON``),
then made JSON as kubectl makes it before sending.

What go-yaml v2 resolves differently from PyYAML's YAML 1.1 defaults, and so changes what the
API server gets:

- booleans: ``y``, ``Y``, ``n`` and ``N`` too (beside yes/no, on/off, true/false, each in
  three cases);
- integers as Go's ``strconv.ParseInt`` with base 0 (underscores dropped first): ``0o17``,
  ``0X1F`` and ``0B1`` too; a leading ``0`` is octal, and ``08`` is the float 8;
- floats as its ``yamlStyleFloat``: ``1e3`` and ``1.0e3`` too (PyYAML wants a dot and a
  signed exponent), ``1e999`` stays a string (out of range), ``+.nan`` is a string;
- strings where PyYAML sees something else: timestamps (go-yaml keeps them strings when
  decoding into ``interface{}``), base-60 numbers (``12:30``), ``=``.

As JSON, keys are strings as sigs.k8s.io/yaml writes them (``true``, ``31``, a float as Go's
``FormatFloat(f, 'g', -1, 32)``: ``1e+06``); a null key, and an infinite or NaN number
(which Go's ``encoding/json`` can't write), are refused as kubectl refuses them.
"""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import yaml

__all__ = ["BadKey", "KubectlLoader", "as_sent", "go_float_key"]

_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOL: Final = "tag:yaml.org,2002:bool"
_INT: Final = "tag:yaml.org,2002:int"
_FLOAT: Final = "tag:yaml.org,2002:float"
_NULL: Final = "tag:yaml.org,2002:null"
_MERGE: Final = "tag:yaml.org,2002:merge"
_INT64: Final = (-(2**63), 2**63)
_UINT64_MAX: Final = 2**64 - 1
_DIGITS: Final = "0123456789"
_SIGNS: Final = "-+"
# go-yaml v2 resolve.go, resolveMapList: the words it looks up.
_TRUE: Final = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE: Final = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_SPECIAL_FLOATS: Final = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
# ParseInt(plain, 0, 64) of the text without underscores, as patterns of the text with them.
_GO_INT: Final = re.compile(
    r"^[-+]?_*(?:0_*[bB]_*[01][01_]*|0_*[oO]_*[0-7][0-7_]*"
    r"|0_*[xX]_*[0-9a-fA-F][0-9a-fA-F_]*|0[0-7_]*|[1-9][0-9_]*)$"
)
# yamlStyleFloat of the text without underscores (a sign or a digit first), and ParseFloat of
# a text starting with '.' (no underscores there).
_GO_FLOAT: Final = re.compile(
    r"^(?:(?=[-+0-9])[-+]?_*(?:\.[0-9_]*[0-9][0-9_]*|[0-9][0-9_]*(?:\.[0-9_]*)?)"
    r"(?:[eE]_*[-+]?_*[0-9_]*[0-9][0-9_]*)?"
    r"|\.[0-9](?:_?[0-9])*(?:[eE][-+]?[0-9](?:_?[0-9])*)?)$"
)


class BadKey(yaml.constructor.ConstructorError):  # type: ignore[misc]
    """A null key (``~:``) or one that is a list or a mapping, which kubectl refuses
    (sigs.k8s.io/yaml: ``unsupported map key``; go-yaml: ``invalid map key``)."""


class KubectlLoader(_BASE):  # type: ignore[misc]
    """PyYAML's safe loader (its C parser where built), resolving plain scalars as go-yaml v2
    does: only its implicit types, in its order (a word, then an int, then a float); keys
    made strings as they are read, as sigs.k8s.io/yaml writes them (so ``on`` and ``1.0``
    stay two keys, ``"true"`` and ``"1"``, where Python's ``True == 1.0`` would merge them)."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[str, Any]:
        """The mapping, its keys as JSON's strings, in document order as go-yaml v2 reads
        it: a later key wins, and a ``<<`` merges its mapping (or a list of them, the
        earlier taking precedence) over the keys read so far, as any later key would."""
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                for merged in self._merged(value_node):
                    mapping.update(merged)
                continue
            key = self.construct_object(key_node, deep=True)
            if key is None or isinstance(key, list | dict):
                why = "a key that is null (~), a list or a mapping: quote it"
                raise BadKey(None, None, why, key_node.start_mark)
            mapping[_key(key)] = self.construct_object(value_node, deep=deep)
        return mapping

    def _merged(self, node: Any) -> list[dict[str, Any]]:
        """What a ``<<`` merges, in the order it is applied (go-yaml steps backwards
        through a list: its earlier mappings take precedence)."""
        if isinstance(node, yaml.MappingNode):
            return [self.construct_mapping(node, deep=True)]
        if isinstance(node, yaml.SequenceNode) and all(
            isinstance(item, yaml.MappingNode) for item in node.value
        ):
            return [self.construct_mapping(item, deep=True) for item in reversed(node.value)]
        raise yaml.constructor.ConstructorError(
            None, None, "<< merges a mapping or a list of mappings", node.start_mark
        )


def _words(words: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("^(?:" + "|".join(words) + ")$")


for _tag, _pattern, _first in (
    (_BOOL, _words((*_TRUE, *_FALSE)), "yYnNtTfFoO"),
    (_NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    (_FLOAT, _SPECIAL_FLOATS, ".+-"),
    (_MERGE, re.compile(r"^(?:<<)$"), "<"),
    (_INT, _GO_INT, _SIGNS + _DIGITS),
    (_FLOAT, _GO_FLOAT, _SIGNS + _DIGITS + "."),
):
    KubectlLoader.add_implicit_resolver(_tag, _pattern, list(_first))


def _bool(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> bool:
    return str(loader.construct_scalar(node)) in _TRUE


def _int(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> int | float | str:
    """ParseInt(text, 0, 64), then ParseUint, then a float (decimal only), else the text."""
    text = str(loader.construct_scalar(node))
    plain = text.replace("_", "")
    digits = plain.lstrip(_SIGNS)
    negative = plain.startswith("-")
    if len(digits) > 1 and digits[0] == "0" and digits[1] in _DIGITS:
        value = int(digits, 8)  # a leading 0: octal, as Go's base 0
    else:
        value = int(digits, 0)
    value = -value if negative else value
    if _INT64[0] <= value < _INT64[1] or (plain[0] not in _SIGNS and value <= _UINT64_MAX):
        return value
    return _float_of(text, plain) if digits.isdigit() else text


def _float(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> float | str:
    text = str(loader.construct_scalar(node))
    if _SPECIAL_FLOATS.match(text):
        lower = text.lower()
        return math.nan if "nan" in lower else (-math.inf if lower[0] == "-" else math.inf)
    # Go's ParseFloat takes an underscore between digits (``.1_2``), as its literals do.
    return _float_of(text, text.replace("_", ""))


def _float_of(text: str, plain: str) -> float | str:
    """ParseFloat: out of range is an error in Go, and go-yaml keeps the text."""
    value = float(plain)
    return text if math.isinf(value) else value


def _merge(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> str:
    """``<<`` as a value: the text (a key ``<<`` merges, as go-yaml's does)."""
    return str(loader.construct_scalar(node))


def _binary(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> str:
    """``!!binary``: the decoded bytes as a string (Go's ``string(bytes)``, which JSON then
    writes with U+FFFD for what is not UTF-8)."""
    text = str(loader.construct_scalar(node))
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None, None, "!!binary that is not base64", node.start_mark
        ) from None
    return data.decode("utf-8", "replace")


def _timestamp(loader: yaml.BaseLoader, node: yaml.ScalarNode) -> str:
    """``!!timestamp``: the text, as go-yaml keeps a timestamp in a JSON document; one that
    is no timestamp is refused, as kubectl refuses it."""
    text = str(loader.construct_scalar(node))
    if not yaml.constructor.SafeConstructor.timestamp_regexp.match(text):
        raise yaml.constructor.ConstructorError(
            None, None, "!!timestamp that is no timestamp", node.start_mark
        )
    return text


def _set(loader: KubectlLoader, node: yaml.MappingNode) -> dict[str, Any]:
    """``!!set``: a mapping whose values are null, as go-yaml reads it."""
    return loader.construct_mapping(node, deep=True)


def _untagged(loader: KubectlLoader, node: yaml.Node) -> Any:
    """A tag go-yaml doesn't know (``!custom``): the node as it is written, a scalar its
    text unresolved, as kubectl sends it."""
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return [loader.construct_object(item, deep=True) for item in node.value]
    return str(loader.construct_scalar(node))


_CONSTRUCTORS: Final[tuple[tuple[str | None, Any], ...]] = (
    (_BOOL, _bool), (_INT, _int), (_FLOAT, _float), (_MERGE, _merge),
    ("tag:yaml.org,2002:binary", _binary), ("tag:yaml.org,2002:timestamp", _timestamp),
    ("tag:yaml.org,2002:set", _set),
    (None, _untagged),  # any other tag
)  # fmt: skip
for _known, _constructor in _CONSTRUCTORS:
    KubectlLoader.add_constructor(_known, _constructor)


def as_sent(document: object) -> object:
    """``document`` (read by ``KubectlLoader``) as kubectl can send it: ``ValueError`` (one
    line, naming the field) for a number JSON can't hold, else ``document`` itself."""
    _check_finite(document, [])
    return document


def _check_finite(value: object, path: list[str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_finite(item, [*path, str(key)])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, [*path, f"[{index}]"])
    elif isinstance(value, float) and not math.isfinite(value):
        where = ".".join(path).replace(".[", "[") or "(the document)"
        raise ValueError(
            f"{where}: .inf or .nan, which JSON can't hold (kubectl refuses it): "
            "quote it for a string"
        )


def _key(key: object) -> str:
    """A key as sigs.k8s.io/yaml's ``convertToJSONableObject`` writes it."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return go_float_key(key)
    return str(key)


def go_float_key(value: float) -> str:
    """Go's ``strconv.FormatFloat(value, 'g', -1, 32)``, as sigs.k8s.io/yaml names a float
    key: the shortest digits of the float32, exponent form below 1e-4 and from 1e6."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1, single) < 0 else "0"
    for precision in range(1, 10):
        text = f"{single:.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    power = int(exponent)
    if power < -4 or power >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if power < 0:
        return f"{sign}0.{'0' * (-power - 1)}{digits}"
    whole, fraction = digits[: power + 1].ljust(power + 1, "0"), digits[power + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"
