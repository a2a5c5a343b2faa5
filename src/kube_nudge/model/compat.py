"""``--compat``: Reloader's and Wave's annotations, mapped onto kube-nudge's.

| Peer annotation (on the workload) | Means here |
|---|---|
| `reloader.stakater.com/auto: "true"` | opt in |
| `wave.pusher.com/update-on-config-change: "true"` | opt in |
| `configmap.reloader.stakater.com/auto: "true"` | opt in; only ConfigMaps count |
| `secret.reloader.stakater.com/auto: "true"` | opt in; only Secrets count |
| `configmap.reloader.stakater.com/reload: "a,b"` | opt in; these count (and, without an |
|                                                 | auto or Wave opt-in, only the named ones) |
| `secret.reloader.stakater.com/reload: "c"` | the same for Secrets |
| `wave.pusher.com/extra-configmaps: "ns/a,b"` | `kube-nudge.io/configmaps` |
| `wave.pusher.com/extra-secrets: "c"` | `kube-nudge.io/secrets` |
| `reloader.stakater.com/search: "true"` | opt in; without another opt-in, only sources |
|                                         | annotated `reloader.stakater.com/match: "true"` count |

On a ConfigMap or Secret, `reloader.stakater.com/ignore: "true"` means `kube-nudge.io/ignore`,
and `reloader.stakater.com/match: "true"` makes it count for `search` workloads.
Reloader annotations with no equivalent (rollout strategy, pause period, ...) are reported
as errors (a Warning Event on the workload) instead of being silently ignored.

The switches (`WORKLOAD_SWITCHES`, `SOURCE_SWITCHES`) take the spellings of every boolean
annotation, which `annotations.parse_bool` reads: this module gets their values parsed, so
that a mistyped one (`auto: "yes"`) is an error like any other, never a silent "off".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kube_nudge.model.references import SourceKind

__all__ = ["SOURCE_SWITCHES", "WORKLOAD_SWITCHES", "CompatWorkload", "translate_workload"]

RELOADER: Final = "reloader.stakater.com/"
AUTO: Final = RELOADER + "auto"
CM_AUTO: Final = "configmap.reloader.stakater.com/auto"
SECRET_AUTO: Final = "secret.reloader.stakater.com/auto"  # noqa: S105  # nosec B105 # a name
CM_RELOAD: Final = "configmap.reloader.stakater.com/reload"
SECRET_RELOAD: Final = "secret.reloader.stakater.com/reload"  # noqa: S105  # nosec B105 # a name
IGNORE: Final = RELOADER + "ignore"
SEARCH: Final = RELOADER + "search"
MATCH: Final = RELOADER + "match"
WAVE_ON: Final = "wave.pusher.com/update-on-config-change"
WAVE_CONFIGMAPS: Final = "wave.pusher.com/extra-configmaps"
WAVE_SECRETS: Final = "wave.pusher.com/extra-secrets"
_RELOADER_PREFIXES: Final = (
    RELOADER,
    "configmap.reloader.stakater.com/",
    "secret.reloader.stakater.com/",
)
_MAPPED: Final = frozenset({AUTO, CM_AUTO, SECRET_AUTO, CM_RELOAD, SECRET_RELOAD, SEARCH})
#: The boolean peer annotations of a workload: each one opts it in.
WORKLOAD_SWITCHES: Final = (AUTO, CM_AUTO, SECRET_AUTO, SEARCH, WAVE_ON)
#: The boolean peer annotations of a ConfigMap or Secret.
SOURCE_SWITCHES: Final = (IGNORE, MATCH)


@dataclass(frozen=True, slots=True)
class CompatWorkload:
    """What a workload's peer annotations ask, in kube-nudge's terms."""

    enabled: bool
    configmaps: tuple[str, ...]
    """Extra ConfigMaps, as `kube-nudge.io/configmaps` items."""
    secrets: tuple[str, ...]
    kinds: frozenset[SourceKind] | None
    """Only sources of these kinds count (per-type auto); None: all."""
    named_only: bool
    """Only the named sources count (Reloader's reload lists without an auto)."""
    matched_only: bool
    """Only sources annotated `reloader.stakater.com/match` count (search, nothing else)."""
    errors: tuple[str, ...]


def _items(annotations: Mapping[str, object], name: str) -> tuple[str, ...]:
    value = annotations.get(name)
    if not isinstance(value, str):
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())


def translate_workload(
    annotations: Mapping[str, object], switches: Mapping[str, bool]
) -> CompatWorkload:
    """Map a workload's Reloader/Wave annotations (see the module table); ``switches`` holds
    the parsed value of each of ``WORKLOAD_SWITCHES`` that is set (absent: off)."""
    auto, cm_auto, secret_auto = (switches.get(n, False) for n in (AUTO, CM_AUTO, SECRET_AUTO))
    cm_named, secret_named = _items(annotations, CM_RELOAD), _items(annotations, SECRET_RELOAD)
    wave = switches.get(WAVE_ON, False)
    search = switches.get(SEARCH, False)
    kinds: set[SourceKind] | None = None
    if (cm_auto or secret_auto) and not auto:
        kinds = set()
        if cm_auto:
            kinds.add(SourceKind.CONFIGMAP)
        if secret_auto:
            kinds.add(SourceKind.SECRET)
    named = bool(cm_named or secret_named)
    unsupported = sorted(
        name for name in annotations if name.startswith(_RELOADER_PREFIXES) and name not in _MAPPED
    )
    errors = tuple(
        f"{name} has no kube-nudge equivalent and is ignored "
        "(see the compat table in docs/migrating.md)"
        for name in unsupported
    )
    broader = auto or cm_auto or secret_auto or wave
    return CompatWorkload(
        enabled=broader or named or search,
        configmaps=cm_named + _items(annotations, WAVE_CONFIGMAPS),
        secrets=secret_named + _items(annotations, WAVE_SECRETS),
        kinds=frozenset(kinds) if kinds is not None else None,
        named_only=named and not broader,
        matched_only=search and not (broader or named),
        errors=errors,
    )
