"""The analysis templates (``kube-nudge.io/analysis``, ``analysis.py``), kept by informers as
the other caches are: kube-nudge's own AnalysisTemplates and, with
``--argo-analysis-templates``, Argo's, one informer per watched namespace, and Argo's
ClusterAnalysisTemplates, one cluster-wide (only when kube-nudge watches every namespace: a
Role can't grant a cluster-scoped kind). Part of the caches: the ``Cache`` builds it when
analysis is on (``--prometheus-url``), and the Analyser reads each template from it, never
from the API server; an edit is seen as soon as its watch event arrives.

A kind is watched once API discovery serves it (its CRD is installed): asked at start, then
again with backoff until it is, as ``pending_kinds.py`` asks for a ``--workload``. The kinds
served at start are listed before the caches say they are synced, so no analysis reads a
template that is merely not listed yet as missing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kube_nudge.controller.options import ControllerOptions
from kube_nudge.controller.pending_kinds import FIRST_RETRY, MAX_RETRY
from kube_nudge.kube.client import JSON, ApiError, KubeClient
from kube_nudge.kube.informer import Informer, InformerConfig
from kube_nudge.kube.resources import (
    ANALYSISTEMPLATES,
    ARGO_ANALYSISTEMPLATES,
    ARGO_CLUSTERANALYSISTEMPLATES,
    Resource,
)
from kube_nudge.kube.transport import TransportError
from kube_nudge.kube.workloads import served
from kube_nudge.model.analysis import KUBE_NUDGE_TEMPLATE, AnalysisRef

__all__ = [
    "TEMPLATE_RESOURCES",
    "Missing",
    "TemplateObject",
    "TemplateReader",
    "Templates",
    "project_template",
]

log = logging.getLogger(__name__)

TEMPLATE_RESOURCES: Mapping[str, Resource] = {
    KUBE_NUDGE_TEMPLATE: ANALYSISTEMPLATES,
    "AnalysisTemplate.argoproj.io": ARGO_ANALYSISTEMPLATES,
    "ClusterAnalysisTemplate.argoproj.io": ARGO_CLUSTERANALYSISTEMPLATES,
}
"""The API resource of each kind of template ``kube-nudge.io/analysis`` may name."""

TemplateObject = Mapping[str, Any]
"""A template as kept: what ``model/analysis.py``'s ``read_template`` reads of it."""

#: What ``read_template`` reads of a template's spec; the rest is not kept.
_SPEC_KEYS = ("args", "dryRun", "metrics")
#: (resource) → its informers' ``on_restart`` (the caches' watch-restart counter).
Restarts = Callable[[Resource], Callable[[str], None]]


@dataclass(frozen=True, slots=True)
class Missing:
    """No template to read: ``why`` (one line, the analysis's Error), or None while it may
    yet come (its kind's discovery or initial list is under way): look again shortly."""

    why: str | None = None


class TemplateReader(Protocol):
    """What the Analyser reads templates through (``Templates``)."""

    def get(self, ref: AnalysisRef, namespace: str) -> TemplateObject | Missing:
        """The template ``ref`` names for a workload in ``namespace``, or why there is none."""
        ...


def project_template(obj: JSON) -> TemplateObject:
    """What is kept of a template: its kind, namespace and name (which a verdict names), and
    the spec's args, dryRun and metrics."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec")
    kept: dict[str, Any] = {
        "kind": obj.get("kind"),
        "metadata": {"namespace": metadata.get("namespace"), "name": metadata.get("name")},
    }
    if isinstance(spec, Mapping):
        kept["spec"] = {key: spec[key] for key in _SPEC_KEYS if key in spec}
    return kept


class Templates:
    """The templates of each kind read, by (namespace, name); a runnable's body (``run``)
    that watches each kind once discovery serves it."""

    def __init__(
        self,
        client: KubeClient,
        options: ControllerOptions,
        start: Callable[[Sequence[Informer[TemplateObject]]], None],
        restarts: Restarts,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        first_retry: float = FIRST_RETRY,
        max_retry: float = MAX_RETRY,
    ) -> None:
        """``start`` runs a kind's informers once it is served (the caches' tasks)."""
        self._client = client
        self._start = start
        self._sleep = sleep
        self._first_retry = first_retry
        self._max_retry = max_retry
        self.synced = asyncio.Event()
        """Set once every kind was answered and those served then are listed."""
        self._unread = _not_read(options)
        """Why each kind not watched has no templates to read; None while discovery hasn't
        answered (the kinds this configuration reads are added below)."""
        self.informers: dict[str, list[Informer[TemplateObject]]] = {}
        """Each kind's informers (one per scope; one cluster-wide for a cluster-scoped
        kind), built now and started once discovery serves the kind."""
        scopes: tuple[str | None, ...] = options.namespaces or (None,)
        for kind, resource in TEMPLATE_RESOURCES.items():
            if kind in self._unread:
                continue
            self._unread[kind] = None  # not asked yet
            configs = [
                InformerConfig(
                    namespace=namespace,
                    page_size=options.page_size,
                    inactivity_timeout=options.watch_inactivity,
                )
                for namespace in (scopes if resource.namespaced else (None,))
            ]
            self.informers[kind] = [
                Informer(client, resource, project_template, _kept, config,
                         on_restart=restarts(resource))
                for config in configs
            ]  # fmt: skip

    def get(self, ref: AnalysisRef, namespace: str) -> TemplateObject | Missing:
        """The template ``ref`` names for a workload in ``namespace``, as cached; or why
        there is none."""
        resource = TEMPLATE_RESOURCES[ref.kind]
        if ref.kind in self._unread:
            why = self._unread[ref.kind]
            return Missing(None if why is None else f"analysis template {ref}: {why}")
        key = (namespace if resource.namespaced else "", ref.name)
        for informer in self.informers[ref.kind]:
            if informer.config.namespace not in (None, key[0]):
                continue
            if not informer.synced.is_set():
                if informer.refused.is_set():
                    return Missing(
                        f"analysis template {ref}: kube-nudge may not list and watch "
                        f"{resource} (403): grant get, list and watch on it (the chart does)"
                    )
                return Missing()
            found = informer.store.get(key)
            if found is not None:
                return found
            break
        return Missing(f"analysis template {ref} not found (kube-nudge.io/analysis)")

    async def run(self) -> None:
        """Ask discovery for each kind until every one is answered, and watch the served;
        ``synced`` once these are listed; then ask again for the kinds not served, with
        backoff, until each is; then idle until cancelled."""
        pending = [kind for kind, why in self._unread.items() if why is None]
        delay = self._first_retry
        while True:
            pending = [kind for kind in pending if not await self._ask(kind)]
            if all(self._unread[kind] is not None for kind in pending):
                break  # each answered: served, or not served
            await self._sleep(delay)
            delay = min(delay * 2, self._max_retry)
        listed = [i for kind, group in self.informers.items() if kind not in self._unread
                  for i in group]  # fmt: skip
        # Listed, or refused (403): a template kind RBAC doesn't grant makes its analyses an
        # Error that says so (``get``), never the whole controller unready.
        await asyncio.gather(*(_listed_or_refused(informer) for informer in listed))
        self.synced.set()
        while pending:
            await self._sleep(delay)
            delay = min(delay * 2, self._max_retry)
            pending = [kind for kind in pending if not await self._ask(kind)]
        await asyncio.Event().wait()

    async def _ask(self, kind: str) -> bool:
        """Whether discovery serves ``kind`` now: then its informers start."""
        resource = TEMPLATE_RESOURCES[kind]
        try:
            found = await served(self._client, resource)
        except (ApiError, TransportError) as exc:
            log.warning("API discovery of %s failed (%s); asking again", resource, exc)
            return False  # not answered: what was known stands
        if not found:
            if self._unread[kind] is None:
                log.info("the API server does not serve %s; asking again until it does",
                         resource)  # fmt: skip
            self._unread[kind] = f"the API server does not serve {resource} (is its CRD installed?)"
            return False
        del self._unread[kind]
        self._start(self.informers[kind])
        log.info("watching %s: the API server serves it", resource)
        return True


async def _listed_or_refused(informer: Informer[TemplateObject]) -> None:
    """Return once ``informer`` listed its objects or the API server refused it."""
    waits = [asyncio.ensure_future(informer.synced.wait()),
             asyncio.ensure_future(informer.refused.wait())]  # fmt: skip
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _not_read(options: ControllerOptions) -> dict[str, str | None]:
    """The kinds this configuration never reads, and why (the analysis's Error)."""
    unread: dict[str, str | None] = {}
    argo = [kind for kind in TEMPLATE_RESOURCES if kind != KUBE_NUDGE_TEMPLATE]
    if not options.argo_analysis_templates:
        for kind in argo:
            unread[kind] = (
                "Argo's templates are not read: kube-nudge run was not given "
                "--argo-analysis-templates (chart value analysis.argoTemplates)"
            )
    elif options.namespaces:
        for kind in argo:
            if not TEMPLATE_RESOURCES[kind].namespaced:
                unread[kind] = (
                    "a cluster-scoped template is not read by a kube-nudge that watches only "
                    "some namespaces (--namespace); name an AnalysisTemplate of the workload's "
                    "namespace"
                )
    return unread


def _kept(*_: object) -> None:
    """A template's change enqueues nothing: an analysis reads its template at each look."""
