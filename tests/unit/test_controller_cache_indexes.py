"""The caches' indexes, kept from every workload change before any handler runs (as
client-go's indexers): which workloads consume a source, and which record that their
current rollout failed (what stops a line; the release gates ask on every rollout); and
two lookups that return the cached views with them: a source's consumers, a pass's inputs;
and where each source informer's changes go (to the handlers, registered on it)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest

from kube_nudge.controller.cache import Cache
from kube_nudge.controller.controller import ControllerOptions
from kube_nudge.controller.reader import OwnNews
from kube_nudge.controller.reconciler import WorkloadKey
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Handler
from kube_nudge.kube.resources import CONFIGMAPS, SECRETPROVIDERCLASSPODSTATUSES, SECRETS, Resource
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import SourceKind, SourceRef, SourceView, WorkloadView
from kube_nudge.model.mounts import PodStatus
from kube_nudge.runtime.metrics import Metrics
from tests.unit.fakes import APP, NS, configmap, workload
from tests.unit.httpx_support import HttpxTransport

DEPLOYMENT = BUILTIN_KINDS[0]
WEB: WorkloadKey = (DEPLOYMENT, NS, "web")
OTHER: WorkloadKey = (DEPLOYMENT, NS, "other")


@pytest.fixture
async def cache() -> AsyncIterator[Cache]:
    http = httpx.AsyncClient(base_url="https://api.invalid")
    yield Cache(KubeClient(HttpxTransport(http)), ControllerOptions(namespaces=(NS,)), Metrics())
    await http.aclose()


def changed(
    cache: Cache, key: WorkloadKey, old: WorkloadView | None, new: WorkloadView | None
) -> None:
    """What the workload informer calls on a watch event (no handlers registered)."""
    cache._workloads[DEPLOYMENT][0].handler((key[1], key[2]), old, new)


def rolled(config_hash: str, failed: str | None = None) -> WorkloadView:
    """A workload kube-nudge rolled to ``config_hash``, recording ``failed`` as failed."""
    view = workload(template_hash=config_hash, rolled_at=(1_700_000_000.0,))
    return dataclasses.replace(view, failed=(failed, 5.0) if failed else None)


def test_a_failure_recorded_on_the_current_rollout_is_indexed_until_it_rolls_on(
    cache: Cache,
) -> None:
    assert not cache.any_failed()
    changed(cache, WEB, None, rolled("h1", failed="h1"))
    changed(cache, OTHER, None, rolled("h1"))
    assert cache.failed(WEB) and cache.any_failed() and not cache.failed(OTHER)
    changed(cache, WEB, rolled("h1", failed="h1"), rolled("h2", failed="h1"))  # rolled on
    assert not cache.failed(WEB) and not cache.any_failed()
    changed(cache, WEB, rolled("h2", failed="h1"), rolled("h2", failed="h2"))
    changed(cache, WEB, rolled("h2", failed="h2"), None)  # deleted
    assert not cache.failed(WEB) and not cache.any_failed()


def test_the_consumers_index_follows_each_view(cache: Cache) -> None:
    view = rolled("h1")
    assert APP in view.consumed
    changed(cache, WEB, None, view)
    assert cache.index.consumers(APP) == {WEB}
    changed(cache, WEB, view, None)
    assert cache.index.consumers(APP) == frozenset()


def test_consumers_come_with_their_views_as_cached(cache: Cache) -> None:
    """As client-go's ``ByIndex``: the objects, read from the store the index follows."""
    informer = cache._workloads[DEPLOYMENT][0]
    view = rolled("h1")
    informer._apply((NS, "web"), view)  # the store, then the handler that keeps the index
    assert cache.consumers(APP) == [(WEB, view)]
    changed(cache, OTHER, None, view)  # indexed, but not (yet) in the store: left out
    assert cache.index.consumers(APP) == {WEB, OTHER}
    assert cache.consumers(APP) == [(WEB, view)]
    changed(cache, OTHER, view, None)
    informer._apply((NS, "web"), None)
    assert cache.consumers(APP) == []


def test_a_pass_reads_its_view_and_every_source_it_consumes_at_once(cache: Cache) -> None:
    """``Cache.inputs``: what a pass assesses, in one call; a source not cached is None."""
    assert cache.inputs(WEB) is None
    view = rolled("h1")
    cache._workloads[DEPLOYMENT][0]._apply((NS, "web"), view)
    inputs = cache.inputs(WEB)
    assert inputs is not None and inputs.view == view
    assert dict(inputs.sources) == {APP: None}  # consumed, not cached (yet)
    app = configmap(LEVEL="info")
    cache._sources[SourceKind.CONFIGMAP].informers[0]._apply((NS, "app"), app)
    inputs = cache.inputs(WEB)
    assert inputs is not None and dict(inputs.sources) == {APP: app}


class Recorded:
    """Handlers that record each source change as the caches hand it on."""

    def __init__(self) -> None:
        self.changes: list[tuple[Resource, SourceRef, SourceView | None]] = []

    def source_changed(
        self, resource: Resource, ref: SourceRef, old: SourceView | None, new: SourceView | None
    ) -> None:
        self.changes.append((resource, ref, new))

    def source_handler(self, kind: SourceKind, resource: Resource) -> Handler[SourceView]:
        def handler(key: tuple[str, str], old: SourceView | None, new: SourceView | None) -> None:
            self.source_changed(resource, SourceRef(kind, *key), old, new)

        return handler

    def workload_changed(self, *_: Any) -> None: ...

    def left_out(self, *_: Any) -> None: ...

    def runner_changed(self, *_: Any) -> None: ...


class NoOwnWrites:
    """The rollout book's part, as the caches ask it: nothing written."""

    def news(self, *_: Any) -> OwnNews:
        return OwnNews()

    def progress_moved(self, *_: Any) -> None: ...


async def test_each_source_informer_hands_its_changes_to_the_handlers_itself() -> None:
    """Registered on the informer (client-go's ``AddEventHandler``), one per kind and
    scope; a Secrets Store CSI class's change too. Before ``add_handlers``: dropped."""
    http = httpx.AsyncClient(base_url="https://api.invalid")
    csi = dataclasses.replace(ControllerOptions().defaults, csi_secrets=True)
    options = ControllerOptions(namespaces=(NS, "other"), defaults=csi)
    cache = Cache(KubeClient(HttpxTransport(http)), options, Metrics())
    app, secret = configmap(LEVEL="info"), configmap(a="1")
    cache._sources[SourceKind.CONFIGMAP].informers[0]._apply(
        (NS, "early"), app
    )  # nobody listens yet
    handlers = Recorded()
    cache.add_handlers(handlers, own_writes=NoOwnWrites())
    cache._sources[SourceKind.CONFIGMAP].informers[0]._apply((NS, "app"), app)
    cache._sources[SourceKind.SECRET].informers[1]._apply(("other", "db"), secret)
    spc = SourceKind.CSI
    status = PodStatus(spc, NS, "vault", "web-1", (("db-password", "v1"),), resource_version=3)
    cache._sources[spc].informers[0]._apply((NS, "web-1-status"), status)
    vault = SourceRef(spc, NS, "vault")
    assert cache.source(vault) is not None
    assert handlers.changes == [
        (CONFIGMAPS, APP, app),
        (SECRETS, SourceRef(SourceKind.SECRET, "other", "db"), secret),
        (SECRETPROVIDERCLASSPODSTATUSES, vault, cache.source(vault)),
    ]
    await http.aclose()
