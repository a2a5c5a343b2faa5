"""The workloads that run another's pod template (an Argo Rollout with ``spec.workloadRef``),
kept so that the template's owner is followed by the runner's status (``model/runners.py``).
Part of the caches: the ``Cache`` builds one per kind that can run another's template, and
joins each owner's view with its runner's progress when it is read.

Its own informer, beside the kind's workload informer: that one keeps only opted-in
workloads, and the runner is usually not opted in (its owner is). Runners are few (one per
migrated Deployment), so the second watch costs little.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig, Key
from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.model.runners import Runner, project_runner

__all__ = ["Runners"]

#: (namespace, the owner as ``Kind.group/NAME``): its runner changed.
OwnerChanged = Callable[[str, str], None]


class Runners:
    """The runners of one kind, by the template owner they run."""

    def __init__(
        self,
        client: KubeClient,
        kind: WorkloadKind,
        configs: list[InformerConfig],
        on_change: OwnerChanged,
        on_restart: Any,
    ) -> None:
        self._on_change = on_change
        self._by_owner: dict[tuple[str, str], Runner] = {}
        group_kind = kind.resource.group_kind

        def project(obj: dict[str, Any]) -> Runner | None:
            return project_runner(group_kind, obj)

        self.informers: list[Informer[Runner]] = [
            Informer(client, kind.resource, project, self._changed, config, on_restart=on_restart)
            for config in configs
        ]

    def running(self, namespace: str, owner: str) -> Runner | None:
        """The runner of ``owner``'s template (``Deployment.apps/web``) in ``namespace``."""
        return self._by_owner.get((namespace, owner))

    def _changed(self, key: Key, old: Runner | None, new: Runner | None) -> None:
        namespace = key[0]
        if old is not None and (new is None or new.owner != old.owner):
            if self._by_owner.get((namespace, old.owner)) == old:
                del self._by_owner[(namespace, old.owner)]
            self._on_change(namespace, old.owner)
        if new is not None:
            self._by_owner[(namespace, new.owner)] = new
            self._on_change(namespace, new.owner)
