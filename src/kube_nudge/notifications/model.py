"""Outbound notifications about rollouts (pure): what is announced, the payloads of the
receivers we speak to, and the receiver configuration.

A ``Notification`` carries the same human text as the Kubernetes Event it accompanies, so it
never contains Secret values. Receiver URLs, however, are secrets (a Slack, Teams or Google
Chat webhook URL carries its token in the path or the query): nothing here ever puts a URL's
path, query or user info into a message, a ``repr`` or a label; only its scheme problem or
its host.

Payload formats (``FORMATS``):

- ``generic``: a flat JSON object with the fields of ``generic_payload`` and ``"version": 1``;
- ``slack``: a Slack incoming webhook (``text`` plus ``blocks``); Mattermost and Rocket.Chat
  accept it too and show ``text``;
- ``teams``: an Adaptive Card in a ``message`` envelope, what Teams Workflows ("When a Teams
  webhook request is received") accept; the legacy MessageCard format is not accepted by
  Workflows, which replace the retired Office 365 connectors;
- ``googlechat``: a Google Chat incoming webhook (``{"text": ...}``).

Receivers are configured as JSON (``parse_receivers``)::

    [{"url": "https://hooks.slack.com/services/...", "format": "slack",
      "on": ["failed", "line-stopped", "rolled-back", "held"]}]
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_KINDS",
    "FORMATS",
    "PAYLOAD_VERSION",
    "Notification",
    "NotificationKind",
    "Receiver",
    "generic_payload",
    "google_chat_payload",
    "parse_receivers",
    "slack_payload",
    "summary",
    "teams_payload",
]

PAYLOAD_VERSION = 1
"""``version`` of the generic payload; bumped only on an incompatible change."""


class NotificationKind(StrEnum):
    """What happened to the workload."""

    ROLLING = "rolling"
    COMPLETE = "complete"
    FAILED = "failed"
    LINE_STOPPED = "line-stopped"
    ROLLED_BACK = "rolled-back"
    HELD = "held"
    CHANGED = "changed"
    """Strategy ``notify``: the config changed; the pods were not restarted."""


DEFAULT_KINDS = frozenset(NotificationKind) - {NotificationKind.ROLLING, NotificationKind.COMPLETE}
"""What a receiver without ``on`` is sent: what needs a human, not every rollout."""

_TITLES = {
    NotificationKind.ROLLING: "Rolling",
    NotificationKind.COMPLETE: "Rollout complete",
    NotificationKind.FAILED: "Rollout failed",
    NotificationKind.LINE_STOPPED: "Line stopped",
    NotificationKind.ROLLED_BACK: "Rolled back",
    NotificationKind.HELD: "Held",
    NotificationKind.CHANGED: "Config changed",
}
_EMOJI = {
    NotificationKind.ROLLING: "\N{ANTICLOCKWISE DOWNWARDS AND UPWARDS OPEN CIRCLE ARROWS}",
    NotificationKind.COMPLETE: "\N{WHITE HEAVY CHECK MARK}",
    NotificationKind.FAILED: "\N{CROSS MARK}",
    NotificationKind.LINE_STOPPED: "\N{NO ENTRY}",
    NotificationKind.ROLLED_BACK: "\N{BLACK LEFT-POINTING DOUBLE TRIANGLE}",
    NotificationKind.HELD: "\N{DOUBLE VERTICAL BAR}",
    NotificationKind.CHANGED: "\N{MEMO}",
}
_TEAMS_COLOURS = {
    NotificationKind.ROLLING: "Accent",
    NotificationKind.COMPLETE: "Good",
    NotificationKind.FAILED: "Attention",
    NotificationKind.LINE_STOPPED: "Attention",
    NotificationKind.ROLLED_BACK: "Attention",
    NotificationKind.HELD: "Warning",
    NotificationKind.CHANGED: "Accent",
}
_SLACK_SECTION_MAX = 3000  # characters of a section block's text
_ID_CONTEXT = b"kube-nudge notification v1"


@dataclass(frozen=True, slots=True)
class Notification:
    """One rollout event of one workload, for the receivers that want its kind."""

    kind: NotificationKind
    namespace: str
    workload_kind: str
    """The workload's Kubernetes kind, e.g. ``Deployment``."""
    workload: str
    """The workload's name."""
    uid: str
    """The workload's ``metadata.uid`` (part of ``id``)."""
    reason: str
    """The reason of the Kubernetes Event, e.g. ``RolloutFailed``."""
    message: str
    """The text of the Kubernetes Event: names and hashes, never Secret values."""
    config_hash: str
    time: float
    """When it happened, Unix seconds."""
    change: str = ""
    """The source change in a few words, e.g. ``configmap/app@12345``."""
    cluster: str | None = None
    """The cluster's name, when configured (several clusters posting to one channel)."""

    @property
    def id(self) -> str:
        """Idempotency key: the same for the same (workload uid, kind, config hash), so a
        receiver, or the sender after a restart, can drop duplicates."""
        digest = hashlib.sha256(_ID_CONTEXT)
        for part in (self.uid, str(self.kind), self.config_hash):
            digest.update(b"\0" + part.encode())
        return digest.hexdigest()[:32]

    @property
    def title(self) -> str:
        """The kind in words, e.g. ``Rollout failed``."""
        return _TITLES[self.kind]

    @property
    def timestamp(self) -> str:
        """``time`` as RFC 3339 UTC, to the second."""
        return datetime.fromtimestamp(self.time, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(n: Notification) -> str:
    """One line naming what happened to which workload, e.g. ``Rollout failed: Deployment
    shop/web in cluster prod-eu``."""
    where = f" in cluster {n.cluster}" if n.cluster else ""
    return f"{n.title}: {n.workload_kind} {n.namespace}/{n.workload}{where}"


def _details(n: Notification) -> list[tuple[str, str]]:
    """The facts after the message, empty ones left out."""
    facts = [
        ("reason", n.reason),
        ("config", n.config_hash),
        ("change", n.change),
        ("time", n.timestamp),
        ("id", n.id),
    ]
    return [(name, value) for name, value in facts if value]


def generic_payload(n: Notification) -> dict[str, Any]:
    """The flat payload of the ``generic`` format (``version`` 1). Fields: ``version``,
    ``id`` (idempotency key, also sent as header ``Idempotency-Key``), ``kind`` (a
    ``NotificationKind`` value), ``summary``, ``cluster`` (null when not configured),
    ``namespace``, ``workload_kind``, ``workload``, ``workload_uid``, ``reason``,
    ``message``, ``config_hash``, ``change``, ``time`` (Unix seconds) and ``timestamp``
    (RFC 3339 UTC)."""
    return {
        "version": PAYLOAD_VERSION,
        "id": n.id,
        "kind": str(n.kind),
        "summary": summary(n),
        "cluster": n.cluster,
        "namespace": n.namespace,
        "workload_kind": n.workload_kind,
        "workload": n.workload,
        "workload_uid": n.uid,
        "reason": n.reason,
        "message": n.message,
        "config_hash": n.config_hash,
        "change": n.change,
        "time": n.time,
        "timestamp": n.timestamp,
    }


def _slack_escape(text: str) -> str:
    """Slack's three control characters; escaping ``<`` also defuses ``<!channel>``.
    Mattermost and Rocket.Chat decode these entities as Markdown does."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\N{HORIZONTAL ELLIPSIS}"


def slack_payload(n: Notification) -> dict[str, Any]:
    """A Slack incoming-webhook message: ``text`` (what notifications, Mattermost and
    Rocket.Chat show) and ``blocks`` (what Slack shows)."""
    headline = f"{_EMOJI[n.kind]} *{_slack_escape(summary(n))}*"
    message = _slack_escape(n.message)
    details = " · ".join(f"{name} `{_slack_escape(value)}`" for name, value in _details(n))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": headline}},
    ]
    if message:
        section = {"type": "mrkdwn", "text": _truncate(message, _SLACK_SECTION_MAX)}
        blocks.append({"type": "section", "text": section})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": details}]})
    text = f"{headline}\n{message}" if message else headline
    return {"text": text, "blocks": blocks}


def teams_payload(n: Notification) -> dict[str, Any]:
    """An Adaptive Card (schema 1.2) in the ``message`` envelope that Teams Workflows
    webhooks ("When a Teams webhook request is received") accept; legacy incoming webhooks
    accept it too. MessageCard is not used: Workflows do not render it."""
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": f"{_EMOJI[n.kind]} {summary(n)}",
            "weight": "Bolder",
            "size": "Medium",
            "color": _TEAMS_COLOURS[n.kind],
            "wrap": True,
        },
    ]
    if n.message:
        body.append({"type": "TextBlock", "text": n.message, "wrap": True})
    facts = [{"title": name, "value": value} for name, value in _details(n)]
    body.append({"type": "FactSet", "facts": facts})
    return {
        "type": "message",
        "attachments": [
            {
                "contentType": "application/vnd.microsoft.card.adaptive",
                "contentUrl": None,
                "content": {
                    "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                    "type": "AdaptiveCard",
                    "version": "1.2",
                    "body": body,
                },
            }
        ],
    }


def google_chat_payload(n: Notification) -> dict[str, Any]:
    """A Google Chat incoming-webhook message: ``{"text": ...}`` (Chat's own ``*bold*``)."""
    details = " · ".join(f"{name} {value}" for name, value in _details(n))
    lines = [f"{_EMOJI[n.kind]} *{summary(n)}*", n.message, details]
    return {"text": "\n".join(line for line in lines if line)}


FORMATS: Mapping[str, Callable[[Notification], dict[str, Any]]] = {
    "generic": generic_payload,
    "slack": slack_payload,
    "teams": teams_payload,
    "googlechat": google_chat_payload,
}


@dataclass(frozen=True, slots=True, repr=False)
class Receiver:
    """Where notifications go. ``url`` is a secret: ``repr``, ``str`` and ``label`` show
    the format and host only."""

    url: str
    format: str = "generic"
    on: frozenset[NotificationKind] = DEFAULT_KINDS
    index: int = 0
    """Position among the configured receivers (tells two receivers on one host apart)."""

    @property
    def host(self) -> str:
        """The URL's host (and port, if given): no user info, path or query."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        return f"{host}:{port}" if port is not None else host

    @property
    def label(self) -> str:
        """Format, host and index, e.g. ``slack:hooks.slack.com#0``: for logs and metric
        labels."""
        return f"{self.format}:{self.host}#{self.index}"

    def wants(self, kind: NotificationKind) -> bool:
        """True if this receiver is sent notifications of ``kind``."""
        return kind in self.on

    def payload(self, n: Notification) -> dict[str, Any]:
        """``n`` in this receiver's format."""
        return FORMATS[self.format](n)

    def __repr__(self) -> str:
        on = tuple(str(kind) for kind in NotificationKind if kind in self.on)
        return (
            f"Receiver(format={self.format!r}, host={self.host!r}, on={on!r}, index={self.index})"
        )


_KEYS = ("url", "format", "on")
_KIND_VALUES = frozenset(kind.value for kind in NotificationKind)
_SAFE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,31}")
_SAFE_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,9}")
_NOT_SHOWN = " (the URL is not shown: webhook URLs carry tokens)"
_EXAMPLE = '[{"url": "https://...", "format": "slack", "on": ["failed", "line-stopped"]}]'


def _word(value: object) -> str | None:
    """``value`` quoted if it is a short plain word, safe to echo (never a URL, a path or a
    token pasted into the wrong field); else None."""
    if isinstance(value, str) and _SAFE_WORD.fullmatch(value):
        return repr(value)
    return None


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def parse_receivers(text: str, source: str) -> tuple[Receiver, ...]:
    """The receivers configured in ``text`` (JSON), read from ``source`` (named in errors,
    e.g. ``file /etc/kube-nudge/notify/receivers.json``).

    ``text`` is a list of objects with ``url`` (http or https, required), ``format``
    (``generic``, ``slack``, ``teams`` or ``googlechat``; default ``generic``) and ``on``
    (the notification kinds to send; default every kind except ``rolling`` and
    ``complete``). Raises ValueError with a one-line message naming the source, the entry
    and the fix, and never the URL beyond its scheme problem or host.
    """
    where = f"notification receivers in {_one_line(source)}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"expected a list like {_EXAMPLE}"
        ) from None
    if not isinstance(data, list):
        raise ValueError(
            f"{where}: expected a JSON list of receivers like {_EXAMPLE}, got {_json_type(data)}"
        )
    receivers = []
    for index, entry in enumerate(data):
        problem = _entry_problem(entry)
        if problem is not None:
            raise ValueError(f"{where}: entry {index}: {problem}")
        assert isinstance(entry, dict)  # nosec B101 # narrowed by _entry_problem
        kinds = entry.get("on")
        on = DEFAULT_KINDS if kinds is None else frozenset(NotificationKind(k) for k in kinds)
        receivers.append(
            Receiver(url=entry["url"], format=entry.get("format", "generic"), on=on, index=index)
        )
    return tuple(receivers)


def _json_type(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true/false"
    if value is None:
        return "null"
    return "a number"


def _entry_problem(entry: object) -> str | None:
    """What is wrong with one receiver entry, and how to fix it; None if nothing."""
    if not isinstance(entry, dict):
        return f"expected an object like {_EXAMPLE[1:-1]}, got {_json_type(entry)}"
    unknown = [key for key in entry if key not in _KEYS]
    if unknown:
        named = _word(unknown[0]) or "(not shown)"
        return f"unknown key {named}: the keys are url, format and on"
    return _url_problem(entry.get("url")) or _format_problem(entry) or _on_problem(entry)


def _url_problem(url: object) -> str | None:
    fix = 'give the receiver\'s webhook URL as "url": "https://..."' + _NOT_SHOWN
    if url is None:
        return f'no "url": {fix}'
    if not isinstance(url, str):
        return f'"url" is {_json_type(url)}, not a string: {fix}'
    if not url or any(c.isspace() or not c.isprintable() for c in url):
        return f'"url" is empty or contains spaces or control characters: {fix}'
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return f'"url" is not a valid URL (its host or port is malformed): {fix}'
    scheme = parts.scheme.lower()
    if not scheme:
        return f'"url" has no scheme: {fix}'
    if scheme not in ("http", "https"):
        named = f" {scheme!r}" if _SAFE_SCHEME.fullmatch(scheme) else ""
        return f'"url" has the unsupported scheme{named}, not https or http: {fix}'
    if not parts.hostname:
        return f'"url" has no host: {fix}'
    if port == 0:
        return f'"url" has port 0 (host {parts.hostname!r}): give the receiver\'s real port'
    return None


def _format_problem(entry: Mapping[str, object]) -> str | None:
    value = entry.get("format", "generic")
    if isinstance(value, str) and value in FORMATS:
        return None
    named = _word(value)
    what = f'"format" {named} is unknown' if named else '"format" is not a known format'
    return f"{what}: use one of {', '.join(sorted(FORMATS))} (default generic)"


def _on_problem(entry: Mapping[str, object]) -> str | None:
    kinds = entry.get("on")
    if kinds is None:
        return None
    known = ", ".join(kind.value for kind in NotificationKind)
    if not isinstance(kinds, list):
        return (
            f'"on" is {_json_type(kinds)}, not a list: list kinds like ["failed", "held"] '
            "(or leave it out for all but rolling and complete)"
        )
    if not kinds:
        return (
            '"on" is empty, so nothing would be sent: list kinds like ["failed", "held"], '
            "leave it out for all but rolling and complete, or remove the receiver"
        )
    for kind in kinds:
        if not (isinstance(kind, str) and kind in _KIND_VALUES):
            named = _word(kind)
            what = f"{named} is not a notification kind" if named else "a kind is not known"
            return f'"on": {what}: use {known}'
    return None
