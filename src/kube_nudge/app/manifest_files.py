"""Reading the manifests ``-f FILE|DIR|-`` names, as ``kubectl apply -f`` does: YAML or JSON,
several documents per file, ``kind: List`` (and ``*List``) unwrapped, a directory's
``.yaml``, ``.yml`` and ``.json`` files (with ``-R``, its subdirectories' too), ``-`` for
standard input. Exactly what ``helm template``, ``kustomize build`` or a manifests folder
gives.

YAML is read as kubectl reads it, Go's YAML 1.1 scalars included (``kubectl_yaml``: an
unquoted ``y`` is a boolean). What ``kubectl apply`` would refuse is refused here too,
before anything is planned: an input with no objects, the same object twice, an object the
API server would refuse (``manifest_checks``: its published schema and its validation), and
a Kustomization, which is rendered first (``kustomize build DIR | kube-nudge plan -f -``).

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

from kube_nudge.app.kubectl_yaml import BadKey, KubectlLoader, as_sent
from kube_nudge.app.manifest_checks import object_problem

__all__ = ["Manifest", "read_manifests"]

_SUFFIXES = (".yaml", ".yml", ".json")
#: The files ``kustomize build`` (``kubectl apply -k``) reads a folder from.
_KUSTOMIZATIONS = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})


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
    empty_ok: bool = False,
) -> list[Manifest]:
    """Every object in ``paths``, in order; ``ValueError`` (one line, starting with
    ``flag``) on the first problem, and when there is no object at all (unless
    ``empty_ok``: a base before the first manifests were written)."""
    found: list[Manifest] = []
    for given in paths:
        for name, text in _texts(given, recursive, stdin or sys.stdin, flag):
            try:
                found.extend(_objects(name, text))
            except ValueError as exc:
                raise ValueError(f"{flag} {exc}") from None
    if not found and not empty_ok:
        raise ValueError(
            f"{flag} {' '.join(paths)}: no objects passed to apply{_why_none(paths, recursive)}"
        )
    _refuse_duplicates(found, flag)
    return found


def _why_none(paths: Sequence[str], recursive: bool) -> str:
    """A hint when a folder given without -R holds only subfolders' manifests."""
    if recursive:
        return ""
    for given in paths:
        path = Path(given)
        if (
            given != "-"
            and path.is_dir()
            and any(p.is_file() and p.suffix in _SUFFIXES for p in path.glob("*/**/*"))
        ):
            return f" ({given} has manifests in subdirectories: -R reads them)"
    return ""


def _refuse_duplicates(found: Sequence[Manifest], flag: str) -> None:
    """The same object twice (kind, namespace, name): ``kubectl apply`` would apply both,
    the later winning; a plan of either one would be wrong about the other."""
    first: dict[tuple[str, str, str, str], str] = {}
    for manifest in found:
        metadata = manifest.obj.get("metadata") or {}
        group = manifest.api_version.rpartition("/")[0]
        key = (group, manifest.kind, str(metadata.get("namespace") or ""), manifest.name)
        if key in first:
            raise ValueError(
                f"{flag} {manifest.origin}: {manifest.kind} {manifest.name} is also in "
                f"{first[key]}: give each object once"
            )
        first[key] = manifest.origin


def _texts(given: str, recursive: bool, stdin: TextIO, flag: str) -> Iterator[tuple[str, str]]:
    """(name, text) of each file ``flag given`` stands for."""
    if given == "-":
        try:
            text = stdin.read()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            raise ValueError(f"{flag} -: cannot read standard input ({why})") from None
        yield "- (standard input)", text
        return
    path = Path(given)
    if path.is_dir():
        pattern = "**/*" if recursive else "*"
        files = sorted(p for p in path.glob(pattern) if p.is_file() and p.suffix in _SUFFIXES)
        for file in sorted(p for p in path.glob(pattern) if p.name in _KUSTOMIZATIONS):
            raise ValueError(_kustomization(flag, str(file), str(file.parent)))
        for file in files:
            yield from _texts(str(file), recursive, stdin, flag)
        return
    if path.name in _KUSTOMIZATIONS:
        raise ValueError(_kustomization(flag, given, str(path.parent)))
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
        documents = list(yaml.load_all(text, Loader=KubectlLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        why = f": {exc.problem}" if isinstance(exc, BadKey) else ""
        raise ValueError(f"{name}: not valid YAML or JSON{where}{why}") from None
    for index, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document, e.g. after a trailing ---
        origin = f"{name} document {index}"
        try:
            sent = as_sent(document)
        except ValueError as exc:
            raise ValueError(f"{origin}: {exc}") from None
        yield from _unwrapped(sent, origin)


def _kustomization(flag: str, where: str, folder: str) -> str:
    return (
        f"{flag} {where}: a Kustomization, not a manifest: render it first "
        f"(kustomize build {folder} | kube-nudge plan -f -)"
    )


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
    if kind == "Kustomization" and str(document["apiVersion"]).startswith("kustomize.config"):
        raise ValueError(_kustomization("", origin, "DIR").lstrip())
    if not (isinstance(metadata, dict) and isinstance(metadata.get("name"), str)
            and metadata["name"]):  # fmt: skip
        raise ValueError(
            f"{origin}: a {kind} without metadata.name (generateName can't be planned)"
        )
    problem = object_problem(document)
    if problem is not None:
        raise ValueError(f"{origin}: {kind} {metadata['name']}: {problem}")
    yield Manifest(document, origin)


def _what(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__
