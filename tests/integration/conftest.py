"""Fixtures backed by one real local control plane per test session."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from kube_nudge.kube.resources import CORE_EVENTS, NAMESPACES
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.image import BuiltImage, ImageError, build_image
from kube_nudge_dev.node import NodeUnavailable, RealNode
from kube_nudge_dev.registry import LocalRegistry
from tests.integration.controller_support import CLI_OUTPUTS, REPLICA_LOGS
from tests.integration.faults import FaultRun
from tests.integration.leak_support import leaks
from tests.integration.sabotage import sabotaged

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The session's local cluster (etcd, apiserver, kcm, scheduler, kwok with 2 nodes; the
    real node joins when a test asks for it). At the end, the real node must have left the
    machine as it found it (kernel flags, iptables, mounts, links, cgroups)."""
    with LocalCluster() as local:
        yield local
    if local.node is not None:
        left = local.node.leftovers
        assert left == [], f"the real node left these behind: {left}"


@pytest.fixture(scope="session")
def controller_image() -> BuiltImage:
    """The controller image built from this checkout with podman (minutes cold, seconds warm)."""
    try:
        return build_image(REPO)
    except ImageError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def real_node(cluster: LocalCluster, controller_image: BuiltImage) -> RealNode:
    """The session cluster's real node (kubelet + containerd + runc + CNI), with the
    controller image loaded into its runtime. Pods land there only with
    ``kube_nudge_dev.nodepods.on_real_node`` (its taint keeps every other test's pods off it)."""
    try:
        return cluster.add_real_node((controller_image.archive,))
    except NodeUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def registry(cluster: LocalCluster) -> LocalRegistry:
    """The session cluster's OCI registry (the distribution registry, TLS by the cluster's CA;
    built on first use), trusted by the real node's containerd once the node runs."""
    return cluster.add_registry()


@pytest.fixture(scope="session")
async def kube(cluster: LocalCluster) -> AsyncIterator[AdminClient]:
    """An admin client for the session cluster; at the end, checks that no Secret value
    planted by the tests, nor a digest of one (`leak_support`), leaked into a log record,
    an Event (the Events of each test namespace as read just before it was deleted, and
    those still in the cluster) or the output of a CLI command the tests ran."""
    logging.getLogger("kube_nudge").addHandler(_RECORDS)
    client = AdminClient.from_config(cluster.kubeconfig, user_agent="kube-nudge-tests")
    yield client
    logging.getLogger("kube_nudge").removeHandler(_RECORDS)
    _read_events("the cluster at the end", await client.get(CORE_EVENTS.path()))
    await client.aclose()
    assert not _EVENT_LEAKS, f"a Secret value leaked into an Event: {_EVENT_LEAKS}"
    replica_logs = [log.read_text(errors="replace") for log in REPLICA_LOGS if log.exists()]
    assert not leaks(_RECORDS.lines), f"a Secret value leaked into logs: {leaks(_RECORDS.lines)}"
    assert not leaks(replica_logs), f"a Secret value leaked into logs: {leaks(replica_logs)}"
    assert not leaks(CLI_OUTPUTS), f"a Secret value leaked into CLI output: {leaks(CLI_OUTPUTS)}"
    assert _RECORDS.lines or any(replica_logs), "no log record at all was collected"


@pytest.fixture(autouse=True)
def _log_everything() -> Iterator[None]:
    """Every kube_nudge record of an integration test, down to DEBUG, reaches the collector
    (restored afterwards, so unit tests of logging see the defaults)."""
    logger = logging.getLogger("kube_nudge")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    yield
    logger.setLevel(level)


class _LogCollector(logging.Handler):
    """Keeps every kube_nudge log record (message, arguments, traceback) as text."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


_RECORDS = _LogCollector()
_EVENT_LEAKS: list[str] = []
"""Where the leak check found a planted Secret value in an Event (checked at the end)."""


def _read_events(where: str, events: object) -> None:
    """Note the Events of ``where`` (a list response) that carry a planted Secret value."""
    found = leaks([orjson.dumps(events).decode()])
    _EVENT_LEAKS.extend(f"{where} (the Events' JSON holds the {what})" for what in found)


@pytest.fixture
async def namespace(kube: AdminClient) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting). Its Events are
    read first, for the session's leak check: deleting the namespace deletes them."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": name}})
    yield name
    _read_events(f"namespace {name}", await kube.get(CORE_EVENTS.path(name)))
    await kube.delete(NAMESPACES.path(name=name))


@pytest.fixture(scope="session", autouse=True)
def _sabotage() -> Iterator[None]:
    """``FAULT_SABOTAGE=NAME`` breaks the code on purpose (tests/integration/sabotage.py)."""
    with sabotaged():
        yield


@pytest.fixture(scope="session")
def fault_runs() -> Iterator[list[FaultRun]]:
    """Fault scenarios append their records here; with ``FAULT_REPORT=path`` they are
    written there as JSON lines at the end of the session (make test-faults)."""
    runs: list[FaultRun] = []
    yield runs
    report = os.environ.get("FAULT_REPORT")
    if report and runs:
        with Path(report).open("a") as out:
            for run in runs:
                out.write(orjson.dumps(run.as_json()).decode() + "\n")
