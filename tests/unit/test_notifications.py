"""Notification payloads, ids and the receiver configuration (model.notifications)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.notifications.model import (
    DEFAULT_KINDS,
    FORMATS,
    Notification,
    NotificationKind,
    generic_payload,
    google_chat_payload,
    parse_receivers,
    slack_payload,
    summary,
    teams_payload,
)

N = Notification(
    kind=NotificationKind.FAILED,
    namespace="shop",
    workload_kind="Deployment",
    workload="web",
    uid="0b7c5c7e-5d3c-4c57-9f0e-1f2b3c4d5e6f",
    reason="RolloutFailed",
    message="rollout to config 3f2a failed: <no progress> & held",
    config_hash="3f2a",
    time=1767225600.0,
    change="configmap/app@12345",
    cluster="prod-eu",
)
ID = "f4e125c89a6de46c1e91ad2a3b8ec72d"  # pinned below: receivers dedupe on it across versions
HEADLINE = "Rollout failed: Deployment shop/web in cluster prod-eu"
CROSS = "\N{CROSS MARK}"
SOURCE = "env KUBE_NUDGE_NOTIFY_RECEIVERS"
PREFIX = f"notification receivers in {SOURCE}: "
NOT_SHOWN = " (the URL is not shown: webhook URLs carry tokens)"
URL_FIX = 'give the receiver\'s webhook URL as "url": "https://..."' + NOT_SHOWN
EXAMPLE = '{"url": "https://...", "format": "slack", "on": ["failed", "line-stopped"]}'


def test_id_is_pinned_and_depends_on_uid_kind_and_hash_only() -> None:
    assert N.id == ID
    same = dataclasses.replace(N, message="other", time=0.0, change="", cluster=None,
                               reason="X", namespace="n", workload="w")  # fmt: skip
    assert same.id == ID
    for other in (
        dataclasses.replace(N, uid="another"),
        dataclasses.replace(N, kind=NotificationKind.HELD),
        dataclasses.replace(N, config_hash="3f2b"),
    ):
        assert other.id != ID
        assert len(other.id) == 32


def test_summary_and_timestamp() -> None:
    assert summary(N) == HEADLINE
    assert summary(dataclasses.replace(N, cluster=None)) == "Rollout failed: Deployment shop/web"
    assert N.timestamp == "2026-01-01T00:00:00Z"


def test_generic_payload() -> None:
    assert generic_payload(N) == {
        "version": 1,
        "id": ID,
        "kind": "failed",
        "summary": HEADLINE,
        "cluster": "prod-eu",
        "namespace": "shop",
        "workload_kind": "Deployment",
        "workload": "web",
        "workload_uid": "0b7c5c7e-5d3c-4c57-9f0e-1f2b3c4d5e6f",
        "reason": "RolloutFailed",
        "message": "rollout to config 3f2a failed: <no progress> & held",
        "config_hash": "3f2a",
        "change": "configmap/app@12345",
        "time": 1767225600.0,
        "timestamp": "2026-01-01T00:00:00Z",
    }


def test_slack_payload_escapes_and_has_blocks() -> None:
    headline = f"{CROSS} *{HEADLINE}*"
    message = "rollout to config 3f2a failed: &lt;no progress&gt; &amp; held"
    assert slack_payload(N) == {
        "text": f"{headline}\n{message}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": headline}},
            {"type": "section", "text": {"type": "mrkdwn", "text": message}},
            {
                "type": "context",
                "elements": [{
                    "type": "mrkdwn",
                    "text": "reason `RolloutFailed` · config `3f2a` · change "
                    f"`configmap/app@12345` · time `2026-01-01T00:00:00Z` · id `{ID}`",
                }],
            },
        ],
    }  # fmt: skip


def test_slack_payload_without_message_and_long_message() -> None:
    quiet = slack_payload(dataclasses.replace(N, message="", change=""))
    assert [block["type"] for block in quiet["blocks"]] == ["section", "context"]
    assert "change" not in quiet["blocks"][1]["elements"][0]["text"]
    long = slack_payload(dataclasses.replace(N, message="x" * 5000))
    assert len(long["blocks"][1]["text"]["text"]) == 3000


def test_slack_payload_defuses_mentions() -> None:
    payload = slack_payload(dataclasses.replace(N, message="<!channel> <@U123>"))
    assert "<!channel>" not in json.dumps(payload)
    assert "&lt;!channel&gt;" in payload["text"]


def test_teams_payload_is_an_adaptive_card() -> None:
    assert teams_payload(N) == {
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": None,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.2",
                "body": [
                    {"type": "TextBlock", "text": f"{CROSS} {HEADLINE}", "weight": "Bolder",
                     "size": "Medium", "color": "Attention", "wrap": True},
                    {"type": "TextBlock", "text": N.message, "wrap": True},
                    {"type": "FactSet", "facts": [
                        {"title": "reason", "value": "RolloutFailed"},
                        {"title": "config", "value": "3f2a"},
                        {"title": "change", "value": "configmap/app@12345"},
                        {"title": "time", "value": "2026-01-01T00:00:00Z"},
                        {"title": "id", "value": ID},
                    ]},
                ],
            },
        }],
    }  # fmt: skip


def test_google_chat_payload() -> None:
    assert google_chat_payload(N) == {
        "text": f"{CROSS} *{HEADLINE}*\n"
        "rollout to config 3f2a failed: <no progress> & held\n"
        "reason RolloutFailed · config 3f2a · change configmap/app@12345 · "
        f"time 2026-01-01T00:00:00Z · id {ID}"
    }


@pytest.mark.parametrize("kind", list(NotificationKind))
@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_serialises_every_kind(fmt: str, kind: NotificationKind) -> None:
    payload = FORMATS[fmt](dataclasses.replace(N, kind=kind))
    assert json.loads(json.dumps(payload)) == payload


def test_formats_registry() -> None:
    assert dict(FORMATS) == {"generic": generic_payload, "slack": slack_payload,
                             "teams": teams_payload, "googlechat": google_chat_payload}  # fmt: skip


# -- receivers ----------------------------------------------------------------------------

SLACK_URL = "https://hooks.slack.com/services/T000/B000/XXXXSECRETXXXX"


def test_parse_defaults_and_labels() -> None:
    text = json.dumps([
        {"url": SLACK_URL, "format": "slack", "on": ["failed", "rolling"]},
        {"url": "http://receiver.tools.svc:8080/hook?token=SECRET"},
    ])  # fmt: skip
    slack, generic = parse_receivers(text, SOURCE)
    assert slack.url == SLACK_URL
    assert slack.on == {NotificationKind.FAILED, NotificationKind.ROLLING}
    assert slack.label == "slack:hooks.slack.com#0"
    assert generic.format == "generic"
    assert generic.on == DEFAULT_KINDS
    assert set(DEFAULT_KINDS) == set(NotificationKind) - {"rolling", "complete"}
    assert generic.label == "generic:receiver.tools.svc:8080#1"
    assert generic.wants(NotificationKind.HELD)
    assert not generic.wants(NotificationKind.COMPLETE)
    assert generic.payload(N) == generic_payload(N)
    assert repr(slack) == (
        "Receiver(format='slack', host='hooks.slack.com', on=('rolling', 'failed'), index=0)"
    )
    assert str(generic) == repr(generic)
    assert "SECRET" not in repr(generic) + generic.label


def test_parse_hides_user_info_and_brackets_ipv6() -> None:
    (receiver,) = parse_receivers('[{"url": "https://user:pw@[::1]:8443/x"}]', SOURCE)
    assert receiver.host == "[::1]:8443"
    assert "pw" not in repr(receiver)


def test_parse_empty_list() -> None:
    assert parse_receivers("[]", SOURCE) == ()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[", "not valid JSON (Expecting value at line 1 column 2); expected a list like "
              f"[{EXAMPLE}]"),
        ("{}", f"expected a JSON list of receivers like [{EXAMPLE}], got an object"),
        ('"https://h/x"', f"expected a JSON list of receivers like [{EXAMPLE}], got a string"),
        ("[1]", f"entry 0: expected an object like {EXAMPLE}, got a number"),
        ('[{"url": "https://h/"}, null]', f"entry 1: expected an object like {EXAMPLE}, got null"),
        ('[{"url": "https://h/", "fromat": "slack"}]',
         "entry 0: unknown key 'fromat': the keys are url, format and on"),
        ('[{"url": "https://h/", "https://h/SECRET": 1}]',
         "entry 0: unknown key (not shown): the keys are url, format and on"),
        ("[{}]", f'entry 0: no "url": {URL_FIX}'),
        ('[{"url": 3}]', f'entry 0: "url" is a number, not a string: {URL_FIX}'),
        ('[{"url": ""}]', f'entry 0: "url" is empty or contains spaces or control characters: '
                          f"{URL_FIX}"),
        ('[{"url": "https://h/SECRET\\n"}]',
         f'entry 0: "url" is empty or contains spaces or control characters: {URL_FIX}'),
        ('[{"url": "https://h:99999/SECRET"}]',
         f'entry 0: "url" is not a valid URL (its host or port is malformed): {URL_FIX}'),
        ('[{"url": "https://[h/SECRET"}]',
         f'entry 0: "url" is not a valid URL (its host or port is malformed): {URL_FIX}'),
        ('[{"url": "hooks.slack.com/services/SECRET"}]',
         f'entry 0: "url" has no scheme: {URL_FIX}'),
        ('[{"url": "ftp://h/SECRET"}]',
         f"entry 0: \"url\" has the unsupported scheme 'ftp', not https or http: {URL_FIX}"),
        ('[{"url": "averyveryverylongscheme:SECRET"}]',
         f'entry 0: "url" has the unsupported scheme, not https or http: {URL_FIX}'),
        ('[{"url": "https:///SECRET"}]', f'entry 0: "url" has no host: {URL_FIX}'),
        ('[{"url": "https://h:0/SECRET"}]',
         "entry 0: \"url\" has port 0 (host 'h'): give the receiver's real port"),
        ('[{"url": "https://h/", "format": "slak"}]',
         "entry 0: \"format\" 'slak' is unknown: use one of generic, googlechat, slack, teams "
         "(default generic)"),
        ('[{"url": "https://h/", "format": "https://h/SECRET"}]',
         'entry 0: "format" is not a known format: use one of generic, googlechat, slack, teams '
         "(default generic)"),
        ('[{"url": "https://h/", "format": ["slack"]}]',
         'entry 0: "format" is not a known format: use one of generic, googlechat, slack, teams '
         "(default generic)"),
        ('[{"url": "https://h/", "on": "failed"}]',
         'entry 0: "on" is a string, not a list: list kinds like ["failed", "held"] (or leave '
         "it out for all but rolling and complete)"),
        ('[{"url": "https://h/", "on": []}]',
         'entry 0: "on" is empty, so nothing would be sent: list kinds like ["failed", "held"], '
         "leave it out for all but rolling and complete, or remove the receiver"),
        ('[{"url": "https://h/", "on": ["failed", "fail"]}]',
         "entry 0: \"on\": 'fail' is not a notification kind: use rolling, complete, failed, "
         "line-stopped, rolled-back, held, changed"),
        ('[{"url": "https://h/", "on": [["failed"]]}]',
         'entry 0: "on": a kind is not known: use rolling, complete, failed, line-stopped, '
         "rolled-back, held, changed"),
    ],
)  # fmt: skip
def test_parse_errors(text: str, error: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_receivers(text, SOURCE)
    assert str(caught.value) == PREFIX + error
    assert "SECRET" not in str(caught.value)


def test_parse_error_source_stays_on_one_line() -> None:
    with pytest.raises(ValueError, match=r"^notification receivers in file a\\nb: ") as caught:
        parse_receivers("{}", "file a\nb")
    assert "\n" not in str(caught.value)


# -- no URL secret ever shown: property ---------------------------------------------------

# A token ends with a digit, as real ones mostly have digits: a plain word such as
# "notification" would be found in the fixed text of a message, which shows no secret.
_TOKEN = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                 min_size=11, max_size=39).map(lambda token: token + "7")  # fmt: skip
_HOSTS = st.sampled_from(["hooks.slack.com", "h", "example.com:8443", "[::1]", "", "u:p@h"])
_SCHEMES = st.sampled_from(["https", "http", "ftp", "HTTPS", "", "xoxb", "wss"])
_SEPARATORS = st.sampled_from(["://", ":", ":/", "//", "/"])
_ANY = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                 st.lists(st.text(max_size=8), max_size=2))  # fmt: skip


@st.composite
def _entry(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """A receiver entry whose URL hides secrets in its path and query (and sometimes
    elsewhere: in the format, a key or the kinds, as if pasted into the wrong field)."""
    path, query = draw(_TOKEN), draw(_TOKEN)
    noise = draw(st.sampled_from(["", " ", "\t", "%zz"]))
    url = f"{draw(_SCHEMES)}{draw(_SEPARATORS)}{draw(_HOSTS)}/services/{path}{noise}?token={query}"
    entry: dict[str, Any] = {"url": url}
    secrets = [path, query, url]
    misplaced = draw(st.sampled_from(["none", "format", "key", "on"]))
    if misplaced == "format":
        entry["format"] = url
    elif misplaced == "key":
        entry[url] = 1
    elif misplaced == "on":
        entry["on"] = ["failed", url]
    else:
        entry["format"] = draw(st.one_of(st.sampled_from(sorted(FORMATS)), _ANY))
        if draw(st.booleans()):
            entry["on"] = draw(st.one_of(
                st.lists(st.sampled_from([k.value for k in NotificationKind]), max_size=3), _ANY
            ))  # fmt: skip
    return entry, secrets


@given(st.lists(_entry(), min_size=1, max_size=3))
def test_no_message_repr_or_label_shows_a_url_secret(
    entries: list[tuple[dict[str, Any], list[str]]],
) -> None:
    secrets = [secret for _, found in entries for secret in found]
    try:
        receivers = parse_receivers(json.dumps([entry for entry, _ in entries]), SOURCE)
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message
        assert message.startswith(PREFIX)
        shown = [message]
    else:
        shown = [text for r in receivers for text in (repr(r), str(r), r.label, r.host)]
    for text in shown:
        for secret in secrets:
            assert secret not in text
