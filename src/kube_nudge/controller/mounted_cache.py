"""The sources of a kind known only once mounted (its row's ``mounts``: the Secrets Store
CSI classes with ``--csi-secrets``), as the caches keep them: one informer of the mount
statuses its row names (SecretProviderClassPodStatus) per watched scope, and the view of
each source (per namespace) its newest status gives (``model/mounts.py``). Part of the
caches: the ``Cache`` keeps one for each such kind enabled, and reads a source through it
as through any kind's ``Sources``; nothing here names a kind."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.resources import Resource
from kube_nudge.model import SourceKind, SourceRef, SourceView
from kube_nudge.model.mounts import PodStatus, advance, project_pod_status

__all__ = ["MountedSources", "SourceChanged", "SourceHandlers"]

#: (source, its view before, after): a source's change, as the handlers take it.
SourceChanged = Callable[[SourceRef, SourceView | None, SourceView | None], None]


class SourceHandlers(Protocol):
    """What a source's change is handed to (the cache's ``Handlers``)."""

    def source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        """A source changed (None: absent)."""
        ...


def _dropped(*_: object) -> None:
    """What a change is handed to before ``add_handlers``: nothing (it is not running)."""


class MountedSources:
    """Each source's view of a kind known only once mounted, kept from the mount statuses
    its row names. A source stays known once seen (a status going away changes nothing)
    for the life of the process."""

    def __init__(
        self,
        kind: SourceKind,
        resource: Resource,
        client: KubeClient,
        configs: list[InformerConfig],
        on_restart: Any,
    ) -> None:
        self.kind = kind
        self.resource = resource
        """The mount statuses' resource (``mount_resource``)."""
        self.handler: SourceChanged = _dropped
        """What each source's change is handed to (``add_handlers`` registers it)."""
        self._views: dict[SourceRef, SourceView] = {}
        project = functools.partial(project_pod_status, kind=kind)
        self.informers: list[Informer[PodStatus]] = [
            Informer(client, resource, project, self._changed, config, on_restart=on_restart)
            for config in configs
        ]

    def view(self, ref: SourceRef) -> SourceView | None:
        """The source's view; None while no pod in scope has mounted it."""
        return self._views.get(ref)

    def keys(self) -> list[Key]:
        """(namespace, name) of every source known."""
        return [(ref.namespace, ref.name) for ref in self._views]

    def add_handlers(self, handlers: SourceHandlers) -> None:
        """Each source's change goes to ``handlers.source_changed``, as the statuses'."""
        self.handler = functools.partial(handlers.source_changed, self.resource)

    def _changed(self, key: Key, old: PodStatus | None, new: PodStatus | None) -> None:
        ref = new.ref if new is not None else None
        if ref is None:
            return  # gone or unmounted: the source keeps its newest versions
        current = self._views.get(ref)
        view = advance(current, old, new)
        if view is not None:
            self._views[ref] = view
            self.handler(ref, current, view)
