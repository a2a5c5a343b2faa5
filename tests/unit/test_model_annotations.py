"""Example-based tests of the annotation contract and duration parsing."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from kube_nudge.model import annotations as a
from kube_nudge.model import compat
from kube_nudge.model.annotations import SourceSettings, WorkloadSettings
from kube_nudge.model.parsing import FALSE_SPELLINGS, TRUE_SPELLINGS, parse_duration
from kube_nudge.model.references import SourceKind, SourceRef
from kube_nudge.model.settings import (
    cross_namespace_allowed,
    mistyped_opt_in,
    parse_source,
    parse_workload,
)
from kube_nudge.strategies.hot.settings import DEFAULT_HOT_DEADLINE, HotSettings, hot_settings
from kube_nudge.strategies.registry import product_defaults

NS = "team"
DEFAULTS = WorkloadSettings(
    enabled=False,
    extra=(),
    exclude=frozenset(),
    debounce=None,
    max_rollouts=3,
    rollout_window=300.0,
    strategy="rollout",
)


def cm(name: str, namespace: str = NS) -> SourceRef:
    return SourceRef(SourceKind.CONFIGMAP, namespace, name)


def secret(name: str, namespace: str = NS) -> SourceRef:
    return SourceRef(SourceKind.SECRET, namespace, name)


def parse(
    annotations: dict[str, Any], *, compat: bool = False
) -> tuple[WorkloadSettings, list[str]]:
    return parse_workload(annotations, NS, a.WorkloadDefaults(compat=compat))


# --- names and defaults ----------------------------------------------------------------


def test_annotation_names() -> None:
    assert a.ENABLED == "kube-nudge.io/enabled"
    assert a.CONFIGMAPS == "kube-nudge.io/configmaps"
    assert a.SECRETS == "kube-nudge.io/secrets"
    assert a.EXCLUDE == "kube-nudge.io/exclude"
    assert a.DEBOUNCE == "kube-nudge.io/debounce"
    assert a.MAX_ROLLOUTS == "kube-nudge.io/max-rollouts"
    assert a.STRATEGY == "kube-nudge.io/strategy"
    assert a.IGNORE == "kube-nudge.io/ignore"
    assert a.SHARE_WITH == "kube-nudge.io/share-with"
    assert a.CONFIG_HASH == "kube-nudge.io/config-hash"
    assert a.BASELINE_HASH == "kube-nudge.io/baseline-hash"
    assert a.ROLLED_AT == "kube-nudge.io/rolled-at"


@pytest.mark.parametrize("annotations", [None, {}, {"unrelated": "x"}])
def test_defaults(annotations: dict[str, str] | None) -> None:
    assert parse_workload(annotations, NS) == (DEFAULTS, [])


def test_defaults_match_constants() -> None:
    assert DEFAULTS.debounce == a.DEFAULT_DEBOUNCE
    assert DEFAULTS.max_rollouts == a.DEFAULT_MAX_ROLLOUTS
    assert DEFAULTS.rollout_window == a.DEFAULT_ROLLOUT_WINDOW
    assert DEFAULTS.strategy == a.DEFAULT_STRATEGY


# --- enabled and compat ----------------------------------------------------------------


SPELLINGS = [(value, True) for value in TRUE_SPELLINGS] + [
    (value, False) for value in FALSE_SPELLINGS
]
NOT_BOOLEANS = ["yes", "no", "on", "off", "y", "enabled", "TrUe", "2", "-1", "", "true!"]
ACCEPTED = "(also accepted: True, TRUE, t, T, 1 and False, FALSE, f, F, 0)"


def test_the_one_set_of_boolean_spellings() -> None:
    """Go's strconv.ParseBool: what Reloader reads its own switches with."""
    assert TRUE_SPELLINGS == ("true", "True", "TRUE", "t", "T", "1")
    assert FALSE_SPELLINGS == ("false", "False", "FALSE", "f", "F", "0")


@pytest.mark.parametrize(("value", "enabled"), [*SPELLINGS, (" true ", True)])
def test_enabled(value: str, enabled: bool) -> None:
    assert parse({a.ENABLED: value}) == (
        replace(DEFAULTS, enabled=enabled),
        [],
    )


@pytest.mark.parametrize("value", NOT_BOOLEANS)
def test_enabled_invalid(value: str) -> None:
    settings, errors = parse({a.ENABLED: value})
    assert settings.enabled is False
    assert errors == [f'kube-nudge.io/enabled must be "true" or "false", got "{value}" {ACCEPTED}']


# Every boolean annotation: where it goes, and how to read its value back.
WORKLOAD_BOOLEANS = [a.ENABLED, *compat.WORKLOAD_SWITCHES]
SOURCE_BOOLEANS = [(a.IGNORE, "ignore"), (compat.IGNORE, "ignore"), (compat.MATCH, "matched")]


@pytest.mark.parametrize("name", WORKLOAD_BOOLEANS)
@pytest.mark.parametrize(("value", "on"), SPELLINGS)
def test_every_workload_boolean_takes_the_one_set(name: str, value: str, on: bool) -> None:
    settings, errors = parse({name: value}, compat=True)
    assert (settings.enabled, errors) == (on, [])


@pytest.mark.parametrize("name", WORKLOAD_BOOLEANS)
@pytest.mark.parametrize("value", NOT_BOOLEANS)
def test_every_workload_boolean_refuses_the_rest_out_loud(name: str, value: str) -> None:
    settings, errors = parse({name: value}, compat=True)
    assert settings.enabled is False
    assert errors == [f'{name} must be "true" or "false", got "{value}" {ACCEPTED}']


@pytest.mark.parametrize(("name", "field"), SOURCE_BOOLEANS)
@pytest.mark.parametrize(("value", "on"), SPELLINGS)
def test_every_source_boolean_takes_the_one_set(
    name: str, field: str, value: str, on: bool
) -> None:
    settings, errors = parse_source({name: value}, compat=True)
    assert (getattr(settings, field), errors) == (on, [])


@pytest.mark.parametrize(("name", "field"), SOURCE_BOOLEANS)
@pytest.mark.parametrize("value", NOT_BOOLEANS)
def test_every_source_boolean_refuses_the_rest_out_loud(name: str, field: str, value: str) -> None:
    settings, errors = parse_source({name: value}, compat=True)
    assert getattr(settings, field) is False
    assert errors == [f'{name} must be "true" or "false", got "{value}" {ACCEPTED}']


def test_peer_switches_mean_nothing_without_compat() -> None:
    assert parse({compat.AUTO: "yes"}) == (DEFAULTS, [])
    assert parse_source({compat.IGNORE: "yes"}) == (parse_source({})[0], [])


@pytest.mark.parametrize(
    ("annotations", "compat_on", "mistyped"),
    [
        ({a.ENABLED: "yes"}, False, True),
        ({a.ENABLED: "True"}, False, False),  # opted in: the reconciler reports the rest
        ({a.ENABLED: "false"}, False, False),
        ({a.ENABLED: "false", a.DEBOUNCE: "soon"}, False, False),  # opted out on purpose
        ({a.DEBOUNCE: "soon"}, False, False),  # never tried to opt in
        ({}, False, False),
        ({a.ENABLED: True}, False, True),  # not a string
        ({compat.AUTO: "on"}, True, True),
        ({compat.AUTO: "on"}, False, False),  # not ours without --compat
        ({compat.WAVE_ON: "enabled"}, True, True),
    ],
)
def test_a_mistyped_opt_in_is_told(
    annotations: dict[str, Any], compat_on: bool, mistyped: bool
) -> None:
    defaults = replace(a.WorkloadDefaults(), compat=compat_on)
    errors = mistyped_opt_in(annotations, "team", defaults)
    assert bool(errors) is mistyped
    if mistyped:
        assert errors == parse(annotations, compat=compat_on)[1]


def test_enabled_non_string_is_an_error() -> None:
    settings, errors = parse({a.ENABLED: True})
    assert settings.enabled is False
    assert errors == ["kube-nudge.io/enabled must be a string"]


@pytest.mark.parametrize("name", [a.COMPAT_WAVE, a.COMPAT_RELOADER])
def test_compat_annotations(name: str) -> None:
    assert parse({name: "true"})[0].enabled is False
    assert parse({name: "true"}, compat=True) == (
        replace(DEFAULTS, enabled=True),
        [],
    )
    assert parse({name: "false"}, compat=True)[0].enabled is False
    assert parse({name: "true", a.ENABLED: "false"}, compat=True)[0].enabled is False


def test_compat_applies_when_enabled_is_invalid() -> None:
    settings, errors = parse({a.COMPAT_RELOADER: "true", a.ENABLED: "yes"}, compat=True)
    assert settings.enabled is True
    assert len(errors) == 1


# --- extra sources ---------------------------------------------------------------------


def test_extra_sources_sorted_and_deduplicated() -> None:
    settings, errors = parse({a.CONFIGMAPS: " b , other-ns/a.b-c ,a,b", a.SECRETS: "db,shared/tls"})
    assert errors == []
    assert settings.extra == (
        cm("a.b-c", "other-ns"),
        cm("a"),
        cm("b"),
        secret("tls", "shared"),
        secret("db"),
    )


def test_empty_source_list_is_allowed() -> None:
    assert parse({a.CONFIGMAPS: "", a.SECRETS: "  "}) == (DEFAULTS, [])


@pytest.mark.parametrize("value", ["a,,b", "a,", ",a", " , "])
def test_empty_items_are_errors(value: str) -> None:
    settings, errors = parse({a.CONFIGMAPS: value, a.SECRETS: "s"})
    assert settings.extra == (secret("s"),)
    assert errors == [f'kube-nudge.io/configmaps has an empty item in "{value.strip()}"']


@pytest.mark.parametrize(
    "item",
    [
        "Upper",
        "under_score",
        "-lead",
        "trail-",
        "a..b",
        "ns/",
        "/name",
        "a/b/c",
        "Bad-NS/name",
        "x" * 64 + "/name",
        "n" * 254,
        "spa ce",
        "ünï",
    ],
)
def test_invalid_source_items_name_the_item(item: str) -> None:
    settings, errors = parse({a.SECRETS: f"good,{item}"})
    assert settings.extra == ()
    shown = json.dumps(item if len(item) <= 100 else item[:100] + "...")
    assert errors == [
        f"kube-nudge.io/secrets has an invalid item {shown}: "
        "want a name or namespace/name (lowercase DNS-1123)"
    ]


def test_long_names_at_the_limits_are_valid() -> None:
    settings, errors = parse({a.CONFIGMAPS: "n" * 63 + "/" + "a." * 126 + "b"})
    assert errors == []
    assert settings.extra == (cm("a." * 126 + "b", "n" * 63),)


def test_long_bad_values_are_truncated() -> None:
    _, errors = parse({a.STRATEGY: "x" * 5000})
    assert len(errors) == 1
    assert len(errors[0]) < 200
    assert errors[0].endswith('..."')


# --- exclude ---------------------------------------------------------------------------


def test_exclude() -> None:
    settings, errors = parse({a.EXCLUDE: "configmap/a, secret/b,configmap/other/c"})
    assert errors == []
    assert settings.exclude == frozenset({cm("a"), secret("b"), cm("c", "other")})


@pytest.mark.parametrize(
    "item", ["a", "ConfigMap/a", "pod/a", "configmap/", "secret/a/b/c", "configmap/Bad"]
)
def test_exclude_invalid(item: str) -> None:
    settings, errors = parse({a.EXCLUDE: f"configmap/ok,{item}"})
    assert settings.exclude == frozenset()
    assert errors == [
        f'kube-nudge.io/exclude has an invalid item "{item}": want configmap/name, '
        "secret/name, configmap/namespace/name or secret/namespace/name"
    ]


# --- debounce --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0), ("0s", 0.0), ("500ms", 0.5), ("2s", 2.0), ("1m30s", 90.0), ("1h", 3600.0),
        ("auto", None), (" auto ", None),
    ],
)  # fmt: skip
def test_debounce(value: str, seconds: float | None) -> None:
    settings, errors = parse({a.DEBOUNCE: value})
    assert (settings.debounce, errors) == (seconds, [])


@pytest.mark.parametrize("value", ["-1s", "1h0m0.001s", "2", "2x", "", "soon", "Auto"])
def test_debounce_invalid(value: str) -> None:
    settings, errors = parse({a.DEBOUNCE: value})
    assert settings.debounce is None
    assert errors == [
        'kube-nudge.io/debounce must be "auto" or a duration between 0s and 1h such as "500ms" '
        f'or "2s", got "{value}"'
    ]


# --- max-rollouts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5/10m", (5, 600.0)),
        ("1/1s", (1, 1.0)),
        ("1000/24h", (1000, 86400.0)),
        ("3/5m", (3, 300.0)),
    ],
)
def test_max_rollouts(value: str, expected: tuple[int, float]) -> None:
    settings, errors = parse({a.MAX_ROLLOUTS: value})
    assert ((settings.max_rollouts, settings.rollout_window), errors) == (expected, [])


@pytest.mark.parametrize(
    "value",
    [
        "0/5m",
        "1001/5m",
        "-1/5m",
        "5",
        "5/",
        "/5m",
        "5/999ms",
        "5/24h1s",
        "5/10x",
        "a/5m",
        "5 / 5m",
        "99999999999999999999/5m",
        "5/5m/5m",
    ],
)
def test_max_rollouts_invalid(value: str) -> None:
    settings, errors = parse({a.MAX_ROLLOUTS: value})
    assert (settings.max_rollouts, settings.rollout_window) == (3, 300.0)
    assert errors == [
        'kube-nudge.io/max-rollouts must be "N/window" with N from 1 to 1000 and a window '
        f'between 1s and 24h such as "3/5m", got "{value}"'
    ]


# --- strategy --------------------------------------------------------------------------


def test_strategy() -> None:
    assert parse({a.STRATEGY: "rollout"}) == (DEFAULTS, [])
    settings, errors = parse({a.STRATEGY: "restart"})
    assert settings.strategy == "rollout"
    assert errors == ['kube-nudge.io/strategy must be one of "rollout", got "restart"']


# --- independence of errors ------------------------------------------------------------


def test_each_bad_annotation_reports_once_and_others_still_apply() -> None:
    settings, errors = parse(
        {
            a.ENABLED: "true",
            a.CONFIGMAPS: "Bad!",
            a.SECRETS: "db",
            a.EXCLUDE: "nope",
            a.DEBOUNCE: "forever",
            a.MAX_ROLLOUTS: "10/1m",
            a.STRATEGY: "other",
        }
    )
    assert settings == WorkloadSettings(
        enabled=True,
        extra=(secret("db"),),
        exclude=frozenset(),
        debounce=None,
        max_rollouts=10,
        rollout_window=60.0,
        strategy="rollout",
    )
    assert [e.split(" ", 1)[0] for e in errors] == [
        a.CONFIGMAPS,
        a.EXCLUDE,
        a.DEBOUNCE,
        a.STRATEGY,
    ]


def test_control_characters_are_escaped_in_messages() -> None:
    _, errors = parse({a.STRATEGY: "a\nb\x00"})
    assert errors == ['kube-nudge.io/strategy must be one of "rollout", got "a\\nb\\u0000"']


# --- source annotations ----------------------------------------------------------------


def test_source_defaults() -> None:
    assert parse_source(None) == (SourceSettings(ignore=False, share_with=frozenset()), [])
    assert parse_source({}) == (SourceSettings(ignore=False, share_with=frozenset()), [])


def test_source_settings() -> None:
    settings, errors = parse_source({a.IGNORE: "true", a.SHARE_WITH: "ns-a, ns-b"})
    assert (settings, errors) == (SourceSettings(True, frozenset({"ns-a", "ns-b"})), [])
    assert parse_source({a.SHARE_WITH: "*"})[0].share_with == frozenset({"*"})


def test_source_settings_errors() -> None:
    settings, errors = parse_source({a.IGNORE: "maybe", a.SHARE_WITH: "ok,Not_OK"})
    assert settings == SourceSettings(False, frozenset())
    assert errors == [
        f'kube-nudge.io/ignore must be "true" or "false", got "maybe" {ACCEPTED}',
        'kube-nudge.io/share-with has an invalid item "Not_OK": want a namespace name or "*"',
    ]
    assert parse_source({a.SHARE_WITH: "a,,b"})[1] == [
        'kube-nudge.io/share-with has an empty item in "a,,b"'
    ]


@pytest.mark.parametrize("value", ["app=webapp", "app in (a,b),tier!=db", "!legacy", "a/b=c"])
def test_pod_selector_is_kept_as_given(value: str) -> None:
    settings, errors = parse_source({a.POD_SELECTOR: f" {value} "})
    assert (settings.pod_selector, errors) == (value, [])
    assert parse_source({})[0].pod_selector is None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("app in webapp", "'app in webapp': not a label selector"),
        ("app=webapp,", "'app=webapp,': not a label selector"),
        ("app=a\nb c", "'app=a\\nb c': not a label selector"),
        ("  ", "'': give a label selector such as app=web"),
    ],
)
def test_a_bad_pod_selector_is_one_line_naming_the_annotation_and_value(
    value: str, shown: str
) -> None:
    settings, errors = parse_source({a.POD_SELECTOR: value, a.SHARE_WITH: "ns-a"})
    assert settings == SourceSettings(False, frozenset({"ns-a"}))  # the rest still parses
    [error] = errors
    assert error.startswith(f"kube-nudge.io/pod-selector {shown}")
    assert "\n" not in error


def test_cross_namespace_allowed() -> None:
    none = SourceSettings(False, frozenset())
    some = SourceSettings(False, frozenset({"web"}))
    everyone = SourceSettings(False, frozenset({"*"}))
    assert cross_namespace_allowed("shared", "shared", none) is True
    assert cross_namespace_allowed("web", "shared", none) is False
    assert cross_namespace_allowed("web", "shared", some) is True
    assert cross_namespace_allowed("api", "shared", some) is False
    assert cross_namespace_allowed("api", "shared", everyone) is True


# --- parse_duration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("+0", 0.0),
        ("-0", 0.0),
        ("0s", 0.0),
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("1m30s", 90.0),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("2\u00b5s", 2e-6),
        ("2\u03bcs", 2e-6),
        ("1h1h", 7200.0),
        ("-1.5s", -1.5),
        ("0.0000000019s", 1e-9),  # Go truncates below a nanosecond
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "s",
        ".s",
        "1x",
        "1 s",
        " 1s",
        "1s ",
        "1S",
        "-",
        "1.5.5s",
        "1e3s",
        "\u0661s",
        "3000000h",
    ],
)
def test_parse_duration_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_parse_duration_message_truncates() -> None:
    with pytest.raises(ValueError) as info:
        parse_duration("9" * 10_000 + "s")
    assert len(str(info.value)) < 200


# --- strategy hot ------------------------------------------------------------------------


def test_hot_settings_parse_and_bad_values_name_themselves() -> None:
    def parse(annotations: dict[str, Any]) -> tuple[HotSettings, list[str]]:
        settings, errors = parse_workload(annotations, NS, product_defaults())
        return hot_settings(settings), errors

    settings, errors = parse({"kube-nudge.io/hot-fallback": "warn",
                              "kube-nudge.io/hot-deadline": "45s"})  # fmt: skip
    assert errors == []
    assert (settings.fallback_rollout, settings.deadline) == (False, 45.0)
    settings, errors = parse({"kube-nudge.io/hot-fallback": "restart",
                              "kube-nudge.io/hot-deadline": "2s"})  # fmt: skip
    assert errors == [
        'kube-nudge.io/hot-fallback must be "rollout" or "warn", got "restart"',
        'kube-nudge.io/hot-deadline must be a duration between 5s and 1h such as "2m", got "2s"',
    ]
    assert (settings.fallback_rollout, settings.deadline) == (True, DEFAULT_HOT_DEADLINE)
