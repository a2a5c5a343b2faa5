"""Where a workload keeps its pod template, and how to read and patch it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "TemplatePath",
    "annotation_patch",
    "get_pod_spec",
    "get_template",
    "parse_path",
    "template_annotation",
]

TemplatePath = tuple[str, ...]
"""Field names from the object root to its pod template, e.g. `("spec", "template")`."""


def parse_path(text: str) -> TemplatePath:
    """`spec.template` -> `("spec", "template")`. Raises ValueError on empty segments."""
    segments = tuple(text.split("."))
    if not all(segments):
        raise ValueError(
            f"invalid pod template path {text[:100]!r}: "
            'want dot-separated field names such as "spec.template"'
        )
    return segments


def get_template(obj: Mapping[str, Any], path: TemplatePath) -> Mapping[str, Any] | None:
    """The pod template at `path`, or None if it is absent or not an object."""
    node: object = obj
    for segment in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(segment)
    return node if isinstance(node, Mapping) else None


def get_pod_spec(obj: Mapping[str, Any], path: TemplatePath) -> Mapping[str, Any] | None:
    """The template's `spec`, or None if it is absent or not an object."""
    spec = _child(get_template(obj, path), "spec")
    return spec if isinstance(spec, Mapping) else None


def template_annotation(obj: Mapping[str, Any], path: TemplatePath, name: str) -> str | None:
    """The value of annotation `name` on the pod template, or None if unset or not a string."""
    annotations = _child(_child(get_template(obj, path), "metadata"), "annotations")
    value = _child(annotations, name)
    return value if isinstance(value, str) else None


def annotation_patch(path: TemplatePath, name: str, value: str | None) -> dict[str, Any]:
    """A JSON merge patch setting (or, with None, removing) a pod template annotation."""
    patch: dict[str, Any] = {"metadata": {"annotations": {name: value}}}
    for segment in reversed(path):
        patch = {segment: patch}
    return patch


def _child(node: object, key: str) -> object:
    return node.get(key) if isinstance(node, Mapping) else None
