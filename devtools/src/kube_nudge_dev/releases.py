"""The Kubernetes release the local cluster and the real node run: one pinned patch per
supported minor (the window is the product's: ``kube_nudge.model.kubeversion``).

Each release is built from its own wrapper module, ``gomod/kube-1.MINOR/`` (``go.mod`` and
``go.sum``), into a cache directory of its own, on first use. To pin a new patch: write that
directory's go.mod as the others are (``require k8s.io/kubernetes vX``, every staging module
of that release's go.mod replaced by its ``v0.MINOR.PATCH`` tag, the ``tool`` block), run
``go mod tidy`` in it, and change ``PINNED`` here.

Which release: ``--kube-version`` of ``kube-nudge-dev cluster`` and ``build``, else
``$KUBE_NUDGE_KUBE_VERSION`` (how the tests' fixture and ``make test-matrix`` choose one),
else the default, the newest that builds here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from kube_nudge.model.kubeversion import SUPPORTED_MINORS

#: The environment variable that picks the release (``1.34``, or a pinned ``v1.34.4``).
ENV: Final = "KUBE_NUDGE_KUBE_VERSION"

#: The pinned patch of each supported minor: the newest the Go module proxy serves.
PINNED: Final = {34: "v1.34.4", 35: "v1.35.4", 36: "v1.36.3", 37: "v1.37.2"}

#: The default: the newest patch of the newest minor that builds here.
DEFAULT_MINOR: Final = 37

# Go a release needs beyond the local toolchain, fetched by the go command (GOTOOLCHAIN).
_TOOLCHAINS: Final[dict[int, str]] = {}

_SPELLING = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")


class UnknownRelease(ValueError):
    """A version that is not one of the pinned releases; the message says which are."""


@dataclass(frozen=True, slots=True)
class KubeRelease:
    """One pinned Kubernetes release: what is built, from which wrapper module, with which Go."""

    minor: int
    version: str  # v1.MINOR.PATCH
    toolchain: str | None = None  # GOTOOLCHAIN for the build; None: the local Go

    @property
    def module(self) -> str:
        """Its wrapper module's directory under ``gomod/``."""
        return f"kube-1.{self.minor}"

    @property
    def is_default(self) -> bool:
        """Whether this is the release the dev cluster and CI run by default."""
        return self.minor == DEFAULT_MINOR


def release(minor: int) -> KubeRelease:
    """The pinned release of a supported ``minor``."""
    return KubeRelease(minor, PINNED[minor], _TOOLCHAINS.get(minor))


def parse_release(text: str) -> KubeRelease:
    """``1.34``, ``v1.34`` or the pinned ``v1.34.4`` → that release; anything else raises
    :class:`UnknownRelease` naming the choices."""
    match = _SPELLING.match(text.strip())
    minor = int(match.group(1)) if match else None
    if match is None or minor not in PINNED:
        raise UnknownRelease(
            f"{text!r} is not a supported Kubernetes minor: use one of {choices()}"
        )
    pinned = release(minor)
    if match.group(2) is not None and text.strip().lstrip("v") != pinned.version.lstrip("v"):
        raise UnknownRelease(
            f"{text!r}: only {pinned.version} of 1.{minor} is pinned; use 1.{minor} or "
            f"{pinned.version}"
        )
    return pinned


def choices() -> str:
    """The accepted minors, for messages and help: ``1.34, 1.35, 1.36, 1.37``."""
    return ", ".join(f"1.{minor}" for minor in SUPPORTED_MINORS)


def selected() -> KubeRelease:
    """``$KUBE_NUDGE_KUBE_VERSION``'s release, else the default."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return release(DEFAULT_MINOR)
    try:
        return parse_release(value)
    except UnknownRelease as exc:
        raise UnknownRelease(f"{ENV}={exc}") from None


def every() -> tuple[KubeRelease, ...]:
    """Every supported release, oldest first (what ``make test-matrix`` runs)."""
    return tuple(release(minor) for minor in SUPPORTED_MINORS)
