"""A release as ``make release`` makes it (``kube_nudge_dev.release``: the same steps as the
publishing workflow), against the session's registry, installed as a user would: ``helm
install oci://...`` with no image values runs both replicas on the real node from the pushed
digest, ``cosign verify`` passes for the image and the chart, the SBOM and the provenance say
what the image holds and which commit it is, and an image changed under the same tag fails
verification."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from kube_nudge.kube.resources import DEPLOYMENTS, NAMESPACES, PODS
from kube_nudge_dev import chart
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.build import COSIGN, go_tool_binary
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.node import NODE_LABEL, TAINT_KEY, RealNode
from kube_nudge_dev.nodepods import kubectl
from kube_nudge_dev.registry import LocalRegistry, RegistryClient
from kube_nudge_dev.release import Released, Request, Signing, Target, make_key_pair, release
from kube_nudge_dev.waiting import deployment_complete, wait_for_object, wait_for_objects
from tests.integration.controller_support import REPLICA_LOGS
from tests.integration.registry_support import pull_events

pytestmark = [pytest.mark.cluster, pytest.mark.real_node]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def signing(tmp_path_factory: pytest.TempPathFactory) -> Signing:
    """The test's own cosign key pair (``cosign generate-key-pair``)."""
    directory = tmp_path_factory.mktemp("keys")
    return make_key_pair(directory, directory / "keys.log")


@pytest.fixture(scope="module")
def released(
    registry: LocalRegistry, signing: Signing, tmp_path_factory: pytest.TempPathFactory
) -> Released:
    """Every step of ``make release`` against the session's registry, with that key pair."""
    target = Target(registry.host, registry.ca.cert)
    out = tmp_path_factory.mktemp("release")
    return release(Request(REPO, target, signing, out), say=print)


def _cosign(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # the pinned cosign, argv from the test
        [str(go_tool_binary(COSIGN)), *args], capture_output=True, text=True, timeout=300,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _verify(registry: LocalRegistry, signing: Signing, *args: str) -> Any:
    """``cosign verify ARGS`` as the README says, with the key; its JSON (fails the test on a
    refusal)."""
    done = _cosign(*args, f"--key={signing.public_key}", "--insecure-ignore-tlog=true",
                   f"--registry-cacert={registry.ca.cert}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: list[Any] = []
    for line in done.stdout.splitlines():  # `verify`: one JSON list; attestations: a line each
        if line.startswith("["):
            found += json.loads(line)
        elif line.startswith("{"):
            found.append(json.loads(line))
    return found


async def test_helm_install_from_the_registry_runs_the_pushed_digest_on_the_real_node(
    kube: AdminClient, cluster: LocalCluster, real_node: RealNode, registry: LocalRegistry,
    released: Released, namespace: str, tmp_path: Path,
) -> None:  # fmt: skip
    # No image values: the chart's defaults name the pushed image by digest. Only where the
    # pods go (the real node) and what they watch (nothing of other tests) are set.
    values = tmp_path / "values.json"
    values.write_text(json.dumps({
        "nodeSelector": {NODE_LABEL: "real"},
        "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "workloadSelector": f"release-test={namespace}",
    }))  # fmt: skip
    state = f"{namespace}-kn"
    helm = ("--kubeconfig", str(cluster.kubeconfig), f"--namespace={state}")
    await asyncio.to_thread(
        chart.helm, "install", "kube-nudge", f"oci://{registry.host}/charts/kube-nudge",
        f"--version={released.version}", f"--ca-file={registry.ca.cert}", "--create-namespace",
        f"--values={values}", *helm, cwd=REPO,
    )  # fmt: skip
    try:
        await wait_for_object(kube, DEPLOYMENTS.path(state), "kube-nudge", deployment_complete,
                              timeout=240)  # fmt: skip
        pods = await wait_for_objects(kube, PODS.path(state), _two_ready, timeout=60)
        for pod in pods.values():
            [container] = pod["spec"]["containers"]
            assert container["image"] == released.image_ref
            [status] = pod["status"]["containerStatuses"]
            assert status["imageID"].endswith(f"kube-nudge@{released.image_digest}"), status
        pulled = await pull_events(kube, state, next(iter(pods)), "Pulled")
        assert any(released.image_ref in message for message in pulled), pulled
        assert any("containerd" in line for line in registry.pulls(released.image_digest))
        for name in pods:  # for the session's check that no Secret value reached a log
            log = tmp_path / f"{name}.log"
            log.write_text(await asyncio.to_thread(kubectl, cluster, "logs", "-n", state, name))
            REPLICA_LOGS.append(log)
    finally:
        await asyncio.to_thread(chart.helm, "uninstall", "kube-nudge", "--wait",
                                "--timeout=120s", *helm, cwd=REPO)  # fmt: skip
        await kube.delete(NAMESPACES.path(name=state))


def _two_ready(pods: dict[str, Any]) -> bool:
    ready = [
        pod for pod in pods.values()
        if not pod["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True"
                for c in pod.get("status", {}).get("conditions", []))
    ]  # fmt: skip
    return len(ready) == 2


def test_cosign_verifies_the_image_and_the_chart_by_their_tags(
    registry: LocalRegistry, signing: Signing, released: Released
) -> None:
    for repository, digest in ((released.image, released.image_digest),
                               (released.chart, released.chart_digest)):  # fmt: skip
        found = _verify(registry, signing, "verify", f"{repository}:{released.version}")
        [claim] = _signatures(found)
        assert claim["critical"]["image"]["docker-manifest-digest"] == digest


def test_the_sbom_and_the_provenance_are_signed_and_say_what_and_which_commit(
    registry: LocalRegistry, signing: Signing, released: Released
) -> None:
    def predicate(kind: str) -> Any:
        [envelope] = _verify(registry, signing, "verify-attestation", f"--type={kind}",
                             released.image_ref)  # fmt: skip
        statement = json.loads(base64.b64decode(envelope["payload"]))
        [subject] = statement["subject"]
        assert f"sha256:{subject['digest']['sha256']}" == released.image_digest
        return statement["predicate"]

    purls = [c.get("purl", "") for c in predicate("cyclonedx")["components"]]
    assert any(p.startswith("pkg:pypi/aiohttp@") for p in purls)  # the Python packages
    assert any(p.startswith("pkg:pypi/kube-nudge@") for p in purls)
    assert any(p.startswith("pkg:deb/debian/libc6@") for p in purls)  # and the Debian ones
    [source] = predicate("slsaprovenance1")["buildDefinition"]["resolvedDependencies"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert source["digest"] == {"gitCommit": head} == {"gitCommit": released.commit}


def test_an_image_changed_under_the_same_tag_fails_verification(
    registry: LocalRegistry, signing: Signing, released: Released
) -> None:
    tampered = _tamper(registry.client(), "kube-nudge", released.version)
    assert tampered != released.image_digest
    refused = _cosign("verify", f"--key={signing.public_key}", "--insecure-ignore-tlog=true",
                      f"--registry-cacert={registry.ca.cert}",
                      f"{released.image}:{released.version}")  # fmt: skip
    assert refused.returncode != 0, refused.stdout
    assert "no signatures found" in refused.stderr or "no matching" in refused.stderr, refused
    # What the chart names, the digest, is still the signed image.
    [claim] = _signatures(_verify(registry, signing, "verify", released.image_ref))
    assert claim["critical"]["image"]["docker-manifest-digest"] == released.image_digest


def _signatures(claims: list[Any]) -> list[Any]:
    """The signatures among what ``cosign verify`` accepted (cosign v3 also lists the signed
    attestations' claims)."""
    return [c for c in claims if c["critical"]["type"] == "https://sigstore.dev/cosign/sign/v1"]


def _tamper(client: RegistryClient, repository: str, tag: str) -> str:
    """Change one file in the image's top layer and push the result under ``tag``, as someone
    with push rights could; the new manifest's digest."""
    body, media_type, _ = client.manifest(repository, tag)
    manifest = json.loads(body)
    layer = manifest["layers"][-1]
    packed = client.blob(repository, layer["digest"])
    gzipped = layer["mediaType"].endswith("+gzip")
    changed = _add_file(gzip.decompress(packed) if gzipped else packed,
                        "opt/kube-nudge/bin/kube-nudge", b"#!/bin/sh\necho tampered\n")  # fmt: skip
    blob = gzip.compress(changed, mtime=0) if gzipped else changed
    layer.update(digest=client.put_blob(repository, blob), size=len(blob))
    config = json.loads(client.blob(repository, manifest["config"]["digest"]))
    config["rootfs"]["diff_ids"][-1] = f"sha256:{hashlib.sha256(changed).hexdigest()}"
    config_blob = json.dumps(config).encode()
    manifest["config"].update(
        digest=client.put_blob(repository, config_blob), size=len(config_blob)
    )
    return client.put_manifest(repository, tag, json.dumps(manifest).encode(), media_type)


def _add_file(tar: bytes, name: str, content: bytes) -> bytes:
    """``tar`` with ``name`` (mode 0755) added or replaced."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as source, \
            tarfile.open(fileobj=out, mode="w:", format=tarfile.PAX_FORMAT) as target:  # fmt: skip
        for member in source.getmembers():
            if member.name.lstrip("./") != name:
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(content), 0o755
        target.addfile(info, io.BytesIO(content))
    return out.getvalue()
