"""Flags and helpers shared by the commands that read a cluster as a person would
(``status``, ``wait``, ``release``)."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path
from typing import TextIO

from kube_nudge.app.errors import UsageError
from kube_nudge.controller.hmackey import KEY_FIELD, read_key_file
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import SECRETS

__all__ = ["add_cluster_flags", "add_key_flags", "key_from_file", "read_installation_key"]


def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context``."""
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    parser.add_argument("--context", help="kubeconfig context (default: current)")


def add_key_flags(parser: argparse.ArgumentParser) -> None:
    """Where the installation key is (needed to know the desired config), and --compat."""
    add = parser.add_argument
    add("--compat", action="store_true", help="count Wave/Reloader opt-ins as opted in")
    add("--state-namespace", default="kube-nudge",
        help="namespace of kube-nudge's key Secret (default kube-nudge)")  # fmt: skip
    add("--hmac-secret", default="kube-nudge-hmac-key", help="name of the key Secret")
    add("--hmac-key-file", help="read the hash key from this file instead")


def key_from_file(args: argparse.Namespace) -> bytes | None:
    """The key ``--hmac-key-file`` names (None without the flag); ``UsageError`` when the
    file is missing or too short. Read before connecting, as every flag is checked."""
    if not args.hmac_key_file:
        return None
    try:
        return read_key_file(Path(args.hmac_key_file))
    except OSError as exc:
        raise UsageError(f"--hmac-key-file {args.hmac_key_file!r}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"--hmac-key-file: {exc}") from None


async def read_installation_key(
    client: KubeClient, args: argparse.Namespace, err: TextIO
) -> bytes | None:
    """The installation key, or None (said once on ``err``): without it a report still
    shows pods and staleness, only not the desired hash. An API server out of reach or
    refusing the credentials is the command's error (``ApiError``), not a missing key."""
    if args.hmac_key_file:
        return key_from_file(args)
    where = f"{args.state_namespace}/{args.hmac_secret}"
    try:
        secret = await client.get(SECRETS.path(args.state_namespace, args.hmac_secret))
        return base64.b64decode((secret.get("data") or {})[KEY_FIELD])
    except ApiError as exc:
        if exc.status in (0, 401):
            raise
        reason = f"{exc.status} {exc.reason}"
    except (KeyError, ValueError):
        reason = "unreadable"
    print(
        f"kube-nudge: desired hashes not shown: cannot read Secret {where} ({reason}); "
        "use --state-namespace or --hmac-key-file",
        file=err,
    )
    return None
