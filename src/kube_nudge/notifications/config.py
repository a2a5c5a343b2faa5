"""Where the notification receivers are configured: a mounted file and the environment.

Apart from ``delivery`` so that reading the configuration never loads the sender: most
installations have no receivers, and ``kube-nudge run`` imports ``delivery`` only when
there are some.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kube_nudge.notifications.model import Receiver, parse_receivers

__all__ = ["RECEIVERS_ENV", "load_receivers"]

RECEIVERS_ENV = "KUBE_NUDGE_NOTIFY_RECEIVERS"


def load_receivers(file: Path | None, env: Mapping[str, str]) -> tuple[Receiver, ...]:
    """The receivers configured in ``file`` (a mounted Secret key), then those in the
    environment variable ``KUBE_NUDGE_NOTIFY_RECEIVERS``; either may be absent or empty.
    Raises ValueError (one line, never a URL) if either is unreadable or invalid."""
    receivers: list[Receiver] = []
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise ValueError(
                f"cannot read notification receivers from file {file}: {why}"
            ) from None
        if text.strip():
            receivers += parse_receivers(text, f"file {file}")
    text = env.get(RECEIVERS_ENV, "")
    if text.strip():
        receivers += parse_receivers(text, f"env {RECEIVERS_ENV}")
    # Labels must tell every receiver apart: number them across both sources.
    return tuple(replace(receiver, index=i) for i, receiver in enumerate(receivers))
