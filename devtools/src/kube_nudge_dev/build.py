"""Find or build the control-plane binaries the local cluster runs.

Binaries are built from the Go module proxy with pinned versions (the wrapper modules in
``gomod/`` are shipped as package data of ``kube-nudge-dev``, so this works from a plain
``pip install``), into a per-version cache directory outside any checkout, and only when
missing. Users can point at prebuilt binaries with ``KUBE_NUDGE_BIN_DIR`` or envtest's
``KUBEBUILDER_ASSETS``. Which Kubernetes release: ``releases.py`` (one per supported minor,
each with its own wrapper module and cache directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess  # nosec B404 # runs the Go toolchain to build the dev control plane
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kube_nudge_dev.releases import DEFAULT_MINOR as _DEFAULT_MINOR
from kube_nudge_dev.releases import KubeRelease, UnknownRelease, release, selected

#: The default release's version (what the dev cluster runs unless told otherwise).
KUBERNETES_VERSION = release(_DEFAULT_MINOR).version
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"

COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)

# The real node (``kube-nudge-dev cluster --real-node``): built only when a real node is asked
# for, from the same pinned Kubernetes module as the control plane.
NODE_COMPONENTS = ("kubelet", "kube-proxy")


class BuildError(RuntimeError):
    """A binary could not be found or built; the message is one line naming the cause."""


@dataclass(frozen=True, slots=True)
class _Recipe:
    module: str | None  # wrapper module dir under gomod/, or None for `go install pkg@version`
    package: str
    ldflags: str = ""


def _kube_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
    }
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{name}={value}" for name, value in stamps.items()]
    return " ".join(flags)


_KUBE_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    *NODE_COMPONENTS,
)


def _recipe(name: str, kube: KubeRelease) -> _Recipe:
    if name == "etcd":
        return _Recipe("etcd", ".", "-s -w")
    if name == "kwok":
        return _Recipe(None, f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}", "-s -w")
    if name not in _KUBE_COMMANDS:
        raise BuildError(f"no recipe for {name!r}")
    return _Recipe(kube.module, f"k8s.io/kubernetes/cmd/{name}", _kube_ldflags(kube.version))


def chosen(kube: KubeRelease | None = None) -> KubeRelease:
    """``kube``, else the release ``$KUBE_NUDGE_KUBE_VERSION`` picks, else the default."""
    if kube is not None:
        return kube
    try:
        return selected()
    except UnknownRelease as exc:
        raise BuildError(str(exc)) from None


def cache_root() -> Path:
    """Where built binaries live: ``$KUBE_NUDGE_CACHE`` or ``~/.cache/kube-nudge``."""
    explicit = os.environ.get("KUBE_NUDGE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kube-nudge"


def _gomod_dir() -> Path:
    return Path(str(resources.files("kube_nudge_dev") / "gomod"))


def _wrapper_files(module: str) -> list[Path]:
    """The files of wrapper module ``module`` that decide its build, relative to ``gomod/``."""
    root = _gomod_dir()
    return sorted(
        path.relative_to(root)
        for path in (root / module).rglob("*")
        if path.is_file() and path.suffix in {".mod", ".sum", ".go"}
    )


def _wrappers_digest(seed: str, files: list[Path]) -> str:
    """A short digest of ``seed`` and wrapper ``files`` (their names and bytes, in order)."""
    digest = hashlib.sha256(seed.encode())
    for relative in files:
        digest.update(relative.name.encode() + (_gomod_dir() / relative).read_bytes())
    return digest.hexdigest()[:12]


def _wrapper_id(module: str, extra: str) -> str:
    """Changes whenever wrapper module ``module``'s files or ``extra`` change."""
    return _wrappers_digest(extra, _wrapper_files(module))


def _version_id(kube: KubeRelease | None = None) -> str:
    """Changes whenever a pinned version or a wrapper module of ``kube`` changes.

    Only the pins, the wrapper files' names and their bytes go in (etcd's and that
    release's, never another release's), in the order of their paths relative to
    ``gomod/``: where the package is installed (or which package ships it) never changes
    the id, so moving the code does not force a rebuild.
    """
    kube = chosen(kube)
    wrappers = sorted([*_wrapper_files("etcd"), *_wrapper_files(kube.module)])
    return _wrappers_digest(f"{kube.version} {ETCD_VERSION} {KWOK_VERSION}", wrappers)


def bin_cache_dir(kube: KubeRelease | None = None) -> Path:
    """The per-version directory where this release's binaries are built."""
    kube = chosen(kube)
    return cache_root() / f"controlplane-{kube.version}-{_version_id(kube)}" / "bin"


def _prebuilt_dirs() -> list[Path]:
    dirs = []
    for var in ("KUBE_NUDGE_BIN_DIR", "KUBEBUILDER_ASSETS"):
        value = os.environ.get(var)
        if value:
            dirs.append(Path(value))
    return dirs


def find_binary(name: str, kube: KubeRelease | None = None) -> Path | None:
    """Return an executable for ``name`` from the prebuilt dirs or the cache, if any."""
    for directory in [*_prebuilt_dirs(), bin_cache_dir(kube)]:
        candidate = directory / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _go_env(toolchain: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        # A release that needs a newer Go names it; the go command fetches that toolchain.
        GOTOOLCHAIN=toolchain or "local",
        GOWORK="off",
        CGO_ENABLED="0",
        GOFLAGS="-mod=readonly -buildvcs=false -trimpath",
    )
    return env


def _build_one(name: str, kube: KubeRelease, out_dir: Path, log: Path, go: str) -> None:
    recipe = _recipe(name, kube)
    with tempfile.TemporaryDirectory(prefix="kube-nudge-build-") as tmp:
        if recipe.module is None:
            cmd = [go, "install", f"-ldflags={recipe.ldflags}", recipe.package]
            cwd = Path(tmp)
            env = _go_env(kube.toolchain)
            env["GOBIN"] = tmp
            built = Path(tmp) / name
        else:
            # Copy the wrapper module out of the (possibly read-only) installed package.
            cwd = Path(tmp) / recipe.module
            shutil.copytree(_gomod_dir() / recipe.module, cwd)
            built = Path(tmp) / f"{name}.bin"
            cmd = [go, "build", f"-ldflags={recipe.ldflags}", "-o", str(built), recipe.package]
            env = _go_env(kube.toolchain)
        _run_go(cmd, cwd, env, log, name)
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp_target = out_dir / f".{name}.partial"
        shutil.copy2(built, tmp_target)
        tmp_target.replace(out_dir / name)  # atomic: a killed build never leaves half a binary


def ensure_binaries(
    names: tuple[str, ...] = COMPONENTS,
    *,
    kube: KubeRelease | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Path]:
    """Return a path for each binary of ``kube`` (default: :func:`chosen`), building the
    missing ones into its cache first."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    kube = chosen(kube)
    found = {name: find_binary(name, kube) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        go = shutil.which("go")
        if go is None:
            raise BuildError(
                f"cannot build {', '.join(missing)}: no Go toolchain on PATH "
                "(install Go >= 1.25, or set KUBE_NUDGE_BIN_DIR to prebuilt binaries)"
            )
        out_dir = bin_cache_dir(kube)
        out_dir.mkdir(parents=True, exist_ok=True)
        lock = out_dir.parent / ".build.lock"
        with _one_build_at_a_time(lock, f"Kubernetes {kube.version}", say):
            found = {name: find_binary(name, kube) for name in names}  # built meanwhile?
            missing = [name for name, path in found.items() if path is None]
            found.update(_build_binaries(missing, kube, out_dir, go, say))
    return {name: path for name, path in found.items() if path is not None}


def _build_binaries(
    missing: list[str], kube: KubeRelease, out_dir: Path, go: str, say: Callable[[str], None]
) -> dict[str, Path | None]:
    """Build the ``missing`` binaries of ``kube`` into ``out_dir``, one by one."""
    if not missing:
        return {}
    log = out_dir.parent / "build.log"
    say(f"building {len(missing)} Kubernetes {kube.version} binaries into {out_dir} (log: {log})")
    say("the first build downloads Go modules and compiles Kubernetes: several minutes")
    everything = time.monotonic()
    built: dict[str, Path | None] = {}
    for index, name in enumerate(missing, start=1):
        started = time.monotonic()
        say(f"  [{index}/{len(missing)}] {name} ...")
        _build_one(name, kube, out_dir, log, go)
        say(f"  [{index}/{len(missing)}] {name} built in {time.monotonic() - started:.0f} s")
        built[name] = out_dir / name
    say(f"Kubernetes {kube.version}: built in {time.monotonic() - everything:.0f} s")
    return built


# helm renders and lints the chart in deploy/helm (tests/unit/test_chart.py). It has its own
# pin and cache directory, so bumping it never rebuilds the control plane (nor the reverse).
HELM_VERSION = "v3.22.0"
# What helm's own release build stamps (its Makefile): the version `helm version` prints,
# and the Kubernetes minor of its client-go (v0.37) that `helm lint` checks deprecations
# against and `helm template` reports as .Capabilities.KubeVersion.
_HELM_LDFLAGS = " ".join(
    [
        "-s -w",
        f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
        "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
        *(
            f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
            for pkg in ("lint/rules", "chartutil")
            for part, value in (("Major", "1"), ("Minor", "37"))
        ),
    ]
)


@dataclass(frozen=True)
class GoTool:
    """A tool the tests need that is a Go module: pinned, built with ``go install`` from the
    module proxy into a cache directory of its own."""

    name: str
    package: str
    version: str
    ldflags: str
    cold: str
    """How long a cold build takes, for the progress line."""
    module: str | None = None
    """A wrapper module under ``gomod/`` to build in (a module whose own replace directives
    must be repeated), else None: ``go install package@version``."""
    toolchain: str | None = None
    """GOTOOLCHAIN for the build, where the module needs a newer Go than the local one."""
    shipped: str | None = None
    """A directory of the tool's module copied beside ``bin/`` after the build (Argo's CRDs),
    read from the module cache, never committed here."""

    def home(self) -> Path:
        """``<cache root>/<name>-<version>[-<id>]``: for a wrapper module, the id covers its
        files, the toolchain and the flags, so a change of any rebuilds."""
        if self.module is None:
            return cache_root() / f"{self.name}-{self.version}"
        extra = f"{self.toolchain} {self.ldflags}"
        return cache_root() / f"{self.name}-{self.version}-{_wrapper_id(self.module, extra)}"

    def cache_dir(self) -> Path:
        """Where it is built: ``home()/bin``."""
        return self.home() / "bin"


HELM = GoTool("helm", "helm.sh/helm/v3/cmd/helm", HELM_VERSION, _HELM_LDFLAGS, "about 3 minutes")

# promtool checks the chart's alert rules (tests/unit/test_monitoring.py). Prometheus 3.x
# publishes its Go module as v0.3XX.Y (3.XX.Y); this one is Prometheus 3.16.0.
PROMTOOL_VERSION = "v0.316.0"
PROMTOOL = GoTool(
    "promtool",
    "github.com/prometheus/prometheus/cmd/promtool",
    PROMTOOL_VERSION,
    "-s -w -X github.com/prometheus/common/version.Version=3.16.0",
    "about 5 minutes",
)


# Prometheus itself, from the same pinned module as promtool (the two share their module
# downloads and most of their build): the integration tests scrape the controller with it and
# evaluate the chart's alert rules on what it really exports (tests/integration/test_alerts.py).
# Built without the `builtinassets` tag: no web UI, which the tests never open (the HTTP API
# they query is there either way).
PROMETHEUS = GoTool(
    "prometheus",
    "github.com/prometheus/prometheus/cmd/prometheus",
    PROMTOOL_VERSION,
    PROMTOOL.ldflags,
    "about 2 minutes after promtool, 5 alone",
)


# The Argo Rollouts controller, run against the dev cluster by
# tests/integration/test_argo_rollouts_controller.py. Its go.mod needs Go 1.26.10 and pins its
# Kubernetes modules with replace directives: hence a wrapper module and a toolchain the go
# command fetches from the module proxy, for this build only. Its CRDs (manifests/crds in its
# module) are copied beside the binary for the tests to install.
ARGO_ROLLOUTS_VERSION = "v1.10.2"
ARGO_ROLLOUTS = GoTool(
    "rollouts-controller",
    "github.com/argoproj/argo-rollouts/cmd/rollouts-controller",
    ARGO_ROLLOUTS_VERSION,
    "-s -w -X github.com/argoproj/argo-rollouts/utils/version.version="
    + ARGO_ROLLOUTS_VERSION.lstrip("v"),
    "about 5 minutes",
    module="argo-rollouts",
    toolchain="go1.27.3",
    shipped="manifests/crds",
)


def argo_rollouts_binary(*, progress: Callable[[str], None] | None = None) -> Path:
    """The pinned Argo Rollouts controller, built into its cache on first use."""
    return go_tool_binary(ARGO_ROLLOUTS, progress=progress)


def argo_rollouts_crds(*, progress: Callable[[str], None] | None = None) -> list[Path]:
    """Argo Rollouts' own CRD manifests (Rollout, AnalysisRun, AnalysisTemplate,
    ClusterAnalysisTemplate, Experiment), from the module of the pinned controller."""
    argo_rollouts_binary(progress=progress)
    found = sorted((ARGO_ROLLOUTS.home() / "crds").glob("*-crd.yaml"))
    if not found:
        raise BuildError(f"no Argo Rollouts CRDs in {ARGO_ROLLOUTS.home() / 'crds'}: delete "
                         f"{ARGO_ROLLOUTS.home()} and run `make rollouts-controller`")  # fmt: skip
    return found


# The Secrets Store CSI driver, run beside the real node's kubelet by
# tests/integration/test_csi_driver_real_node.py, with two programs of ours from the same
# wrapper module (gomod/secrets-store-csi): a registrar that registers it with the kubelet (the
# kubelet's plugin registration API, what node-driver-registrar serves; that module is not on
# the module proxy) and a provider serving secrets from a file a test rewrites. The driver is
# built from its own module at the pinned version, every dependency at the version its go.mod
# pins, except monis.app/mlog (its log set-up helper), which the module proxy does not serve:
# the wrapper replaces it with a stand-in over klog (gomod/secrets-store-csi/mlog). Its
# manifests (the two CRDs, the CSIDriver object: deploy/ in its module) are copied beside the
# binary. One wrapper module, so a change to any of the three rebuilds all three.
SECRETS_STORE_CSI_VERSION = "v1.6.0"
_SSCSI = "sigs.k8s.io/secrets-store-csi-driver"
SECRETS_STORE_CSI_DRIVER = GoTool(
    "secrets-store-csi-driver",
    f"{_SSCSI}/cmd/secrets-store-csi-driver",
    SECRETS_STORE_CSI_VERSION,
    f"-s -w -X {_SSCSI}/pkg/version.BuildVersion={SECRETS_STORE_CSI_VERSION}",
    "about 3 minutes",
    module="secrets-store-csi",
    shipped="deploy",
)
CSI_REGISTRAR = GoTool(
    "csi-registrar",
    "kube-nudge.dev/tools/secrets-store-csi/registrar",
    SECRETS_STORE_CSI_VERSION,
    "-s -w",
    "under a minute after the driver",
    module="secrets-store-csi",
)
CSI_PROVIDER = GoTool(
    "csi-files-provider",
    "kube-nudge.dev/tools/secrets-store-csi/provider",
    SECRETS_STORE_CSI_VERSION,
    "-s -w",
    "under a minute after the driver",
    module="secrets-store-csi",
)
SECRETS_STORE_CSI = (SECRETS_STORE_CSI_DRIVER, CSI_REGISTRAR, CSI_PROVIDER)


def secrets_store_csi_binaries(*, progress: Callable[[str], None] | None = None) -> dict[str, Path]:
    """The driver, the registrar and the provider by name, built into their caches on first
    use (the driver first: the other two reuse its downloads and most of its build)."""
    return {tool.name: go_tool_binary(tool, progress=progress) for tool in SECRETS_STORE_CSI}


def secrets_store_csi_manifests(*, progress: Callable[[str], None] | None = None) -> list[Path]:
    """The driver's own manifests the tests install: its two CRDs (SecretProviderClass,
    SecretProviderClassPodStatus) and its CSIDriver object, from the pinned module."""
    go_tool_binary(SECRETS_STORE_CSI_DRIVER, progress=progress)
    deploy = SECRETS_STORE_CSI_DRIVER.home() / "deploy"
    found = [*sorted(deploy.glob("secrets-store.csi.x-k8s.io_*.yaml")), deploy / "csidriver.yaml"]
    if len(found) != 3 or not all(path.is_file() for path in found):
        home = SECRETS_STORE_CSI_DRIVER.home()
        raise BuildError(f"no Secrets Store CSI CRDs and CSIDriver in {deploy}: delete {home} "
                         "and run `make csi-driver`")  # fmt: skip
    return found


# The release tools (issue 45; devtools/src/kube_nudge_dev/release.py runs them): the CNCF
# distribution registry the releases are pushed to and the real node pulls from, cosign to sign
# and attest, syft for the SBOM (it reads both the Python packages' metadata and the Debian
# packages' dpkg status in the image), and actionlint for .github/workflows (`make lint`). Each
# with the version stamps of its own release build. cosign, syft and actionlint are `go install
# PACKAGE@VERSION` from the module proxy (none has replace directives). The registry is its
# module's own RootCmd built in a wrapper module (gomod/registry: every dependency at the version
# the pinned go.mod requires) that links only the filesystem and inmemory storage drivers: the
# upstream command's Azure, GCS and S3 SDKs were most of its cold build.
REGISTRY_VERSION = "v3.1.2"
REGISTRY = GoTool(
    "registry",
    "kube-nudge.dev/tools/registry",
    REGISTRY_VERSION,
    f"-s -w -X github.com/distribution/distribution/v3/version.version={REGISTRY_VERSION}",
    "about 2 minutes",
    module="registry",
)
COSIGN_VERSION = "v3.1.3"
COSIGN = GoTool(
    "cosign",
    "github.com/sigstore/cosign/v3/cmd/cosign",
    COSIGN_VERSION,
    f"-s -w -X sigs.k8s.io/release-utils/version.gitVersion={COSIGN_VERSION}",
    "about 6 minutes",
)
SYFT_VERSION = "v1.57.1"
SYFT = GoTool(
    "syft",
    "github.com/anchore/syft/cmd/syft",
    SYFT_VERSION,
    f"-s -w -X main.version={SYFT_VERSION.lstrip('v')}",
    "about 8 minutes",
)
ACTIONLINT_VERSION = "v1.7.12"
ACTIONLINT = GoTool(
    "actionlint",
    "github.com/rhysd/actionlint/cmd/actionlint",
    ACTIONLINT_VERSION,
    "-s -w",
    "about a minute",
)
RELEASE_TOOLS = (REGISTRY, COSIGN, SYFT)


def helm_cache_dir() -> Path:
    """Where the pinned helm is built: ``<cache root>/helm-<version>/bin``."""
    return HELM.cache_dir()


def helm_binary(*, progress: Callable[[str], None] | None = None) -> Path:
    """The pinned helm, built from the Go module proxy into its cache on first use."""
    return go_tool_binary(HELM, progress=progress)


def promtool_binary(*, progress: Callable[[str], None] | None = None) -> Path:
    """The pinned promtool, built from the Go module proxy into its cache on first use."""
    return go_tool_binary(PROMTOOL, progress=progress)


def prometheus_binary(*, progress: Callable[[str], None] | None = None) -> Path:
    """The pinned Prometheus server, built from the Go module proxy into its cache on first
    use."""
    return go_tool_binary(PROMETHEUS, progress=progress)


def go_tool_binary(tool: GoTool, *, progress: Callable[[str], None] | None = None) -> Path:
    """``tool``'s binary, built into its cache on first use."""
    target = tool.cache_dir() / tool.name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            f"cannot build {tool.name} {tool.version}: no Go toolchain on PATH (Go >= 1.26)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with _one_build_at_a_time(tool.home() / ".build.lock", tool.name, say):
        if target.is_file() and os.access(target, os.X_OK):
            return target  # built by whoever held the lock
        return _build_go_tool(go, tool, target, say)


@contextlib.contextmanager
def _one_build_at_a_time(lock: Path, name: str, say: Callable[[str], None]) -> Iterator[None]:
    """Hold ``lock`` while building ``name``: test sessions started side by side (pytest
    runs, make targets) each asked for a missing tool and ran one Go build each, at once;
    three of promtool beside the control plane's filled 24 GiB. Now the others wait, then
    find the binary built."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another build of {name} ({lock})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_go_tool(go: str, tool: GoTool, target: Path, say: Callable[[str], None]) -> Path:
    log = tool.home() / "build.log"
    say(f"building {tool.name} {tool.version} into {target.parent} (log: {log}; {tool.cold} cold)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kube-nudge-build-") as tmp:
        env = _go_env(tool.toolchain)
        if tool.module is None:
            env["GOBIN"] = tmp
            cwd, built = Path(tmp), Path(tmp) / tool.name
            cmd = [go, "install", f"-ldflags={tool.ldflags}", f"{tool.package}@{tool.version}"]
        else:
            # Copy the wrapper module out of the (possibly read-only) installed package.
            cwd = Path(tmp) / tool.module
            shutil.copytree(_gomod_dir() / tool.module, cwd)
            built = Path(tmp) / f"{tool.name}.bin"
            cmd = [go, "build", f"-ldflags={tool.ldflags}", "-o", str(built), tool.package]
        _run_go(cmd, cwd, env, log, tool.name)
        if tool.shipped is not None:
            _copy_shipped(go, tool, tool.shipped, cwd, env)
        partial = target.parent / f".{tool.name}.partial"
        shutil.copy2(built, partial)
        partial.replace(target)  # atomic: a killed build never leaves half a binary
    say(f"{tool.name} {tool.version} built in {time.monotonic() - started:.0f} s")
    return target


def _run_go(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, name: str) -> None:
    with log.open("ab") as sink:
        sink.write(f"\n$ {' '.join(cmd)}  (in {cwd})\n".encode())
        sink.flush()
        result = subprocess.run(  # nosec B603 # go from PATH, pinned argv, no shell
            cmd, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, check=False
        )
    if result.returncode != 0:
        raise BuildError(f"building {name} failed (exit {result.returncode}); log: {log}")


def _copy_shipped(go: str, tool: GoTool, shipped: str, cwd: Path, env: dict[str, str]) -> None:
    """Copy directory ``shipped`` of the tool's module (in the module cache) to its home."""
    module = tool.package.split("/cmd/")[0]
    found = subprocess.run(  # nosec B603 # go from PATH, pinned argv, no shell
        [go, "list", "-m", "-f", "{{.Dir}}", module],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    source = Path(found.stdout.strip()) / shipped
    if found.returncode != 0 or not source.is_dir():
        raise BuildError(f"{tool.name}: no {shipped} in module {module}: {found.stderr}")
    destination = tool.home() / Path(shipped).name
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(source, destination)
    for path in destination.rglob("*"):  # the module cache is read-only; the copy is not
        path.chmod(0o755 if path.is_dir() else 0o644)
