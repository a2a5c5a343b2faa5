"""``kube-nudge-dev release`` (``make release``): every step of a release, against a real OCI
registry. The local target and the publishing workflow (``.github/workflows/release.yml``)
both call this, so the steps the tests run are the steps that would publish (the workflow, and
keyless signing, have never run: RELEASING.md, "What has run").

1. **One version.** ``pyproject.toml``'s version is the release's; the chart's ``version`` and
   ``appVersion``, the dev tools' version, the CHANGELOG's newest heading and the git tag (when
   given) must say the same, and so must ``kube-nudge --version`` run in the built image. A
   mismatch is one line (:class:`ReleaseError`).
2. **The image**, built from the Dockerfile (``image.build_image``), pushed as
   ``REGISTRY/kube-nudge:V``; the digest the registry holds is recorded. For two platforms
   (``--platforms``, by default linux/amd64 and linux/arm64, the latter under qemu-user-static:
   ``multiarch.py``) each is pushed as ``V-ARCH`` and ``V`` is their manifest list.
3. **The chart**, packaged with ``image.repository`` and ``image.digest`` set to what was
   pushed (so ``helm install`` with no image values runs exactly that image) and pushed with
   ``helm push`` as ``oci://REGISTRY/charts/kube-nudge:V``.
4. **Signatures**: cosign signs the image and the chart by digest, with a key pair
   (``--key``) or keyless (``--keyless``: Sigstore's public Fulcio and Rekor, with the
   workflow's OIDC identity).
5. **SBOM**: syft reads the pushed image (the Python distributions' metadata and dpkg's
   status: both kinds of packages) into CycloneDX JSON, attached as a signed attestation (to
   each platform's image).
6. **Provenance**: a SLSA v1 provenance predicate naming the commit, attached the same way (to
   the image, or the manifest list).
7. **Verified** as a user would: ``cosign verify`` of both, ``verify-attestation`` of both
   attestations.

Everything it writes goes to ``--out`` (``build/release``), with ``release.json`` saying
what was published where.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import socket
import subprocess  # nosec B404 # runs the pinned helm, cosign, syft, git and podman
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from kube_nudge_dev.build import COSIGN, SYFT, go_tool_binary, helm_binary

CHART_DIR = Path("deploy/helm/kube-nudge")
IMAGE_NAME = "kube-nudge"
CHART_NAME = "kube-nudge"
#: The OIDC issuer of GitHub Actions, whose identity keyless signatures carry.
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_TIMEOUT = 1800.0


class ReleaseError(RuntimeError):
    """A release step failed, or its inputs disagree; the message is one line."""


@dataclass(frozen=True)
class Signing:
    """How to sign: with the cosign key pair ``key`` (and ``key``'s ``.pub``), or keyless
    (``key`` None) with an identity matching ``identity`` (a regular expression) issued by
    ``issuer``."""

    key: Path | None = None
    identity: str = ""
    issuer: str = GITHUB_ISSUER

    @property
    def public_key(self) -> Path:
        """The public half of ``key`` (``cosign.key`` → ``cosign.pub``)."""
        if self.key is None:
            raise ReleaseError("keyless signing has no public key")
        return self.key.with_suffix(".pub")


@dataclass(frozen=True)
class Target:
    """Where a release goes: ``prefix`` (``HOST[:PORT][/PATH]``) and the CA its TLS is
    verified with (None: the system's)."""

    prefix: str
    ca: Path | None = None

    @property
    def image(self) -> str:
        """The image's repository: ``PREFIX/kube-nudge``."""
        return f"{self.prefix}/{IMAGE_NAME}"

    @property
    def charts(self) -> str:
        """Where ``helm push`` puts the chart: ``oci://PREFIX/charts``."""
        return f"oci://{self.prefix}/charts"

    @property
    def chart(self) -> str:
        """The chart's repository: ``PREFIX/charts/kube-nudge``."""
        return f"{self.prefix}/charts/{CHART_NAME}"


@dataclass(frozen=True)
class Released:
    """What one release published (``release.json``)."""

    version: str
    commit: str
    image: str
    image_digest: str
    chart: str
    chart_digest: str
    sbom: str
    provenance: str
    platforms: dict[str, str] = field(default_factory=dict)
    """Each architecture's image manifest digest (one, the image's own, unless a manifest
    list was pushed)."""

    @property
    def image_ref(self) -> str:
        """The image by digest: ``REPO@sha256:...``."""
        return f"{self.image}@{self.image_digest}"

    @property
    def chart_ref(self) -> str:
        """The chart by digest: ``REPO@sha256:...``."""
        return f"{self.chart}@{self.chart_digest}"


# --- 1. one version -----------------------------------------------------------------------------


def declared_versions(repo: Path) -> dict[str, str]:
    """Where a release's version is written, and what each says (``pyproject.toml`` first:
    the one place it comes from)."""
    chart = yaml.safe_load((repo / CHART_DIR / "Chart.yaml").read_text())
    values = yaml.safe_load((repo / CHART_DIR / "values.yaml").read_text())
    found = {
        "pyproject.toml": _project_version(repo / "pyproject.toml"),
        "devtools/pyproject.toml": _project_version(repo / "devtools/pyproject.toml"),
        "Chart.yaml version": str(chart.get("version", "")),
        "Chart.yaml appVersion": str(chart.get("appVersion", "")),
        "CHANGELOG.md": changelog_version(repo / "CHANGELOG.md")[0],
    }
    tag = str((values.get("image") or {}).get("tag") or "")
    if tag:  # empty: the chart's appVersion
        found["values.yaml image.tag"] = tag
    return found


def _project_version(pyproject: Path) -> str:
    return str(tomllib.loads(pyproject.read_text()).get("project", {}).get("version", ""))


def changelog_version(changelog: Path) -> tuple[str, bool]:
    """The version of the CHANGELOG's newest ``## `` heading, and whether it is still
    ``(unreleased)``."""
    for line in changelog.read_text().splitlines():
        if line.startswith("## "):
            words = line[3:].split()
            return (words[0] if words else ""), "(unreleased)" in line
    return "", False


def check_versions(repo: Path, tag: str | None = None) -> str:
    """The release's version, once every place agrees (and ``tag`` is ``vVERSION``, with the
    CHANGELOG's entry dated rather than unreleased); else :class:`ReleaseError` naming the
    first place that disagrees."""
    found = declared_versions(repo)
    version = found["pyproject.toml"]
    if not _SEMVER.match(version):
        raise ReleaseError(f"version mismatch: pyproject.toml's {version!r} is not X.Y.Z")
    for where, value in found.items():
        if value != version:
            said = value or "nothing"
            raise ReleaseError(
                f"version mismatch: pyproject.toml says {version}, {where} says {said}"
            )
    if tag is not None:
        if tag != f"v{version}":
            raise ReleaseError(f"version mismatch: pyproject.toml says {version}, the tag {tag}")
        if changelog_version(repo / "CHANGELOG.md")[1]:
            raise ReleaseError(
                f"CHANGELOG.md's {version} entry is still (unreleased): date it to tag {tag}"
            )
    return version


def check_image_version(version: str, printed: str) -> None:
    """``kube-nudge --version`` in the image must print ``kube-nudge VERSION``."""
    if printed.strip() != f"kube-nudge {version}":
        raise ReleaseError(
            f"version mismatch: pyproject.toml says {version}, the image's `kube-nudge "
            f"--version` says {printed.strip() or 'nothing'}"
        )


# --- running the tools --------------------------------------------------------------------------


def run_tool(
    argv: Sequence[str], *, what: str, env: Mapping[str, str] | None = None, log: Path
) -> str:
    """Run one tool (no shell), its output appended to ``log``; its stdout. A failure is a
    :class:`ReleaseError` naming the step and the tool's last line of output."""
    merged = {**os.environ, **(env or {})}
    result = subprocess.run(  # nosec B603 # pinned tools, argv built here, no shell
        list(argv), env=merged, capture_output=True, text=True, timeout=_TIMEOUT, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(argv)}\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        last = lines[-1].strip()[:300] if lines else "no output"
        raise ReleaseError(f"{what} failed (exit {result.returncode}): {last}; log: {log}")
    return result.stdout + result.stderr


def git_commit(repo: Path) -> tuple[str, bool]:
    """The checkout's commit and whether its tree is clean (tracked files unchanged)."""
    git = shutil.which("git")
    if git is None:
        raise ReleaseError("git not found: a release names its commit")
    head = subprocess.run(  # nosec B603 # git from PATH, fixed argv
        [git, "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    if head.returncode != 0:
        raise ReleaseError(f"{repo} is not a git checkout: a release names its commit")
    status = subprocess.run(  # nosec B603 # git from PATH, fixed argv
        [git, "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return head.stdout.strip(), status.returncode == 0 and not status.stdout.strip()


def git_source(repo: Path) -> str:
    """The source's URI for the provenance: the workflow's repository, else ``origin``'s URL,
    else the checkout's path."""
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    if server and repository:
        return f"git+{server}/{repository}"
    git = shutil.which("git") or "git"
    found = subprocess.run(  # nosec B603 # git from PATH, fixed argv
        [git, "-C", str(repo), "config", "--get", "remote.origin.url"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return f"git+{found.stdout.strip() or repo.resolve().as_uri()}"


# --- 3. the chart -------------------------------------------------------------------------------


def stage_chart(repo: Path, into: Path, version: str, image: str, digest: str) -> Path:
    """A copy of the chart whose default image is ``image@digest`` (``values.yaml``'s
    ``image.repository`` and ``image.digest``, its comments kept) and whose ``appVersion`` is
    ``version``; checked by reading it back."""
    staged = into / CHART_NAME
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(repo / CHART_DIR, staged)
    values = staged / "values.yaml"
    text, count = re.subn(
        r"^(image:\n(?:  #.*\n|  \w+:.*\n)*?  repository: ).*$", rf"\g<1>{image}",
        values.read_text(), count=1, flags=re.MULTILINE,
    )  # fmt: skip
    text, digests = re.subn(
        r"^(image:\n(?:  #.*\n|  \w+:.*\n)*?  digest: ).*$", rf'\g<1>"{digest}"', text,
        count=1, flags=re.MULTILINE,
    )  # fmt: skip
    values.write_text(text)
    read = yaml.safe_load(text)["image"]
    appversion = str(yaml.safe_load((staged / "Chart.yaml").read_text())["appVersion"])
    if (count, digests) != (1, 1) or (read["repository"], read["digest"]) != (image, digest):
        raise ReleaseError(f"could not set image.repository and image.digest in {values}")
    if appversion != version:
        raise ReleaseError(
            f"version mismatch: pyproject.toml says {version}, appVersion {appversion}"
        )
    return staged


def pushed_digest(output: str, what: str) -> str:
    """The ``Digest: sha256:...`` line ``helm push`` prints."""
    found = re.search(r"^Digest:\s*(sha256:[0-9a-f]{64})\s*$", output, re.MULTILINE)
    if found is None:
        raise ReleaseError(f"{what} printed no digest")
    return found.group(1)


def helm_push_chart(staged: Path, out: Path, target: Target, log: Path) -> tuple[str, str]:
    """``helm package`` the staged chart into ``out`` and ``helm push`` it to
    ``oci://PREFIX/charts``; the chart's repository and digest."""
    helm = str(helm_binary())
    run_tool([helm, "package", str(staged), f"--destination={out}"], what="helm package", log=log)
    version = yaml.safe_load((staged / "Chart.yaml").read_text())["version"]
    package = out / f"{CHART_NAME}-{version}.tgz"
    tls = [f"--ca-file={target.ca}"] if target.ca else []
    pushed = run_tool([helm, "push", str(package), target.charts, *tls], what="helm push", log=log)
    return target.chart, pushed_digest(pushed, "helm push")


# --- 4.-6. signatures, the SBOM, the provenance ----------------------------------------------


def cosign_signing_flags(signing: Signing, target: Target) -> list[str]:
    """What ``cosign sign`` and ``attest`` take: the key and no transparency log (a key pair
    needs none, and the local registry's releases are not public), or nothing (keyless: the
    public signing config: Fulcio, Rekor); the registry's CA."""
    tls = [f"--registry-cacert={target.ca}"] if target.ca else []
    if signing.key is None:
        return ["--yes", *tls]
    return ["--yes", f"--key={signing.key}", "--tlog-upload=false", "--use-signing-config=false",
            *tls]  # fmt: skip


def cosign_verify_flags(signing: Signing, target: Target) -> list[str]:
    """What ``cosign verify`` and ``verify-attestation`` take to check the same identity."""
    tls = [f"--registry-cacert={target.ca}"] if target.ca else []
    if signing.key is None:
        return [f"--certificate-identity-regexp={signing.identity}",
                f"--certificate-oidc-issuer={signing.issuer}", *tls]  # fmt: skip
    return [f"--key={signing.public_key}", "--insecure-ignore-tlog=true", *tls]


def _cosign_env() -> dict[str, str]:
    # A key pair made for a test has an empty password; a real one's comes from the caller's
    # COSIGN_PASSWORD (never a prompt: stdin is closed).
    return {"COSIGN_PASSWORD": os.environ.get("COSIGN_PASSWORD", "")}


def sign(ref: str, signing: Signing, target: Target, log: Path, *, recursive: bool = False) -> None:
    """``cosign sign`` ``ref`` (by digest); ``recursive``: a manifest list and each image in it."""
    cosign = str(go_tool_binary(COSIGN))
    argv = [cosign, "sign", *cosign_signing_flags(signing, target),
            *(["--recursive"] if recursive else []), ref]  # fmt: skip
    run_tool(argv, what=f"cosign sign {ref}", env=_cosign_env(), log=log)


def attest(
    ref: str, kind: str, predicate: Path, signing: Signing, target: Target, log: Path
) -> None:
    """``cosign attest`` ``predicate`` of type ``kind`` (``cyclonedx``, ``slsaprovenance1``)
    to ``ref``."""
    cosign = str(go_tool_binary(COSIGN))
    argv = [cosign, "attest", *cosign_signing_flags(signing, target), f"--type={kind}",
            f"--predicate={predicate}", ref]  # fmt: skip
    run_tool(argv, what=f"cosign attest --type {kind}", env=_cosign_env(), log=log)


def sbom(ref: str, target: Target, path: Path, log: Path) -> Path:
    """The CycloneDX SBOM syft makes of pushed image ``ref`` into ``path``, checked to list
    both Python and Debian packages."""
    syft = str(go_tool_binary(SYFT))
    env = {"SYFT_CHECK_FOR_APP_UPDATE": "false"}
    if target.ca:
        env["SYFT_REGISTRY_CA_CERT"] = str(target.ca)
    run_tool([syft, "scan", f"registry:{ref}", f"--output=cyclonedx-json={path}"],
             what="syft scan", env=env, log=log)  # fmt: skip
    kinds = sbom_package_kinds(json.loads(path.read_text()))
    for kind, name in (("pypi", "Python"), ("deb", "Debian")):
        if not kinds.get(kind):
            raise ReleaseError(f"the SBOM of {ref} lists no {name} packages ({path})")
    return path


def sbom_package_kinds(document: Mapping[str, object]) -> dict[str, list[str]]:
    """The names of a CycloneDX document's components by purl type (``pypi``, ``deb``...)."""
    kinds: dict[str, list[str]] = {}
    for component in document.get("components") or []:  # type: ignore[attr-defined]
        purl = str(component.get("purl", ""))
        if purl.startswith("pkg:"):
            kind = purl[4:].split("/", 1)[0]
            kinds.setdefault(kind, []).append(str(component.get("name", "")))
    return kinds


def provenance(
    repo: Path, version: str, target: Target, base: str, started: str
) -> dict[str, object]:
    """A SLSA v1 provenance predicate: the commit built (``resolvedDependencies``), what the
    release was asked for, who built it (the workflow's run, or this machine)."""
    commit, clean = git_commit(repo)
    server, workflow = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_WORKFLOW_REF")
    if server and workflow:
        builder = f"{server}/{workflow}"
        env = os.environ
        run = (f"{server}/{env.get('GITHUB_REPOSITORY')}/actions/runs/{env.get('GITHUB_RUN_ID')}"
               f"/attempts/{env.get('GITHUB_RUN_ATTEMPT')}")  # fmt: skip
    else:
        builder = f"https://{socket.gethostname()}/kube-nudge-dev/release"
        run = f"kube-nudge-dev-release-{started}"
    return {
        "buildDefinition": {
            "buildType": "https://github.com/kube-nudge/kube-nudge/blob/main/RELEASING.md",
            "externalParameters": {"version": version, "registry": target.prefix, "base": base},
            "internalParameters": {"treeClean": clean},
            "resolvedDependencies": [{"uri": git_source(repo), "digest": {"gitCommit": commit}}],
        },
        "runDetails": {
            "builder": {"id": builder},
            "metadata": {"invocationId": run, "startedOn": started, "finishedOn": _now()},
        },
    }


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def verify(released: Released, signing: Signing, target: Target, log: Path) -> None:
    """What a user runs: ``cosign verify`` of the image and the chart, and
    ``verify-attestation`` of the SBOM and the provenance on the image."""
    cosign = str(go_tool_binary(COSIGN))
    flags = cosign_verify_flags(signing, target)
    for ref in (released.image_ref, released.chart_ref):
        run_tool([cosign, "verify", *flags, ref], what=f"cosign verify {ref}", log=log)
    platforms = [f"{released.image}@{digest}" for digest in released.platforms.values()]
    checks = [("slsaprovenance1", released.image_ref)]
    checks += [("cyclonedx", ref) for ref in platforms or [released.image_ref]]
    for kind, ref in checks:
        run_tool([cosign, "verify-attestation", *flags, f"--type={kind}", ref],
                 what=f"cosign verify-attestation --type {kind} {ref}", log=log)  # fmt: skip


# --- the whole release --------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One release: the checkout, where it goes, how it is signed, the git tag (a published
    release: the CHANGELOG entry dated, the tree clean), the base image (``dev``: the Debian
    base made here) and where its files go."""

    repo: Path
    target: Target
    signing: Signing
    out: Path
    tag: str | None = None
    base: str = "dev"
    archs: tuple[str, ...] = ("amd64",)
    """The image's architectures: more than one pushes a manifest list (foreign ones are built
    under emulation: ``multiarch.py``)."""


def release(request: Request, say: Callable[[str], None]) -> Released:
    """Every step, in order; what was published (also written to ``OUT/release.json``)."""
    repo, target, out, log = request.repo, request.target, request.out, request.out / "release.log"
    started = _now()
    version = check_versions(repo, request.tag)
    commit, clean = git_commit(repo)
    if request.tag is not None and not clean:
        raise ReleaseError(f"the tree has uncommitted changes: tag {request.tag} names {commit}")
    say(f"release {version} of {commit[:12]} to {target.prefix} ({', '.join(request.archs)})")
    digest, platforms = publish_image(request, version, log, say)
    staged = stage_chart(repo, out / "chart", version, target.image, digest)
    chart, chart_digest = helm_push_chart(staged, out, target, log)
    say(f"pushed {target.charts}/{CHART_NAME}:{version} as {chart_digest}")
    sbom_path = _sbom_path(out, next(iter(platforms)), len(platforms) > 1)
    released = Released(version, commit, target.image, digest, chart, chart_digest,
                        str(sbom_path), str(out / "provenance.json"), platforms)  # fmt: skip
    sign(released.image_ref, request.signing, target, log, recursive=len(platforms) > 1)
    sign(released.chart_ref, request.signing, target, log)
    describe(request, released, started, log)
    say("signed the image and the chart; attached the SBOM and the provenance")
    verify(released, request.signing, target, log)
    (out / "release.json").write_text(json.dumps(asdict(released), indent=2) + "\n")
    say(f"verified: cosign verify {released.image_ref} and {released.chart_ref}")
    return released


def publish_image(
    request: Request, version: str, log: Path, say: Callable[[str], None]
) -> tuple[str, dict[str, str]]:
    """Build the image for each architecture, check its ``kube-nudge --version`` and push it:
    as ``IMAGE:VERSION`` alone, or as ``IMAGE:VERSION-ARCH`` each under a manifest list
    ``IMAGE:VERSION``. The digest of ``IMAGE:VERSION`` and each architecture's."""
    from kube_nudge_dev.image import build_image, host_arch, push_image, push_index
    from kube_nudge_dev.multiarch import enable

    for arch in request.archs:
        if arch != host_arch():
            for step in enable(arch):
                say(step)
    target, cert_dir = request.target, _cert_dir(request.target, request.out)
    python_image = None if request.base == "dev" else request.base
    single = len(request.archs) == 1
    platforms: dict[str, str] = {}
    for arch in request.archs:
        built = build_image(request.repo, python_image=python_image, arch=arch)
        check_image_version(version, image_version(built.ref, log))
        tag = f"{target.image}:{version}" if single else f"{target.image}:{version}-{arch}"
        platforms[arch] = push_image(built.ref, tag, cert_dir=cert_dir)
        say(f"pushed {tag} as {platforms[arch]}")
    if single:
        return platforms[request.archs[0]], platforms
    refs = [f"{target.image}@{digest}" for digest in platforms.values()]
    index = push_index(refs, f"{target.image}:{version}", cert_dir=cert_dir)
    say(f"pushed the manifest list {target.image}:{version} as {index}")
    return index, platforms


def describe(request: Request, released: Released, started: str, log: Path) -> None:
    """Attach the SBOM of each architecture's image to it, and the provenance to the image
    (the manifest list, when there is one)."""
    target, signing = request.target, request.signing
    multi = len(released.platforms) > 1
    for arch, digest in released.platforms.items():
        ref = f"{released.image}@{digest}"
        path = _sbom_path(request.out, arch, multi)
        sbom(ref, target, path, log)
        attest(ref, "cyclonedx", path, signing, target, log)
    predicate = provenance(request.repo, released.version, target, request.base, started)
    Path(released.provenance).write_text(json.dumps(predicate, indent=2) + "\n")
    attest(released.image_ref, "slsaprovenance1", Path(released.provenance), signing, target, log)


def _sbom_path(out: Path, arch: str, multi: bool) -> Path:
    return out / (f"sbom-{arch}.cdx.json" if multi else "sbom.cdx.json")


def image_version(ref: str, log: Path) -> str:
    """What ``kube-nudge --version`` prints in image ``ref`` (no network, read-only root)."""
    from kube_nudge_dev.image import RUN_LIMITS, podman_argv

    argv = podman_argv("run", "--rm", "--network=none", "--read-only", *RUN_LIMITS, ref,
                       "--version")  # fmt: skip
    out = run_tool(argv, what="kube-nudge --version in the image", log=log)
    # podman's own warnings (a foreign platform's image) come first, on stderr
    printed = [line for line in out.splitlines() if not line.startswith("WARNING")]
    return "\n".join(printed)


def _cert_dir(target: Target, out: Path) -> Path | None:
    """A directory holding only the registry's CA, as podman's ``--cert-dir`` wants it."""
    if target.ca is None:
        return None
    directory = out / "certs"
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(target.ca, directory / "ca.crt")
    return directory


def make_key_pair(directory: Path, log: Path) -> Signing:
    """A new cosign key pair (empty password) in ``directory``: ``cosign.key``, ``cosign.pub``."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("cosign.key", "cosign.pub"):
        (directory / name).unlink(missing_ok=True)
    cosign = str(go_tool_binary(COSIGN))
    no_password = {"COSIGN_PASSWORD": ""}  # nosec B105 # a throwaway key pair, by design
    run_tool([cosign, "generate-key-pair", f"--output-key-prefix={directory / 'cosign'}"],
             what="cosign generate-key-pair", env=no_password, log=log)  # fmt: skip
    return Signing(key=directory / "cosign.key")


# --- the command line ---------------------------------------------------------------------------

_PLATFORMS = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
_PREFIX = re.compile(r"^[a-z0-9.-]+(:\d{1,5})?(/[a-z0-9._-]+)*$")
_TAG = re.compile(r"^v\d+\.\d+\.\d+$")
#: A base image a release may build on: by digest, so a tag that moves can't change it.
_PINNED = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")


class UsageError(ValueError):
    """A flag's value is wrong; the message is one line naming the flag."""


def keyless_identity() -> str:
    """The identity a keyless release from this repository's release workflow carries, as
    ``cosign verify --certificate-identity-regexp`` takes it (empty outside a workflow)."""
    server, repository = os.environ.get("GITHUB_SERVER_URL"), os.environ.get("GITHUB_REPOSITORY")
    if not (server and repository):
        return ""
    workflow = f"{server}/{repository}/.github/workflows/release.yml@refs/tags/v"
    return "^" + re.escape(workflow)


def parse_request(args: argparse.Namespace) -> Request:
    """The release the flags ask for, every flag checked (:class:`UsageError` on the first
    wrong one). Without ``--registry`` the target is filled in later (a registry of its own)."""
    if args.registry is not None and not _PREFIX.match(args.registry):
        raise UsageError(f"--registry {args.registry!r}: want HOST[:PORT][/PATH], no scheme")
    if args.ca is not None and (args.registry is None or not Path(args.ca).is_file()):
        raise UsageError(f"--ca {args.ca!r}: want a CA file, with --registry")
    if args.key is not None and args.keyless:
        raise UsageError("--key and --keyless: choose one")
    if args.key is not None and not (
        Path(args.key).is_file() and Path(args.key).with_suffix(".pub").is_file()
    ):
        raise UsageError(f"--key {args.key!r}: want a cosign private key with its .pub beside it")
    identity = args.identity or keyless_identity()
    if args.keyless and (args.registry is None or not identity):
        raise UsageError("--keyless: needs --registry and --identity (or a GitHub Actions run)")
    if args.tag is not None and not _TAG.match(args.tag):
        raise UsageError(f"--tag {args.tag!r}: want vX.Y.Z")
    if args.base != "dev" and not _PINNED.match(args.base):
        raise UsageError(f"--base {args.base!r}: want dev or an image pinned by digest, "
                         "NAME@sha256:<64 hex>")  # fmt: skip
    platforms = args.platforms.split(",")
    if not set(platforms) <= set(_PLATFORMS) or len(set(platforms)) != len(platforms):
        raise UsageError(f"--platforms {args.platforms!r}: want some of {','.join(_PLATFORMS)}")
    repo = Path(args.repo)
    if not (repo / "pyproject.toml").is_file() or not (repo / CHART_DIR).is_dir():
        raise UsageError(f"--repo {args.repo!r}: not a kube-nudge checkout")
    key = Path(args.key) if args.key else None
    signing = Signing(key=key, identity=identity) if (key or args.keyless) else Signing()
    target = Target(args.registry or "", Path(args.ca) if args.ca else None)
    archs = tuple(_PLATFORMS[platform] for platform in platforms)
    return Request(repo, target, signing, Path(args.out), args.tag, args.base, archs)


def run(request: Request, say: Callable[[str], None]) -> Released:
    """:func:`release`, first starting a registry of its own (throwaway CA) when no
    ``--registry`` was given and making a throwaway key pair when neither ``--key`` nor
    ``--keyless`` was."""
    from dataclasses import replace

    from kube_nudge_dev.cluster import free_port
    from kube_nudge_dev.registry import standalone

    request.out.mkdir(parents=True, exist_ok=True)
    if request.signing.key is None and not request.signing.identity:
        request = replace(
            request, signing=make_key_pair(request.out / "keys", request.out / "release.log")
        )
        say(f"signing with a throwaway key pair: {request.signing.public_key}")
    if request.target.prefix:
        return release(request, say)
    with standalone(free_port=free_port) as registry:
        say(f"no --registry: releasing to a registry of its own at {registry.host}")
        return release(replace(request, target=Target(registry.host, registry.ca.cert)), say)
