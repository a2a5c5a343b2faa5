"""A kind known only once mounted is a row too: a test-only kind shaped like a Secrets
Store CSI class (tests/unit/toy_mounted_kind, registered with ``register_source_kind``),
whose versions only its own driver's per-pod statuses know, under field names of its own,
is kept by the one generic cache, a change of it enqueues its consumers, the read-only
commands read it, and the decision treats it as known once mounted (unknown, not absent,
until a pod mounted it) exactly as a CSI class, with 0 product files changed for it."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx
import pytest

from kube_nudge.agentwire import Claim, key_id
from kube_nudge.controller.controller import Controller, ControllerOptions
from kube_nudge.controller.mounted_cache import MountedSources
from kube_nudge.controller.reconciler import WorkloadKey
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.resources import SECRETPROVIDERCLASSPODSTATUSES, Resource, mount_resource
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import (
    Adopt,
    SourceKind,
    SourceRef,
    SourceView,
    WorkloadMemory,
    WorkloadView,
    assess,
    decide,
    project_workload,
)
from kube_nudge.model.hashing import config_hash
from kube_nudge.model.references import discover
from kube_nudge.model.source_kinds import known_once_mounted, source_row
from kube_nudge.reporting.desired import project_read
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.hot.claims import check_claim
from kube_nudge.strategies.registry import product_defaults
from tests.agent_support import KEY as HOT_KEY
from tests.unit.fakes import KEY, NS, PATH, FakeClock
from tests.unit.httpx_support import HttpxTransport
from tests.unit.toy_mounted_kind import VAULT, mount_status, registered, vault_volume

DEPLOYMENT = BUILTIN_KINDS[0]
WEB: WorkloadKey = (DEPLOYMENT, NS, "web")
DB = SourceRef(VAULT, NS, "db")
MOUNTS = Resource("toy.example", "v1", "toyvaultmounts", "ToyVaultMount")


@pytest.fixture(autouse=True)
def toy() -> Iterator[None]:
    with registered():
        yield


def make_controller(client: KubeClient, *, csi_secrets: bool = False) -> Controller:
    defaults = dataclasses.replace(product_defaults(), csi_secrets=csi_secrets)
    options = ControllerOptions(namespaces=(NS,), defaults=defaults)
    return Controller(client, options, hmac_key=KEY, metrics=Metrics(),
                      recorder=EventRecorder(client), clock=FakeClock(0.0))  # fmt: skip


@pytest.fixture
async def client() -> AsyncIterator[KubeClient]:
    http = httpx.AsyncClient(base_url="https://api.invalid")  # never reached
    yield KubeClient(HttpxTransport(http))
    await http.aclose()


def deployment(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    mount = {"name": "secrets", "mountPath": "/mnt/secrets"}
    spec = {"containers": [{"name": "app", "volumeMounts": [mount]}],
            "volumes": [vault_volume("db")]}  # fmt: skip
    return {
        "metadata": {"name": "web", "namespace": NS, "uid": "u1",
                     "annotations": {"kube-nudge.io/enabled": "true", **(annotations or {})}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": spec}},
    }  # fmt: skip


def web(annotations: dict[str, str] | None = None) -> WorkloadView:
    view = project_workload(deployment(annotations), PATH, product_defaults())
    assert view is not None
    return view


def test_its_row_makes_it_known_once_mounted_and_its_volume_consumes_it() -> None:
    assert known_once_mounted(VAULT) and source_row(VAULT).known_once_mounted
    assert not source_row(VAULT).holds_data
    assert mount_resource(VAULT) == MOUNTS
    assert mount_resource(SourceKind.CSI) == SECRETPROVIDERCLASSPODSTATUSES
    assert mount_resource(SourceKind.CONFIGMAP) is None
    use = discover({"volumes": [vault_volume("db")]}, NS)[DB]
    assert (use.keys, use.optional) == (None, True)
    assert DB in web().consumed  # no flag turns it on: always consumed


async def test_the_cache_keeps_it_from_its_statuses_and_a_change_enqueues_its_consumers(
    client: KubeClient,
) -> None:
    ctl = make_controller(client)
    ctl.synced.set()
    cache = ctl.cache
    assert SourceKind.CSI not in cache._sources  # its flag (--csi-secrets) is off
    sources = cache._sources[VAULT]
    assert sources.resource == MOUNTS
    view = web()
    cache._workloads[DEPLOYMENT][0].store[(NS, "web")] = view  # cached and indexed, unqueued
    cache.index.update(WEB, (), view.consumed)
    assert cache.source(DB) is None  # no pod mounted it yet: unknown
    informer = sources.informers[0]
    status = mount_status(NS, "db", "web-1", {"pw": "1"}, rv=10)
    informer._apply((NS, "web-1-db"), informer.project(status))
    kept = cache.source(DB)
    assert kept is not None and set(kept.state.digests) == {"pw"}
    assert DB in cache.source_refs()
    assert ctl.queue.ready_at(WEB) is not None  # its consumer, enqueued
    changes: list[tuple[SourceRef, bool]] = []
    assert isinstance(sources, MountedSources)
    handler = sources.handler

    def recorded(ref: SourceRef, old: SourceView | None, new: SourceView | None) -> None:
        changes.append((ref, old is None or new is None or old.state != new.state))
        handler(ref, old, new)

    sources.handler = recorded
    # Another pod mounting the same revisions changes no state; a newer revision does.
    status = mount_status(NS, "db", "web-2", {"pw": "1"}, rv=11)
    informer._apply((NS, "web-2-db"), informer.project(status))
    status = mount_status(NS, "db", "web-2", {"pw": "2"}, rv=12)
    informer._apply((NS, "web-2-db"), informer.project(status))
    assert changes == [(DB, False), (DB, True)]
    rotated = cache.source(DB)
    assert rotated is not None and rotated.state != kept.state


async def test_a_flag_turns_on_only_the_kind_whose_row_names_it(client: KubeClient) -> None:
    on = make_controller(client, csi_secrets=True).cache._sources
    assert on[SourceKind.CSI].resource == SECRETPROVIDERCLASSPODSTATUSES
    assert on[VAULT].resource == MOUNTS


def test_the_read_only_commands_read_it_from_its_statuses() -> None:
    items = [mount_status(NS, "db", "web-1", {"pw": "1"}, rv=10),
             mount_status(NS, "db", "web-2", {"pw": "2"}, rv=12),
             mount_status(NS, "other", "web-2", {"x": "9"}, rv=13)]  # fmt: skip
    view = project_read(DB, {"items": items})
    assert view is not None and view.resource_version == 12
    assert project_read(DB, {"items": []}) is None


def test_the_decision_treats_it_as_known_once_mounted() -> None:
    """Unknown, it is left out of the hash; once a pod mounted it, a workload recorded
    while it was unknown adopts its versions rather than rolling."""
    unknown = assess(web(), lambda ref: None, KEY)
    assert unknown.desired == config_hash(KEY, {}, {})  # as if it named no source
    assert unknown.unmounted is None and unknown.missing == ()
    recorded = web({"kube-nudge.io/baseline-hash": unknown.desired})
    informer_view = project_read(DB, {"items": [mount_status(NS, "db", "web-1", {"pw": "1"}, 10)]})
    mounted = assess(recorded, {DB: informer_view}.get, KEY)
    assert mounted.unmounted == unknown.desired != mounted.desired
    plan = decide(recorded, mounted, WorkloadMemory(), 1000.0)
    assert plan == Adopt(mounted.desired, mounted=True)


def test_hot_checks_a_directory_of_it_by_its_mounts_records() -> None:
    """Strategy hot can't lay out the files a driver fetched, so a pod's claim for a
    directory of such volumes is checked by the mount's record, by the row alone (its
    ``csi`` volume, its ``mounts``): the toy driver is named as the row's default writer."""
    spec = deployment()["spec"]["template"]["spec"]
    claim = Claim(key_id(HOT_KEY), {"/mnt/secrets": "any-hash-of-the-fetched-files"})

    def check(written: float | None, loaded_at: float) -> str | None:
        return check_claim(claim, spec, NS, HOT_KEY, {}, mounted={DB: written},
                           loaded_at=loaded_at)  # fmt: skip

    assert check(100.0, 100.5) is None
    assert check(100.0, 99.0) == (
        "/mnt/secrets: its agent has not reloaded since its driver wrote toyvault/db"
    )
    assert check(None, 200.0) == (
        "/mnt/secrets: its driver has not written the delivered versions of toyvault/db into it yet"
    )
