"""The workload-kind registry: built-in kinds and those added with ``--workload``.

Adding a built-in workload kind means one entry in ``BUILTIN_KINDS``; a built-in kind that a
CRD serves (Argo Rollouts' ``Rollout``) is one entry in ``DISCOVERED_KINDS`` instead: watched
once API discovery serves it, never assumed. A custom resource's
Kind (it lands in every Event's ``involvedObject.kind``, which ``kubectl describe``
filters by) comes from API discovery, or is given explicitly; it is never guessed from
the plural.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kube_nudge.kube import resources
from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.events import ObjectRef
from kube_nudge.kube.resources import Resource
from kube_nudge.model import TemplatePath, WorkloadView, parse_path

__all__ = [
    "ARGO_ROLLOUTS",
    "BUILTIN_KINDS",
    "DISCOVERED_KINDS",
    "Revisions",
    "Target",
    "WorkloadKey",
    "WorkloadKind",
    "WorkloadSpec",
    "parse_workload_flag",
    "readable_kinds",
    "registry",
    "resolve",
    "served",
]

SPEC_TEMPLATE: TemplatePath = ("spec", "template")
CRONJOB_TEMPLATE: TemplatePath = ("spec", "jobTemplate", "spec", "template")

_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_FLAG_HELP = (
    "want GROUP/VERSION/PLURAL=PATH or GROUP/VERSION/PLURAL:KIND=PATH, "
    "e.g. argoproj.io/v1alpha1/rollouts=spec.template"
)


@dataclass(frozen=True, slots=True)
class Revisions:
    """The objects a workload's own controller keeps one per template version (owned by
    the workload, pruned by its history limit), and where their template lives."""

    resource: Resource
    template_path: TemplatePath
    by_pod_selector: bool = True
    """Whether they carry the workload's pod labels (list by its selector, not all)."""
    follows_template: bool = True
    """Whether a new one appears as soon as the template changes (not a CronJob's Jobs)."""


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A workload resource and where its pod template lives."""

    resource: Resource
    template_path: TemplatePath
    revisions: Revisions | None = None
    """None for custom kinds: their revisions (if any) are unknown."""

    def __str__(self) -> str:
        return str(self.resource)


WorkloadKey = tuple[WorkloadKind, str, str]
"""(kind, namespace, name): a workload's key in the caches, the work queue and the book."""


@dataclass(frozen=True, slots=True)
class Target:
    """A workload as last seen: the subject of a reconcile, of what a strategy writes, and of
    its Events and log lines."""

    kind: WorkloadKind
    namespace: str
    name: str
    view: WorkloadView

    @property
    def ref(self) -> ObjectRef:
        """The workload as the subject of an Event."""
        resource = self.kind.resource
        return ObjectRef(
            resource.api_version, resource.kind, self.namespace, self.name, self.view.uid
        )

    @property
    def key(self) -> WorkloadKey:
        """(kind, namespace, name): the workload's key in the caches and the work queue."""
        return (self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind.resource.kind} {self.namespace}/{self.name}"

    def log_fields(self, action: str, **more: object) -> dict[str, object]:
        """Structured fields for a log record about this workload (``extra=``), shown as
        keys of its JSON log line."""
        return {
            "kind": self.kind.resource.kind,
            "namespace": self.namespace,
            "workload": self.name,
            "action": action,
            **more,
        }


BUILTIN_KINDS: tuple[WorkloadKind, ...] = (
    WorkloadKind(
        resources.DEPLOYMENTS, SPEC_TEMPLATE, Revisions(resources.REPLICASETS, SPEC_TEMPLATE)
    ),
    WorkloadKind(
        resources.STATEFULSETS,
        SPEC_TEMPLATE,
        Revisions(resources.CONTROLLERREVISIONS, ("data", "spec", "template")),
    ),
    WorkloadKind(
        resources.DAEMONSETS,
        SPEC_TEMPLATE,
        Revisions(resources.CONTROLLERREVISIONS, ("data", "spec", "template")),
    ),
    WorkloadKind(
        resources.CRONJOBS,
        CRONJOB_TEMPLATE,
        Revisions(resources.JOBS, SPEC_TEMPLATE, by_pod_selector=False, follows_template=False),
    ),
)


ARGO_ROLLOUTS = WorkloadKind(resources.ROLLOUTS, SPEC_TEMPLATE)
"""An Argo ``Rollout`` (``run --argo-rollouts``): its rollout is followed as Argo reports it
(``model/argorollout.py``). One with ``spec.workloadRef`` has no template of its own: opt in
the Deployment it references instead (docs/argo-rollouts.md)."""

DISCOVERED_KINDS: tuple[WorkloadKind, ...] = (ARGO_ROLLOUTS,)
"""Built-in kinds served by a CRD: read by ``status``, ``wait`` and ``release`` wherever
the API serves them, watched by ``run`` when asked to (the chart grants their RBAC only
then)."""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """A ``--workload`` flag, validated but not yet resolved against the API."""

    group: str
    version: str
    plural: str
    kind: str | None  # None: ask API discovery
    template_path: TemplatePath
    text: str
    flag: str = "--workload"
    """The flag that asked for it, for messages."""

    @classmethod
    def of(cls, kind: WorkloadKind, flag: str) -> WorkloadSpec:
        """A discovered built-in kind, asked for by ``flag``: its Kind from discovery too,
        so it is watched only once the API serves it."""
        resource = kind.resource
        text = f"{resource.group}/{resource.version}/{resource.plural}"
        return cls(resource.group, resource.version, resource.plural, None,
                   kind.template_path, text, flag)  # fmt: skip

    def known(self) -> WorkloadKind | None:
        """The kind without asking the API, when the flag named it explicitly."""
        if self.kind is None:
            return None
        return WorkloadKind(
            Resource(self.group, self.version, self.plural, self.kind), self.template_path
        )


def parse_workload_flag(text: str) -> WorkloadSpec:
    """Validate ``GROUP/VERSION/PLURAL[:KIND]=PATH``; ValueError names the value."""
    gvr, sep, path_text = text.partition("=")
    resource_text, _, kind = gvr.partition(":")
    parts = resource_text.split("/")
    if not sep or len(parts) != 3 or not all(parts):
        raise ValueError(f"--workload {text!r}: {_FLAG_HELP}")
    group, version, plural = parts
    if not all(_NAME.fullmatch(part) for part in parts):
        raise ValueError(f"--workload {text!r}: group, version and plural are lowercase names")
    if kind and not _KIND.fullmatch(kind):
        raise ValueError(f"--workload {text!r}: KIND {kind!r} must be CamelCase, e.g. Rollout")
    try:
        path = parse_path(path_text)
    except ValueError as exc:
        raise ValueError(f"--workload {text!r}: {exc}") from None
    return WorkloadSpec(group, version, plural, kind or None, path, text)


async def resolve(client: KubeClient, spec: WorkloadSpec) -> WorkloadKind:
    """The kind of ``spec``, its Kind and scope from API discovery unless given.

    Raises ValueError naming the flag when the API doesn't serve the resource."""
    known = spec.known()
    if known is not None:
        return known
    api_version = f"{spec.group}/{spec.version}" if spec.group else spec.version
    path = f"/apis/{api_version}" if spec.group else f"/api/{spec.version}"
    try:
        found = await client.get(path)
    except ApiError as exc:
        if exc.not_found:
            raise ValueError(
                f"{spec.flag} {spec.text!r}: the API server does not serve {api_version} "
                "(is the CRD installed?)"
            ) from None
        raise
    for entry in found.get("resources") or []:
        if entry.get("name") == spec.plural and isinstance(entry.get("kind"), str):
            resource = Resource(
                spec.group, spec.version, spec.plural, entry["kind"], bool(entry.get("namespaced"))
            )
            return WorkloadKind(resource, spec.template_path)
    raise ValueError(
        f"{spec.flag} {spec.text!r}: {api_version} has no resource {spec.plural!r} "
        "(check the plural with `kubectl api-resources`)"
    )


async def served(client: KubeClient, resource: Resource) -> bool:
    """Whether API discovery serves ``resource`` (its CRD is installed); False also when
    the user may not ask (a reader that can't discover it can't list it)."""
    try:
        found = await client.get(f"/apis/{resource.group}/{resource.version}")
    except ApiError as exc:
        if exc.not_found or exc.status == 403:
            return False
        raise
    return any(entry.get("name") == resource.plural for entry in found.get("resources") or ())


async def readable_kinds(
    client: KubeClient,
    namespaces: Iterable[str | None] = (None,),
    *,
    refused: list[str] | None = None,
) -> tuple[WorkloadKind, ...]:
    """The built-in kinds plus each discovered one the API serves and the account may list
    in ``namespaces`` (None: all), for the read-only commands, which list every kind. A
    served kind the account may not list (a viewer role without Rollouts, say) is named in
    ``refused`` instead of failing the command: it is optional, the built-in ones are not."""
    kinds = list(BUILTIN_KINDS)
    for kind in DISCOVERED_KINDS:
        if not await served(client, kind.resource):
            continue
        if await _may_list(client, kind, namespaces):
            kinds.append(kind)
        elif refused is not None:
            refused.append(f"{kind.resource.plural}.{kind.resource.group}")
    return tuple(kinds)


async def _may_list(
    client: KubeClient, kind: WorkloadKind, namespaces: Iterable[str | None]
) -> bool:
    """Whether a one-item list of ``kind`` in each of ``namespaces`` is allowed."""
    for namespace in namespaces:
        try:
            await client.get(kind.resource.path(namespace), limit=1)
        except ApiError as exc:
            if exc.status == 403:
                return False
            raise
    return True


def registry(custom: Iterable[WorkloadKind] = ()) -> tuple[WorkloadKind, ...]:
    """The built-in kinds plus ``custom``; a resource registered twice is an error."""
    kinds = [*BUILTIN_KINDS, *custom]
    seen: set[tuple[str, str]] = set()
    for kind in kinds:
        key = (kind.resource.group, kind.resource.plural)
        if key in seen:
            raise ValueError(f"workload kind {kind} is registered twice")
        seen.add(key)
    return tuple(kinds)
