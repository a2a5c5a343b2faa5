"""The session's OCI registry (the CNCF distribution registry, TLS by the cluster's CA) and the
real node pulling from it by digest through containerd's ``hosts.toml``, as a node of a real
cluster pulls from a private registry: no image import, no skipped TLS check."""

from __future__ import annotations

import urllib.error

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import PODS
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.image import HOST_CA_BUNDLE, pause_image, push_image
from kube_nudge_dev.node import RealNode
from kube_nudge_dev.registry import LocalRegistry, RegistryClient
from tests.integration.registry_support import pull_events, run_pod, running

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]


@pytest.fixture(scope="module")
def pushed(registry: LocalRegistry) -> str:
    """The pause image pushed to the registry: ``HOST/kube-nudge-pause@sha256:...``."""
    pause = pause_image()
    target = f"{registry.host}/kube-nudge-pause:test"
    digest = push_image(pause.ref, target, cert_dir=registry.cert_dir)
    return f"{registry.host}/kube-nudge-pause@{digest}"


def test_the_registry_serves_tls_only_to_who_trusts_the_cluster_ca(registry: LocalRegistry) -> None:
    assert registry.client().ping()
    untrusted = RegistryClient(registry.host, HOST_CA_BUNDLE)  # the machine's public CAs
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusted.ping()


async def test_the_real_node_pulls_from_the_registry_by_digest(
    kube: KubeClient, real_node: RealNode, registry: LocalRegistry, pushed: str, namespace: str
) -> None:
    digest = pushed.rsplit("@", 1)[1]
    await run_pod(kube, namespace, "pulled", pushed)
    pod = await running(kube, namespace, "pulled")
    [status] = pod["status"]["containerStatuses"]
    assert status["imageID"].endswith(f"kube-nudge-pause@{digest}"), status
    messages = await pull_events(kube, namespace, "pulled", "Pulled")
    assert any(f'Successfully pulled image "{pushed}"' in m for m in messages), messages
    # containerd itself asked the registry for that manifest, by digest.
    assert any("containerd" in line for line in registry.pulls(digest)), registry.pulls(digest)


async def test_without_the_ca_in_its_hosts_toml_the_node_refuses_the_registry(
    kube: AdminClient, real_node: RealNode, registry: LocalRegistry, pushed: str, namespace: str
) -> None:
    # The same hosts.toml less its `ca`: containerd verifies the registry's certificate with
    # the machine's CAs only, and the cluster's CA is not among them.
    hosts = real_node.trust_registry(registry.host, registry.ca.cert)
    lines = hosts.read_text().splitlines()
    hosts.write_text("".join(f"{line}\n" for line in lines if not line.strip().startswith("ca =")))
    try:
        await run_pod(kube, namespace, "untrusted", pushed)
        messages = await pull_events(kube, namespace, "untrusted", "Failed")
        assert any("certificate signed by unknown authority" in m for m in messages), messages
    finally:
        real_node.trust_registry(registry.host, registry.ca.cert)
    # Trusted again, the same pod pulls (the kubelet retries with back-off).
    await running(kube, namespace, "untrusted", timeout=180)
    await kube.delete(PODS.path(namespace, name="untrusted"))
