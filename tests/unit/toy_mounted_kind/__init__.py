"""A source kind known only once mounted, shaped like a Secrets Store CSI class, that
exists only in the tests: one row, registered through the table's public API
(``model.source_kinds.register_source_kind``), as tests/unit/toy_source_kind is.

A ``ToyVault`` (``toy.example/v1``) is named by a pod's ``csi`` volume of the toy driver
(``volumeAttributes.toyVault``), and its versions are never in an object of its own: the
toy driver writes one ``ToyVaultMount`` per pod it mounted one for, under its own field
names (``report.vault``, ``report.ready``, ``report.fetched[].path`` / ``.revision``).
No flag turns it on (its row names none): it is always kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kube_nudge.model.source_kinds import (
    CsiMount,
    MountStatuses,
    SourceKind,
    SourceKindRow,
    register_source_kind,
    unregister_source_kind,
)

__all__ = ["DRIVER", "VAULT", "VAULT_ROW", "mount_status", "registered", "vault_volume"]

DRIVER = "vault.toy.example"
VAULT = SourceKind.define("toyvault")
VAULT_ROW = SourceKindRow(
    VAULT, "toy.example", "v1", "toyvaults", "ToyVault",
    csi=CsiMount(DRIVER, "toyVault"),
    mounts=MountStatuses(
        "toy.example", "v1", "toyvaultmounts", "ToyVaultMount", section="report",
        source="vault", pod="pod", objects="fetched", mounted="ready",
        object_id="path", object_version="revision",
    ),
)  # fmt: skip


@contextmanager
def registered() -> Iterator[SourceKindRow]:
    """The toy kind, registered for the duration."""
    register_source_kind(VAULT_ROW)
    try:
        yield VAULT_ROW
    finally:
        unregister_source_kind(VAULT)


def vault_volume(vault: str, name: str = "secrets") -> dict[str, Any]:
    """A pod spec's volume the toy driver mounts ``vault`` into."""
    return {"name": name, "csi": {"driver": DRIVER, "volumeAttributes": {"toyVault": vault}}}


def mount_status(
    namespace: str, vault: str, pod: str, revisions: dict[str, str], rv: int
) -> dict[str, Any]:
    """The ToyVaultMount the toy driver writes once it mounted ``vault`` for ``pod``."""
    fetched = [{"path": path, "revision": rev} for path, rev in sorted(revisions.items())]
    return {
        "apiVersion": "toy.example/v1", "kind": "ToyVaultMount",
        "metadata": {"name": f"{pod}-{vault}", "namespace": namespace,
                     "resourceVersion": str(rv)},
        "report": {"vault": vault, "pod": pod, "ready": True, "fetched": fetched},
    }  # fmt: skip
