"""Reading the manifests ``-f FILE|DIR|-`` names, as ``kubectl apply -f`` does: YAML or JSON,
several documents per file, ``kind: List`` (and ``*List``) unwrapped, a directory's
``.yaml``, ``.yml`` and ``.json`` files (with ``-R``, its subdirectories' too), ``-`` for
standard input. Exactly what ``helm template``, ``kustomize build`` or a manifests folder
gives.

Every problem is a ``ValueError`` of one line naming the file and the document, never a
value from it (a Secret's data must not reach an error message).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

__all__ = ["Manifest", "read_manifests"]

_SUFFIXES = (".yaml", ".yml", ".json")
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class Manifest:
    """One Kubernetes object of the input, and where it came from (for messages)."""

    obj: dict[str, Any]
    origin: str
    """``FILE`` document ``N``."""

    @property
    def kind(self) -> str:
        """Its ``kind``."""
        return str(self.obj.get("kind") or "")

    @property
    def api_version(self) -> str:
        """Its ``apiVersion``."""
        return str(self.obj.get("apiVersion") or "")

    @property
    def name(self) -> str:
        """Its ``metadata.name``."""
        return str((self.obj.get("metadata") or {}).get("name") or "")

    def namespace(self, default: str) -> str:
        """Its namespace, or ``default`` where it names none (as ``kubectl apply -n``)."""
        return str((self.obj.get("metadata") or {}).get("namespace") or default)


def read_manifests(
    paths: Sequence[str],
    *,
    recursive: bool = False,
    stdin: TextIO | None = None,
    flag: str = "-f",
) -> list[Manifest]:
    """Every object in ``paths``, in order; ``ValueError`` (one line, starting with
    ``flag``) on the first problem."""
    found: list[Manifest] = []
    for given in paths:
        for name, text in _texts(given, recursive, stdin or sys.stdin, flag):
            try:
                found.extend(_objects(name, text))
            except ValueError as exc:
                raise ValueError(f"{flag} {exc}") from None
    return found


def _texts(given: str, recursive: bool, stdin: TextIO, flag: str) -> Iterator[tuple[str, str]]:
    """(name, text) of each file ``flag given`` stands for."""
    if given == "-":
        yield "- (standard input)", stdin.read()
        return
    path = Path(given)
    if path.is_dir():
        pattern = "**/*" if recursive else "*"
        files = sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in _SUFFIXES)
        for file in files:
            yield from _texts(str(file), recursive, stdin, flag)
        return
    try:
        yield given, path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{flag} {given!r}: no such file or directory") from None
    except UnicodeDecodeError:
        raise ValueError(f"{flag} {given!r}: not text (UTF-8): want YAML or JSON") from None
    except OSError as exc:
        raise ValueError(f"{flag} {given!r}: {exc.strerror}") from None


def _objects(name: str, text: str) -> Iterator[Manifest]:
    try:
        documents = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(f"{name}: not valid YAML or JSON{where}") from None
    for index, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document, e.g. after a trailing ---
        yield from _unwrapped(document, f"{name} document {index}")


def _unwrapped(document: object, origin: str) -> Iterator[Manifest]:
    """The object, or the items of a ``List``, each checked to be a named object."""
    if not isinstance(document, dict):
        raise ValueError(f"{origin}: want a Kubernetes object (a mapping), got {_what(document)}")
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in document:
        items = document.get("items") or []
        if not isinstance(items, list):
            raise ValueError(f"{origin}: items of a {kind} must be a list")
        for number, item in enumerate(items, start=1):
            yield from _unwrapped(item, f"{origin} item {number}")
        return
    metadata = document.get("metadata")
    if not (isinstance(kind, str) and kind and isinstance(document.get("apiVersion"), str)):
        raise ValueError(f"{origin}: want apiVersion and kind")
    if not (isinstance(metadata, dict) and isinstance(metadata.get("name"), str)):
        raise ValueError(
            f"{origin}: a {kind} without metadata.name (generateName can't be planned)"
        )
    yield Manifest(document, origin)


def _what(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__
