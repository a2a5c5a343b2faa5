"""The part of the control plane's published OpenAPI schema that ``kube-nudge plan`` checks
manifests against (``kube_nudge/app/schemas/core-v1.json``): ConfigMap, Secret and ObjectMeta,
with every schema they refer to. ``tools/api_schemas.py`` writes it from the local control
plane; an integration test holds the committed file equal to what the API server serves."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["OPENAPI_PATH", "ROOTS", "SCHEMA_FILE", "closure", "document"]

OPENAPI_PATH = "/openapi/v3/api/v1"
ROOTS = (
    "io.k8s.api.core.v1.ConfigMap",
    "io.k8s.api.core.v1.Secret",
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
)
SCHEMA_FILE = Path(__file__).parents[3] / "src/kube_nudge/app/schemas/core-v1.json"
_PREFIX = "#/components/schemas/"


def closure(openapi: Mapping[str, Any], roots: tuple[str, ...] = ROOTS) -> dict[str, Any]:
    """The schemas named ``roots`` in an OpenAPI v3 document, and all they refer to."""
    schemas = openapi["components"]["schemas"]
    found: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found[name] = schemas[name]
        pending.extend(_refs(schemas[name]))
    return dict(sorted(found.items()))


def document(openapi: Mapping[str, Any], kubernetes: str) -> dict[str, Any]:
    """What the committed file holds: where it came from, and the schemas."""
    return {
        "source": {"kubernetes": kubernetes, "path": OPENAPI_PATH, "roots": list(ROOTS)},
        "schemas": closure(openapi),
    }


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            yield ref.removeprefix(_PREFIX)
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)
