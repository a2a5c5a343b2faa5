"""Fixtures backed by one real local control plane per test session."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from kube_nudge.devcluster.cluster import LocalCluster
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import NAMESPACES


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The session's local cluster (etcd, apiserver, kcm, scheduler, kwok with 2 nodes)."""
    with LocalCluster() as local:
        yield local


@pytest.fixture(scope="session")
async def kube(cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    """An admin client for the session cluster."""
    client = KubeClient.from_config(cluster.kubeconfig, user_agent="kube-nudge-tests")
    yield client
    await client.aclose()


@pytest.fixture
async def namespace(kube: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards (without waiting)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create(NAMESPACES.path(), {"metadata": {"name": name}})
    yield name
    await kube.delete(NAMESPACES.path(name=name))
