"""The Kubernetes minors kube-nudge supports, and what to say of a server's version.

The one place the support window is declared: the chart's ``kubeVersion``, the dev tools'
pinned releases (``kube_nudge_dev.releases``), ``make test-matrix`` and
docs/compatibility.md all follow it (tests/unit/test_model_kubeversion.py checks each).
The window is the newest minors whose pinned patch release builds and passes the
compatibility suite here. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "NEWEST",
    "OLDEST",
    "SUPPORTED_MINORS",
    "ServerVersion",
    "parse_server_version",
    "support_window",
    "version_warning",
]

#: The supported minors of Kubernetes 1.x, oldest first.
SUPPORTED_MINORS: Final = (34, 35, 36, 37)
OLDEST: Final = SUPPORTED_MINORS[0]
NEWEST: Final = SUPPORTED_MINORS[-1]

# Managed clusters stamp suffixes: minor "35+" (GKE, EKS), gitVersion "v1.35.4-eks-1a2b3c".
_GIT_VERSION = re.compile(r"^v?(\d+)\.(\d+)")
_LEADING_DIGITS = re.compile(r"^(\d+)")


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """What an API server's ``/version`` says: its major and minor, and its gitVersion."""

    major: int
    minor: int
    git_version: str


def support_window() -> str:
    """The window as users read it: ``1.34 to 1.37``."""
    return f"1.{OLDEST} to 1.{NEWEST}"


def parse_server_version(body: Mapping[str, object]) -> ServerVersion | None:
    """The version in a ``/version`` answer, or None when it names none that parses."""
    git_version = str(body.get("gitVersion", ""))
    major = _leading_int(body.get("major"))
    minor = _leading_int(body.get("minor"))
    if major is None or minor is None:
        match = _GIT_VERSION.match(git_version)
        if match is None:
            return None
        major, minor = int(match.group(1)), int(match.group(2))
    return ServerVersion(major, minor, git_version or f"v{major}.{minor}")


def version_warning(version: ServerVersion | None) -> str | None:
    """The one Warning line for a server outside the window (or of no known version);
    None inside it."""
    window = support_window()
    if version is None:
        return f"the API server's version is unknown; kube-nudge supports Kubernetes {window}"
    if version.major == 1 and OLDEST <= version.minor <= NEWEST:
        return None
    side = "older" if (version.major, version.minor) < (1, OLDEST) else "newer"
    return (
        f"Kubernetes {version.git_version} is {side} than the versions kube-nudge supports "
        f"({window}): it runs, but features may be missing or behave differently"
    )


def _leading_int(value: object) -> int | None:
    match = _LEADING_DIGITS.match(str(value)) if value is not None else None
    return int(match.group(1)) if match else None
