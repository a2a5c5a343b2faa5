"""Flags and helpers shared by the commands that read a cluster as a person would
(``status``, ``wait``, ``release``), and the checks every command's flags go through:
each raises ``ValueError`` with one line naming the flag and the value (exit code 2)."""

from __future__ import annotations

import argparse
import base64
import ipaddress
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from kube_nudge.app.errors import UsageError
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.resources import SECRETS
from kube_nudge.model.parsing import is_dns_label, is_dns_subdomain, parse_duration
from kube_nudge.model.quoting import SHOWN_CHARS
from kube_nudge.reporting.hmackey import KEY_FIELD, read_key_file

__all__ = [
    "add_cluster_flags",
    "add_csi_flag",
    "add_key_flags",
    "check_address",
    "check_count",
    "check_duration",
    "check_key_flags",
    "check_name",
    "check_namespace",
    "check_namespaces",
    "check_number",
    "check_text",
    "key_from_file",
    "quoted",
    "read_installation_key",
]


def quoted(text: str) -> str:
    """A flag's value in a message: quoted, escaped onto one line, long ones cut short."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


_WHOLE = re.compile(r"-?[0-9]{1,18}")


def check_namespace(flag: str, text: str) -> str:
    """A namespace's name (DNS-1123 label)."""
    if not text:
        raise ValueError(f"{flag} '': give a namespace name")
    if not is_dns_label(text):
        raise ValueError(
            f"{flag} {quoted(text)}: not a namespace name (at most 63 of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit)"
        )
    return text


def check_namespaces(flag: str, texts: Iterable[str]) -> tuple[str, ...]:
    """Repeated ``--namespace``: each a namespace name, none twice."""
    seen: list[str] = []
    for text in texts:
        check_namespace(flag, text)
        if text in seen:
            raise ValueError(f"{flag} {quoted(text)}: given twice")
        seen.append(text)
    return tuple(seen)


def check_name(flag: str, text: str) -> str:
    """An object's name (DNS-1123 subdomain), such as a Secret's or a Lease's."""
    if not is_dns_subdomain(text):
        raise ValueError(
            f"{flag} {quoted(text)}: not an object name (at most 253 of a-z, 0-9, '-' and '.', "
            "starting and ending with a letter or digit)"
        )
    return text


def check_duration(flag: str, text: str, low: float, high: float, *, off: bool = False) -> float:
    """Seconds in a duration such as ``500ms``, ``2s`` or ``1m30s`` between ``low`` and
    ``high`` (also ``0`` when ``off``: the flag's way to turn something off)."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None
    if not (low <= seconds <= high or (off and seconds == 0)):
        raise duration_out_of_range(flag, text, low, high, off=off)
    return seconds


def duration_out_of_range(
    flag: str, text: str, low: float, high: float, *, off: bool = False
) -> ValueError:
    """The refusal of a duration outside ``low`` to ``high``, as ``check_duration`` words it
    (for a flag whose rule is the model's, such as ``--debounce``)."""
    zero = ", or 0 for off" if off else ""
    return ValueError(
        f"{flag} {quoted(text)}: want a duration from {_seconds(low)} to {_seconds(high)}{zero}"
    )


def check_count(flag: str, value: int | str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high``."""
    text = str(value).strip()
    number = int(text) if _WHOLE.fullmatch(text) else None
    if number is None or not low <= number <= high:
        raise ValueError(f"{flag} {quoted(str(value))}: want a whole number from {low} to {high}")
    return number


def check_number(flag: str, value: float, low: float, high: float) -> float:
    """A finite number from ``low`` to ``high`` (``inf`` and ``nan`` are not numbers here)."""
    if not math.isfinite(value) or not low <= value <= high:
        raise ValueError(f"{flag} {value:g}: want a number from {low:g} to {high:g}")
    return value


def check_text(flag: str, text: str, longest: int) -> str:
    """Free text for people (a cluster's name): printable, one line, at most ``longest``."""
    if len(text) > longest or not text.isprintable():
        raise ValueError(
            f"{flag} {quoted(text)}: want at most {longest} printable characters on one line"
        )
    return text


def check_address(flag: str, address: tuple[str, int]) -> tuple[str, int]:
    """A listening address whose host is an IP address or a host name."""
    host = address[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not is_dns_subdomain(host.lower().rstrip(".")):
            raise ValueError(
                f"{flag}: bad host {quoted(host)}: want an IP address or a host name"
            ) from None
    return address


def _seconds(value: float) -> str:
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if value >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value * 1000:g}ms"


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


def add_csi_flag(parser: argparse.ArgumentParser) -> None:
    """``--csi-secrets``, as the controller's: Secrets Store CSI classes count as sources."""
    parser.add_argument(
        "--csi-secrets",
        action="store_true",
        help="count Secrets Store CSI classes as sources, as `run --csi-secrets` does",
    )


def check_key_flags(args: argparse.Namespace) -> None:
    """The flags of ``add_key_flags``: names, and the key file readable (``UsageError``)."""
    try:
        check_namespace("--state-namespace", args.state_namespace)
        check_name("--hmac-secret", args.hmac_secret)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    key_from_file(args)


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
