"""The Secrets Store CSI classes as sources (``--csi-secrets``, docs/csi-secrets.md): one
informer of SecretProviderClassPodStatus per watched scope, and the view of each class
(per namespace) its newest status gives (``model/csi.py``). Part of the caches: the ``Cache``
builds it when the flag is on, and reads a class through it like any source."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.resources import SECRETPROVIDERCLASSPODSTATUSES
from kube_nudge.model import SourceRef, SourceView
from kube_nudge.model.csi import PodStatus, advance, project_pod_status

__all__ = ["ClassChanged", "CsiClasses"]

#: (class, its view before, after): a source's change, as the handlers take it.
ClassChanged = Callable[[SourceRef, SourceView | None, SourceView | None], None]


class CsiClasses:
    """Each SecretProviderClass's view, kept from the driver's pod statuses. A class stays
    known once seen (a status going away changes nothing) for the life of the process."""

    resource = SECRETPROVIDERCLASSPODSTATUSES

    def __init__(
        self,
        client: KubeClient,
        configs: list[InformerConfig],
        handler: ClassChanged,
        on_restart: Any,
    ) -> None:
        self.handler = handler
        """What each class's change is handed to (``Cache.add_handlers`` registers it)."""
        self._views: dict[SourceRef, SourceView] = {}
        self.informers: list[Informer[PodStatus]] = [
            Informer(
                client,
                self.resource,
                project_pod_status,
                self._changed,
                config,
                on_restart=on_restart,
            )
            for config in configs
        ]

    def view(self, ref: SourceRef) -> SourceView | None:
        """The class's view; None while no pod in scope has mounted it."""
        return self._views.get(ref)

    def keys(self) -> list[Key]:
        """(namespace, name) of every class known."""
        return [(ref.namespace, ref.name) for ref in self._views]

    def _changed(self, key: Key, old: PodStatus | None, new: PodStatus | None) -> None:
        ref = new.ref if new is not None else None
        if ref is None:
            return  # gone or unmounted: the class keeps its newest versions
        current = self._views.get(ref)
        view = advance(current, old, new)
        if view is not None:
            self._views[ref] = view
            self.handler(ref, current, view)
