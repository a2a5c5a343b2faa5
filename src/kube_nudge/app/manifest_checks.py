"""What the API server would refuse in the manifests ``plan`` reads, refused before planning:
a plan of objects that can't be applied would predict what never happens.

Two sources of rules, both the API's own:

- **The OpenAPI schema the control plane publishes** (``/openapi/v3/api/v1``) for ConfigMap,
  Secret and every object's ``metadata`` (ObjectMeta), kept in ``schemas/core-v1.json``
  (written by ``tools/api_schemas.py`` from the local control plane; an integration test
  holds it equal to what the API server serves) and evaluated by jsonschema: ``data`` and
  ``stringData`` values and annotation values are strings, ``data`` and ``binaryData``
  values are base64 (``format: byte``), fields have their types.
- **The validation the API server runs beyond its schema** (k8s.io/apimachinery's
  ``validation`` package: ``IsConfigMapKey``, ``IsQualifiedName``, ``IsValidLabelValue``,
  ``TotalAnnotationSizeLimitB``; k8s.io/kubernetes' ``ValidateConfigMap``,
  ``ValidateSecret``; each kind's name rule, in ``manifest_names``), which no schema
  carries: written here, rule for rule, each naming its Go function. Sizes are in bytes,
  as Go's ``len`` counts them.

Every message is one line naming the object and the field, never a value (a Secret's data
must not reach an error message). The object is named by where it came from (file and
document) by the caller.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Collection, Iterator, Mapping
from importlib import resources
from typing import Any, Final

from kube_nudge.app.manifest_names import dns1123_subdomain, name_problem
from kube_nudge.model import WorkloadDefaults
from kube_nudge.model.settings import mistyped_opt_in, parse_source, parse_workload
from kube_nudge.model.source_kinds import SourceKindRow, source_row_of

__all__ = ["annotation_problem", "object_problem"]

_SCHEMAS: Final = "core-v1.json"
#: The kinds whose schema the file holds (a source kind's other rules are its row's).
_KINDS: Final = {
    ("v1", "ConfigMap"): "io.k8s.api.core.v1.ConfigMap",
    ("v1", "Secret"): "io.k8s.api.core.v1.Secret",
}
_OBJECT_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# k8s.io/apimachinery/pkg/util/validation: validation.go.
_CONFIG_MAP_KEY_MAX: Final = 253
_CONFIG_MAP_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")
_QUALIFIED_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_NAME_MAX: Final = 63
_LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_VALUE_MAX: Final = 63
# k8s.io/apimachinery/pkg/api/validation/objectmeta.go: TotalAnnotationSizeLimitB, in bytes
# (Go's len of each key and value).
_ANNOTATIONS_MAX: Final = 256 * 1024
# k8s.io/kubernetes/pkg/apis/core/validation: ValidateConfigMap, ValidateSecret
# (MaxSecretSize, in bytes: a ConfigMap's data and decoded binaryData together, the same
# limit; a Secret's decoded data, stringData merged in).
_DATA_MAX: Final = 1024 * 1024


def object_problem(obj: Mapping[str, Any]) -> str | None:
    """What the API server would refuse in ``obj`` (one line: the field and why), or None.
    Only ConfigMaps and Secrets are checked whole; every object's metadata is checked."""
    kind = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    schema = _KINDS.get(kind)
    sent = _without_nulls(obj)
    for problem in _schema_problems(sent, schema or _OBJECT_META, schema):
        return problem
    # The schema held: the metadata is a mapping, and so is the data of a ConfigMap/Secret.
    for problem in _metadata_problems(sent.get("metadata") or {}, kind):
        return problem
    if schema is not None and (row := source_row_of(*kind)) is not None:
        for problem in _data_problems(sent, row):
            return problem
    return None


def annotation_problem(
    obj: Mapping[str, Any],
    namespace: str,
    defaults: WorkloadDefaults,
    workload_kinds: Collection[tuple[str, str]],
) -> str | None:
    """What ``kube-nudge run`` would say of ``obj``'s kube-nudge annotations in its Warning
    Event ``InvalidAnnotation`` (the same words), or None: a source's, an opted-in
    workload's, or the opt-in of one that meant to opt in (``enabled: "yes"``)."""
    kind = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    annotations = (obj.get("metadata") or {}).get("annotations")
    if (row := source_row_of(*kind)) is not None and row.holds_data:
        _, errors = parse_source(annotations, compat=defaults.compat)
    elif kind in workload_kinds:
        settings, errors = parse_workload(annotations, namespace, defaults)
        if not settings.enabled:
            errors = mistyped_opt_in(annotations, namespace, defaults)
    else:
        return None
    if not errors:
        return None
    return "; ".join(errors) + " (kube-nudge run refuses it: Warning Event InvalidAnnotation)"


# -- the published schema --------------------------------------------------------------------


@functools.cache
def _components() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("schemas", _SCHEMAS).read_text("utf-8")
    return {"schemas": json.loads(text)["schemas"]}


@functools.cache
def _validator(name: str) -> Any:
    """A jsonschema validator of components/schemas/``name`` (imported here: only ``plan``
    needs it, and ``run`` starts without it)."""
    from jsonschema import Draft7Validator, FormatChecker

    checker = FormatChecker(formats=())
    checker.checks("byte", raises=(binascii.Error, ValueError))(_is_base64)
    document = {"allOf": [{"$ref": f"#/components/schemas/{name}"}], "components": _components()}
    return Draft7Validator(document, format_checker=checker)


def _is_base64(value: object) -> bool:
    """``format: byte`` as the API server decodes it (Go's encoding/json: standard base64,
    padded; line breaks are skipped)."""
    if not isinstance(value, str):
        return True  # the type is checked on its own
    base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    return True


def _schema_problems(obj: Mapping[str, Any], name: str, whole: str | None) -> Iterator[str]:
    """The schema's first objection, in field order; ``whole`` None: only ``metadata``."""
    instance: Any = obj if whole is not None else obj.get("metadata", {})
    errors = sorted(_validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    for error in errors:
        path = [] if whole is not None else ["metadata"]
        yield f"{_field([*path, *error.absolute_path])}: {_why(error)}"


def _why(error: Any) -> str:
    """Why the schema refused a value, never the value."""
    if error.validator == "type":
        want = error.validator_value
        return f"want {_article(want)}, got {_type_of(error.instance)}"
    if error.validator == "format" and error.validator_value == "byte":
        return "not base64 (the API server decodes it as standard base64)"
    if error.validator == "required":
        return "a required field is missing"
    if error.validator == "enum":
        return "not one of the allowed values"
    return f"refused by the API's schema ({error.validator})"


def _article(want: object) -> str:
    names = {"string": "a string", "object": "a mapping", "array": "a list",
             "integer": "an integer", "number": "a number", "boolean": "a boolean"}  # fmt: skip
    if isinstance(want, list):
        return " or ".join(names.get(str(w), str(w)) for w in want)
    return names.get(str(want), str(want))


def _type_of(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean (quote it)"
    if isinstance(value, int | float):
        return "a number (quote it)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return "a string"


def _field(path: list[Any]) -> str:
    """``data.SIZE``, ``spec.items[2]``: keys with dots or slashes in brackets."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{json.dumps(str(part))}]"
    return text or "(the object)"


def _without_nulls(value: Any) -> Any:
    """``value`` as the API server gets it from ``kubectl apply``: null fields left out
    (unset), keys as strings (YAML's ``on:`` or ``1:`` are keys "true" and "1" in JSON)."""
    if isinstance(value, Mapping):
        return {_key(k): _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _key(key: object) -> str:
    return json.dumps(key) if isinstance(key, bool) else str(key)


# -- the validation beyond the schema -------------------------------------------------------


def _metadata_problems(metadata: Mapping[str, Any], kind: tuple[str, str]) -> Iterator[str]:
    """ObjectMeta's rules (ValidateObjectMeta): the name (by the kind's rule), annotation
    and label keys, label values, the annotations' total size in bytes."""
    name = metadata.get("name")
    if isinstance(name, str) and (problem := name_problem(*kind, name)) is not None:
        yield problem
    annotations = metadata.get("annotations")
    if isinstance(annotations, Mapping):
        for key in annotations:
            if not _qualified_name(str(key)):
                yield f"{_field(['metadata', 'annotations', key])}: not a valid key"
        size = sum(_bytes(k) + _bytes(v) for k, v in annotations.items())
        if size > _ANNOTATIONS_MAX:
            yield (
                f"metadata.annotations: {size} bytes (UTF-8, keys and values), more than "
                f"the API's {_ANNOTATIONS_MAX}: move the largest out of annotations"
            )
    labels = metadata.get("labels")
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            where = _field(["metadata", "labels", key])
            if not _qualified_name(str(key)):
                yield f"{where}: not a valid key"
            elif not (len(str(value)) <= _LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(str(value))):
                yield f"{where}: not a valid label value"


def _data_problems(obj: Mapping[str, Any], row: SourceKindRow) -> Iterator[str]:
    """ValidateConfigMap / ValidateSecret, by the kind's row: every key is a valid key
    (IsConfigMapKey), no key in two of its data fields (a ConfigMap's data and binaryData),
    the data at most 1 MiB (bytes as stored: base64 decoded; write-only text data, a
    Secret's stringData, replaces the data of its keys, as the API server merges it)."""
    merged = row.string_data is not None
    fields = tuple(f.name for f in row.data) + ((row.string_data,) if row.string_data else ())
    encoded_fields = {f.name for f in row.data if f.base64}
    seen: dict[str, str] = {}
    sizes: dict[str, int] = {}
    for field in fields:
        values = obj.get(field)
        if not isinstance(values, Mapping):
            continue
        for key, value in values.items():
            key = str(key)
            if (why := _config_map_key(key)) is not None:
                yield f"{_field([field, key])}: not a valid key: {why}"
            if not merged and key in seen:
                yield f"{_field([field, key])}: also in {seen[key]} (a key may be in only one)"
            seen.setdefault(key, field)
            sizes[key if merged else f"{field}/{key}"] = (
                _decoded_bytes(value) if field in encoded_fields else _bytes(value)
            )
    size = sum(sizes.values())
    if size > _DATA_MAX:
        yield (
            f"data: {size} bytes (as stored: UTF-8, base64 decoded), more than the API's "
            f"{_DATA_MAX}: split it, or mount it from elsewhere"
        )


def _bytes(value: object) -> int:
    """Go's ``len`` of a string: its UTF-8 bytes."""
    return len(str(value).encode("utf-8", "surrogatepass"))


def _decoded_bytes(value: object) -> int:
    """The bytes a base64 value (checked already: ``format: byte``) stands for."""
    text = str(value).replace("\r", "").replace("\n", "")
    return len(base64.b64decode(text, validate=True))


def _config_map_key(key: str) -> str | None:
    """IsConfigMapKey: why ``key`` is not a valid key of a ConfigMap or Secret, or None."""
    if len(key) > _CONFIG_MAP_KEY_MAX:
        return f"longer than {_CONFIG_MAP_KEY_MAX} characters"
    if not _CONFIG_MAP_KEY.fullmatch(key):
        return "only letters, digits, '-', '_' and '.'"
    if key in (".", ".."):
        return f"must not be {key!r}"
    if key.startswith(".."):
        return "must not start with '..'"
    return None


def _qualified_name(key: str) -> bool:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63."""
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and dns1123_subdomain(prefix)):
        return False
    return len(name) <= _QUALIFIED_NAME_MAX and bool(_QUALIFIED_NAME.fullmatch(name))
