"""The local registry's pieces that need no process: its pinned build, its certificate (signed
by the cluster's CA, valid for loopback) and the ``hosts.toml`` the real node trusts it by."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from kube_nudge_dev import build
from kube_nudge_dev.certs import issue_serving_cert, write_ca
from kube_nudge_dev.node import NodeBinaries, RealNode, preloaded_images_policy


def test_each_release_tool_is_pinned_into_a_cache_directory_of_its_own() -> None:
    tools = (build.REGISTRY, build.COSIGN, build.SYFT, build.ACTIONLINT)
    homes = {tool.home() for tool in tools}
    assert len(homes) == len(tools)
    for tool in tools[1:]:
        assert tool.module is None and tool.toolchain is None  # `go install pkg@version`
        assert tool.home().name == f"{tool.name}-{tool.version}"
    for tool in tools:
        assert tool.version.startswith("v") and tool.version.count(".") == 2


def test_the_registry_builds_the_version_its_wrapper_module_requires() -> None:
    wrapper = Path(build.__file__).parent / "gomod" / "registry"
    requires = (wrapper / "go.mod").read_text()
    assert f"github.com/distribution/distribution/v3 {build.REGISTRY_VERSION}\n" in requires
    assert (
        f"distribution/v3 {build.REGISTRY_VERSION}/go.mod h1:" in (wrapper / "go.sum").read_text()
    )
    assert "storage/driver/filesystem" in (wrapper / "main.go").read_text()
    assert build.REGISTRY.home().name.startswith(f"registry-{build.REGISTRY_VERSION}-")


def test_the_registry_certificate_is_the_cluster_cas_and_serves_loopback(tmp_path: Path) -> None:
    ca = write_ca(tmp_path / "pki")
    cert, key = tmp_path / "registry.crt", tmp_path / "registry.key"
    issue_serving_cert(ca, cert, key, "kube-nudge-dev-registry")
    issued = x509.load_pem_x509_certificate(cert.read_bytes())
    authority = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    assert issued.issuer == authority.subject
    public = authority.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    issued.verify_directly_issued_by(authority)  # raises unless the CA's key signed it
    names = issued.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert key.stat().st_mode & 0o777 == 0o600


def test_the_node_trusts_a_registry_by_a_hosts_toml_with_its_ca(tmp_path: Path) -> None:
    node = RealNode(
        tmp_path, kubeconfig=tmp_path / "kubeconfig", api_port=1,
        binaries=NodeBinaries(tmp_path / "kubelet", tmp_path / "kube-proxy"), images=(),
        pause_image="pause", free_port=lambda: 1, kube_minor=37,
    )  # fmt: skip
    ca = tmp_path / "ca.crt"
    ca.write_text("a CA\n")
    hosts = node.trust_registry("127.0.0.1:5443", ca)
    assert hosts == tmp_path / "certs.d" / "127.0.0.1:5443" / "hosts.toml"
    config = tomllib.loads(hosts.read_text())
    assert config["server"] == "https://127.0.0.1:5443"
    host = config["host"]["https://127.0.0.1:5443"]
    assert host["capabilities"] == ["pull", "resolve"]
    assert Path(host["ca"]).read_text() == "a CA\n"
    node.distrust_registry("127.0.0.1:5443")
    assert not hosts.parent.exists()


def test_the_node_allows_its_loaded_images_without_a_pull_where_the_kubelet_checks() -> None:
    """From 1.35 the kubelet checks credentials of images it pulled; before, it refuses the
    settings (the feature gate is off)."""
    assert preloaded_images_policy(34) == {}
    assert (
        preloaded_images_policy(35)
        == preloaded_images_policy(37)
        == {
            "imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
            "preloadedImagesVerificationAllowlist": ["localhost/*"],
        }
    )
