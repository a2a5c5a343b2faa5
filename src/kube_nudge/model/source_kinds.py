"""Source kinds as data: one row per kind of configuration source.

A row says everything the rest of kube-nudge asks of a kind: the API type it is read
from, which fields hold its data and how they are encoded (or, for a kind known only once
mounted, the per-pod statuses that hold its versions and the flag that turns it on), the
field selector its watch uses, and every place a pod spec names one (a volume, a projected
volume's source, an env var's ``valueFrom``, ``envFrom``, a CSI volume's attribute).
Discovery, the caches, the readers of the read-only commands, strategy hot's reproduction
of a volume and snapshot's copies all read the row; none of them asks which kind it is.

Adding a kind is one row here (or ``register`` for one that lives elsewhere, such as a
test's: tests/unit/toy_source_kind) plus its tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "BUILTIN_SOURCE_KINDS",
    "CSI_DRIVER",
    "CsiMount",
    "DataField",
    "MountStatuses",
    "NameAt",
    "PodSpecNames",
    "SourceKind",
    "SourceKindRow",
    "is_source_kind",
    "kind_enabled",
    "known_once_mounted",
    "pod_spec_names",
    "register_source_kind",
    "source_kind_rows",
    "source_row",
    "source_row_of",
    "unregister_source_kind",
]


class SourceKind(str):
    """The kind of a configuration source, by its lower-case name (``configmap``...).

    An open set, unlike an enum: each is a row of the table below. ``SourceKind(text)``
    returns the registered kind of that name (the same object, so ``is`` compares) and
    raises ValueError for any other text.
    """

    __slots__ = ()
    CONFIGMAP: ClassVar[SourceKind]
    SECRET: ClassVar[SourceKind]
    CSI: ClassVar[SourceKind]
    """A SecretProviderClass mounted by the Secrets Store CSI driver (docs/csi-secrets.md):
    its "keys" are the ids of the objects the driver fetched, their data the versions."""

    def __new__(cls, value: str) -> SourceKind:
        row = _ROWS.get(value)
        if row is None:
            raise ValueError(f"{value!r} is not a source kind")
        return row.kind

    @classmethod
    def define(cls, value: str) -> SourceKind:
        """The kind named ``value``, made once (``register_source_kind`` makes it known)."""
        row = _ROWS.get(value)
        return row.kind if row is not None else str.__new__(cls, value)

    @property
    def value(self) -> str:
        """The kind's name, as annotations and ``str(ref)`` spell it."""
        return str(self)

    def __repr__(self) -> str:
        return f"SourceKind({str(self)!r})"


@dataclass(frozen=True, slots=True)
class NameAt:
    """A place in a pod spec that names a source: the object in ``field`` (a volume's, a
    projected source's) whose ``name`` field holds the source's name."""

    field: str
    name: str = "name"


@dataclass(frozen=True, slots=True)
class DataField:
    """A top-level field of a source's object holding key-value data."""

    name: str
    base64: bool
    """Whether its values are base64 (a Secret's ``data``, a ConfigMap's ``binaryData``)."""


@dataclass(frozen=True, slots=True)
class CsiMount:
    """A ``csi`` volume of ``driver`` names a source in its ``volumeAttributes``."""

    driver: str
    attribute: str


@dataclass(frozen=True, slots=True)
class MountStatuses:
    """Where a kind whose versions are known only once mounted has them: the objects of
    another API type, one per pod and source, that whatever mounted it writes (the Secrets
    Store CSI driver's SecretProviderClassPodStatus). The fields named are those of the
    object's ``section``; one projection reads them for every such kind (model/mounts.py)."""

    group: str
    version: str
    plural: str
    api_kind: str
    source: str
    """The field naming the source mounted (``secretProviderClassName``)."""
    pod: str
    """The field naming the pod it was mounted for (``podName``)."""
    objects: str
    """The list of what was fetched: entries of an id and a version (``objects``)."""
    mounted: str | None = None
    """A field that is true once mounted (``mounted``); None: every status is."""
    section: str = "status"
    object_id: str = "id"
    object_version: str = "version"
    writer: str = "its driver"
    """Who writes the files and the status, as messages name it (``the CSI driver``)."""


@dataclass(frozen=True, slots=True)
class SourceKindRow:
    """Everything kube-nudge asks of one source kind."""

    kind: SourceKind
    group: str
    version: str
    plural: str
    api_kind: str
    """The API type a pod names: ``ConfigMap``, ``Secret``, ``SecretProviderClass``."""
    aliases: tuple[str, ...] = ()
    """Other names a user may type for it (``kube-nudge wait cm/NAME``)."""
    data: tuple[DataField, ...] = ()
    """The fields holding its data, in the order the kubelet projects them."""
    string_data: str | None = None
    """A write-only field of text values the API server merges, base64, into its first data
    field on write, key by key (a Secret's ``stringData``). None: a key may be in only one
    of its data fields (a ConfigMap's ``data`` and ``binaryData``)."""
    field_selector: str | None = None
    """What its watch leaves out server-side (Secrets no pod can consume as config)."""
    volume: NameAt | None = None
    projected: NameAt | None = None
    env_key: str | None = None
    """The ``valueFrom`` field naming one of its keys (``configMapKeyRef``)."""
    env_from: str | None = None
    """The ``envFrom`` field naming all of its keys (``configMapRef``)."""
    csi: CsiMount | None = None
    mounts: MountStatuses | None = None
    """Its versions are known only from the statuses written per pod that mounted it
    (model/mounts.py), not from an object of its own: unknown, not absent, until one did;
    not an object to read, copy or post Events on. None: its own objects hold its data."""
    enabled_by: str | None = None
    """The ``WorkloadDefaults`` flag that turns the kind on (``csi_secrets``: the
    controller's ``--csi-secrets``), None: always on. Off, it is never consumed or kept."""

    @property
    def known_once_mounted(self) -> bool:
        """Whether only its mounts' statuses know its versions (``mounts``)."""
        return self.mounts is not None

    @property
    def holds_data(self) -> bool:
        """Whether its object holds its data: a manifest shows it (plan), a copy keeps it
        (strategy snapshot). Not a CSI class: each pod fetches that from the provider."""
        return not self.known_once_mounted and bool(self.data)


_ROWS: dict[str, SourceKindRow] = {}
"""Every registered kind's row, by its name (a ``SourceKind`` is the str it names)."""

CSI_DRIVER = "secrets-store.csi.k8s.io"
"""The Secrets Store CSI driver's name in a pod's ``csi`` volume."""

SourceKind.CONFIGMAP = SourceKind.define("configmap")
SourceKind.SECRET = SourceKind.define("secret")
SourceKind.CSI = SourceKind.define("secretproviderclass")

#: Secrets no pod template can consume as config: skipped server-side, never listed.
SECRET_FIELD_SELECTOR = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token"  # noqa: S105  # nosec B105 # a field selector, not a password

BUILTIN_SOURCE_KINDS = (
    SourceKindRow(
        SourceKind.CONFIGMAP, "", "v1", "configmaps", "ConfigMap", aliases=("cm",),
        data=(DataField("data", base64=False), DataField("binaryData", base64=True)),
        volume=NameAt("configMap"), projected=NameAt("configMap"),
        env_key="configMapKeyRef", env_from="configMapRef",
    ),
    SourceKindRow(
        SourceKind.SECRET, "", "v1", "secrets", "Secret",
        data=(DataField("data", base64=True),), string_data="stringData",
        field_selector=SECRET_FIELD_SELECTOR,
        volume=NameAt("secret", "secretName"), projected=NameAt("secret"),
        env_key="secretKeyRef", env_from="secretRef",
    ),
    SourceKindRow(
        SourceKind.CSI, "secrets-store.csi.x-k8s.io", "v1", "secretproviderclasses",
        "SecretProviderClass", csi=CsiMount(CSI_DRIVER, "secretProviderClass"),
        mounts=MountStatuses(
            "secrets-store.csi.x-k8s.io", "v1", "secretproviderclasspodstatuses",
            "SecretProviderClassPodStatus", source="secretProviderClassName",
            pod="podName", objects="objects", mounted="mounted", writer="the CSI driver",
        ),
        enabled_by="csi_secrets",
    ),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PodSpecNames:
    """Where a pod spec names a source, every kind's places side by side: what discovery
    walks for each pod spec, derived from the rows once (``pod_spec_names``)."""

    volume: tuple[tuple[SourceKind, str, str], ...]
    """(kind, volume field, name field)."""
    projected: tuple[tuple[SourceKind, str, str], ...]
    env_key: tuple[tuple[SourceKind, str], ...]
    """(kind, ``valueFrom`` field)."""
    env_from: tuple[tuple[SourceKind, str], ...]
    csi: tuple[tuple[SourceKind, CsiMount], ...]
    known_once_mounted: frozenset[SourceKind]

    @classmethod
    def of(cls, rows: tuple[SourceKindRow, ...]) -> PodSpecNames:
        """The places ``rows`` name sources in."""
        return cls(
            volume=tuple((r.kind, r.volume.field, r.volume.name) for r in rows if r.volume),
            projected=tuple(
                (r.kind, r.projected.field, r.projected.name) for r in rows if r.projected
            ),
            env_key=tuple((r.kind, r.env_key) for r in rows if r.env_key),
            env_from=tuple((r.kind, r.env_from) for r in rows if r.env_from),
            csi=tuple((r.kind, r.csi) for r in rows if r.csi),
            known_once_mounted=frozenset(r.kind for r in rows if r.known_once_mounted),
        )


# Derived from ``_ROWS`` on each change (discovery and assessment ask per pod spec and per
# source: a walk of the rows each time cost them about 3%).
_ordered: tuple[SourceKindRow, ...] = ()
_names = PodSpecNames.of(())


def _derive() -> None:
    global _ordered, _names  # the table's derived views, rebuilt together
    _ordered = tuple(_ROWS.values())
    _names = PodSpecNames.of(_ordered)


def register_source_kind(row: SourceKindRow) -> None:
    """Make ``row`` a source kind (a test's, say); ValueError if its name is taken."""
    if row.kind in _ROWS:
        raise ValueError(f"source kind {row.kind} is already registered")
    _ROWS[row.kind] = row
    _derive()


def unregister_source_kind(kind: SourceKind) -> None:
    """Forget a kind ``register_source_kind`` added (never a built-in one)."""
    if any(row.kind is kind for row in BUILTIN_SOURCE_KINDS):
        raise ValueError(f"source kind {kind} is built in")
    _ROWS.pop(kind, None)
    _derive()


def source_row(kind: SourceKind) -> SourceKindRow:
    """The row of ``kind``."""
    return _ROWS[kind]


def source_row_of(api_version: str, api_kind: str) -> SourceKindRow | None:
    """The row of the kind whose objects have this ``apiVersion`` and ``kind``, if any."""
    for row in _ordered:
        if (api_version, api_kind) == (_api_version(row), row.api_kind):
            return row
    return None


def _api_version(row: SourceKindRow) -> str:
    return f"{row.group}/{row.version}" if row.group else row.version


def source_kind_rows() -> tuple[SourceKindRow, ...]:
    """Every registered kind's row, the built-in ones first."""
    return _ordered


def pod_spec_names() -> PodSpecNames:
    """Every place a pod spec names a source of a registered kind."""
    return _names


def known_once_mounted(kind: SourceKind) -> bool:
    """Whether only its mounts' statuses know ``kind``'s versions (``SourceKindRow``)."""
    return kind in _names.known_once_mounted


def kind_enabled(kind: SourceKind, defaults: object) -> bool:
    """Whether ``defaults`` (a ``WorkloadDefaults``: the table sits below its module) turn
    ``kind`` on: its row's ``enabled_by`` flag, if it names one."""
    flag = _ROWS[kind].enabled_by
    return flag is None or bool(getattr(defaults, flag))


def is_source_kind(text: str) -> bool:
    """Whether ``text`` names a registered source kind."""
    return text in _ROWS


for _row in BUILTIN_SOURCE_KINDS:
    register_source_kind(_row)
