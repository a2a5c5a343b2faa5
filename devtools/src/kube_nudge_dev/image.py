"""Build kube-nudge's container images on this machine with podman, without any registry.

- ``base_image()``: Debian bookworm with Python 3.11, made with mmdebstrap from the Debian
  mirrors and ``podman import``ed. The Dockerfile's build and final stages use it here instead
  of its default ``python:3.11-slim`` (no registry is reachable from the build machines).
- ``build_image()``: the controller image, ``podman build`` of the repository's Dockerfile on
  that base, tagged ``localhost/kube-nudge:<version>`` and ``localhost/kube-nudge:dev``.
- ``pause_image()``: the sandbox ("pause") image a kubelet node needs: a static C program
  (``pause.c``, package data) in an image ``FROM scratch``.

Each returns the image's ref and an archive in ``<cache root>/images/<kind>/`` whose name
carries a hash of everything the image is made from: an OCI archive for the controller and
pause images (a node loads it with ``ctr -n k8s.io images import``), the rootfs tar for the
base. A warm call only checks that podman holds the image with that hash (a label) and, if
the store was wiped, loads the kept archive again: seconds. Older archives of a kind are
removed when a new one is written.

podman runs as root with cgroupfs and a file events log (no systemd here), and every
container it starts, build steps included, gets lowered rlimits (``RUN_LIMITS``): raising a
limit fails on these machines ("error setting rlimit"). Build steps use the host network.
Every command has a timeout; any failure is an ``ImageError`` of one line naming the log.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import signal
import subprocess  # nosec B404 # runs podman, mmdebstrap and gcc to build the dev images
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kube_nudge_dev.build import cache_root

CONTROLLER_REPOSITORY = "localhost/kube-nudge"
DEV_TAG = "dev"
BASE_REPOSITORY = "localhost/kube-nudge-base"
PAUSE_REPOSITORY = "localhost/kube-nudge-pause"

# The label every image built here carries: the hash of its inputs (the cache key).
KEY_LABEL = "dev.kube-nudge.key"

# Global podman flags: root without systemd.
PODMAN_FLAGS = ("--cgroup-manager=cgroupfs", "--events-backend=file")
# For every container podman starts (`podman run`, build steps): lowered limits only.
RUN_LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")

# The base: what the Dockerfile's stages need (`python -m venv` with pip: python3-venv brings
# the pip and setuptools wheels ensurepip installs), from bookworm with its updates.
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3-minimal", "python3-venv", "python-is-python3", "ca-certificates")
BASE_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# Small: merged /usr the way debootstrap makes it (else apt picks the usrmerge package, which
# pulls in perl: 47 MB); no docs (but the copyright files), man pages or translations, also of
# the essential packages unpacked before these options apply; mmdebstrap itself removes the
# apt lists and the downloaded packages.
_BASE_HOOK_DIR = "/usr/share/mmdebstrap/hooks/merged-usr"
_BASE_DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
_BASE_CLEANUP = (
    'find "$1/usr/share/doc" -type f ! -name copyright -delete && '
    'rm -rf "$1/usr/share/man/"* "$1/usr/share/info/"* "$1/usr/share/locale/"*'
)
_BASE_CONFIG = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)
# DEV ONLY, never publish this base: the build machines reach PyPI through a TLS-intercepting
# proxy whose CA only the host's bundle has, and pip in the build stage uses certifi, not the
# system store. So the base made here carries the host's CA bundle and points pip at it.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_BASE_CA_PATH = "/etc/kube-nudge-dev/host-ca-bundle.crt"
_BASE_PIP_CONF = (
    "# kube-nudge dev base, made on the build machine and never published: pip trusts the\n"
    "# build host's CA bundle (its PyPI proxy intercepts TLS).\n"
    f"[global]\ncert = {_BASE_CA_PATH}\n"
)

# The pause image: a static binary, nothing else; the uid registry.k8s.io/pause runs as.
PAUSE_SOURCE = "pause.c"
_PAUSE_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror")
_PAUSE_CONTAINERFILE = 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'

# What the controller's build context leaves out of the COPY'd sources.
_NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*_cache")
# Bump when the way an image is built changes but none of its hashed inputs do.
_RECIPE = "1"

_MINUTE = 60.0
_QUICK = 2 * _MINUTE  # inspect, tag, import, load, save
_BUILD = 30 * _MINUTE  # mmdebstrap, podman build (pip downloads; 2 cores)
_LOCK_WAIT = 45 * _MINUTE


class ImageError(RuntimeError):
    """An image could not be built or found; the message is one line naming the cause."""


@dataclass(frozen=True, slots=True)
class BuiltImage:
    """An image in podman's store (``ref``) and its archive in the cache."""

    ref: str
    archive: Path


Progress = Callable[[str], None]


def images_dir() -> Path:
    """Where the archives live: ``<cache root>/images``."""
    return cache_root() / "images"


def podman_argv(*args: str) -> list[str]:
    """The podman command line for ``args`` with the global flags this machine needs."""
    return [_tool("podman"), *PODMAN_FLAGS, *args]


def _say(progress: Progress | None) -> Progress:
    return progress or (lambda line: print(line, file=sys.stderr, flush=True))


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ImageError(f"{name} not found: run `make host-packages` (needs root)")
    return found


def _preflight(*tools: str) -> None:
    if os.geteuid() != 0:
        raise ImageError(
            "building images needs root (podman's system store, mmdebstrap's root mode)"
        )
    for name in tools:
        _tool(name)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _run(
    cmd: list[str], *, what: str, timeout: float, log: Path | None = None, cwd: Path | None = None
) -> str:
    """Run ``cmd`` (no shell, no stdin) within ``timeout`` seconds; its stdout.

    With ``log``, stdout and stderr are appended there (after the command line) instead of
    returned. A failure, a timeout or a missing executable raises ``ImageError``.
    """
    code, out, err = _call(cmd, what=what, timeout=timeout, log=log, cwd=cwd)
    if code != 0:
        if log is not None:
            detail, where = _last_line(log.read_text(errors="replace")), f"; log: {log}"
        else:
            detail, where = _last_line(err or out), ""
        raise ImageError(f"{what} failed (exit {code}): {detail}{where}")
    return out


def _call(
    cmd: list[str], *, what: str, timeout: float, log: Path | None = None, cwd: Path | None = None
) -> tuple[int, str, str]:
    """``_run`` without the check: exit code, stdout, stderr (empty with ``log``)."""
    sink = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        sink = log.open("a")
        sink.write(f"\n$ {' '.join(cmd)}\n")
        sink.flush()
    try:
        process = subprocess.Popen(  # nosec B603 # podman/mmdebstrap/gcc from PATH, argv built here, no shell
            cmd,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=sink if sink is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT if sink is not None else subprocess.PIPE,
            text=True,
            start_new_session=True,  # a timeout ends the whole group it started
        )
    except OSError as exc:
        if sink is not None:
            sink.close()
        raise ImageError(f"{what}: cannot run {cmd[0]}: {exc}") from exc
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        where = f"; log: {log}" if log is not None else ""
        raise ImageError(f"{what} timed out after {timeout:.0f} s{where}") from None
    finally:
        if sink is not None:
            sink.close()
    return process.returncode, out or "", err or ""


def _stop_group(process: subprocess.Popen[str]) -> None:
    """End the process group ``_run`` started (by its id), then reap the process."""
    for signum, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            process.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def _locked() -> Iterator[None]:
    """One image build at a time per cache (``make image`` and the tests may overlap)."""
    directory = images_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as handle:
        deadline = time.monotonic() + _LOCK_WAIT
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ImageError(
                        f"another image build held {directory / '.lock'} for "
                        f"{_LOCK_WAIT / _MINUTE:.0f} minutes"
                    ) from None
                if not told:
                    print(
                        f"waiting for another image build ({directory / '.lock'})",
                        file=sys.stderr,
                        flush=True,
                    )
                    told = True
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _key_of(ref: str) -> str | None:
    """The key label of ``ref`` in podman's store; None when podman has no such image."""
    code, _, err = _call(
        podman_argv("image", "exists", ref), what="podman image exists", timeout=_QUICK
    )
    if code == 1:
        return None
    if code != 0:
        raise ImageError(f"podman image exists {ref} failed (exit {code}): {_last_line(err)}")
    label = f'{{{{index .Labels "{KEY_LABEL}"}}}}'
    out = _run(
        podman_argv("image", "inspect", "--format", label, ref),
        what=f"podman image inspect {ref}",
        timeout=_QUICK,
    )
    return out.strip() or None


def _publish(partial: Path, archive: Path) -> None:
    """Move a finished archive into place; remove the kind's older archives."""
    partial.replace(archive)  # atomic: a killed build never leaves half an archive
    for other in archive.parent.glob("*.tar"):
        if other != archive:
            other.unlink(missing_ok=True)


def _drop_other_tags(repository: str, keep: str, log: Path) -> None:
    """Remove older builds of ``repository`` (one still used by an image or container stays)."""
    out = _run(
        podman_argv("images", "--format", "{{.Repository}}:{{.Tag}}", repository),
        what=f"podman images {repository}",
        timeout=_QUICK,
    )
    for other in sorted(set(out.split()) - {keep}):
        # best effort: an old tag never fails a build
        _call(podman_argv("rmi", other), what=f"podman rmi {other}", timeout=_QUICK, log=log)


def _hash(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:12]


# --- the base ---------------------------------------------------------------------------------


def host_arch() -> str:
    """This machine's architecture as OCI names it (``amd64``, ``arm64``)."""
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _foreign(arch: str | None) -> str | None:
    """``arch`` when it is not this machine's (built under emulation), else None."""
    return arch if arch and arch != host_arch() else None


def _base_id(arch: str | None = None) -> str:
    """Changes whenever the base's recipe (or the host CA bundle it carries) changes; a
    foreign architecture's base has its own."""
    ca = HOST_CA_BUNDLE.read_bytes() if HOST_CA_BUNDLE.is_file() else b""
    recipe = [_RECIPE, BASE_SUITE, *BASE_PACKAGES, *BASE_SOURCES, _BASE_HOOK_DIR,
              *_BASE_DPKG_OPTIONS, _BASE_CLEANUP, *_BASE_CONFIG, _BASE_PIP_CONF]  # fmt: skip
    foreign = _foreign(arch)
    return _hash(*(item.encode() for item in recipe), ca, *([foreign.encode()] if foreign else []))


def base_image(*, progress: Progress | None = None, arch: str | None = None) -> BuiltImage:
    """``localhost/kube-nudge-base:<id>`` in podman's store; ``archive`` is its rootfs tar.

    Made once with mmdebstrap (a minute or two, from the Debian mirrors); the tar stays in the
    cache, so a wiped store imports it again in seconds. A foreign ``arch`` (``arm64`` here)
    is ``localhost/kube-nudge-base-<arch>:<id>``, made under emulation (``multiarch.py``).
    """
    _preflight("podman")
    with _locked():
        return _base_image(_say(progress), arch)


def _base_image(say: Progress, arch: str | None = None) -> BuiltImage:
    foreign = _foreign(arch)
    suffix = f"-{foreign}" if foreign else ""
    key = _base_id(arch)
    ref = f"{BASE_REPOSITORY}{suffix}:{key}"
    directory = images_dir() / f"base{suffix}"
    archive = directory / f"kube-nudge-base-{BASE_SUITE}-{key}.rootfs.tar"
    log = images_dir() / "build.log"
    if _key_of(ref) == key and archive.is_file():
        return BuiltImage(ref, archive)
    if not archive.is_file():
        say(f"making the base {ref} with mmdebstrap (Debian {BASE_SUITE}; log: {log})")
        started = time.monotonic()
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{archive.name}.partial"
        _mmdebstrap(partial, foreign, log)
        _publish(partial, archive)
        say(f"base rootfs made in {time.monotonic() - started:.0f} s: {archive}")
    changes = [f"--change={line}" for line in (*_BASE_CONFIG, f"LABEL {KEY_LABEL}={key}")]
    arch_flags = ["--arch", foreign] if foreign else []
    _run(
        podman_argv("import", *arch_flags, *changes, "--message", "kube-nudge dev base",
                    str(archive), ref),
        what=f"podman import {ref}",
        timeout=_QUICK,
        log=log,
    )  # fmt: skip
    _drop_other_tags(f"{BASE_REPOSITORY}{suffix}", ref, log)
    return BuiltImage(ref, archive)


def _mmdebstrap(partial: Path, foreign: str | None, log: Path) -> None:
    """The base's rootfs tar into ``partial`` (for ``foreign``, under qemu-user-static)."""
    with tempfile.TemporaryDirectory(prefix="kube-nudge-base-") as tmp:
        pip_conf = Path(tmp) / "pip.conf"
        pip_conf.write_text(_BASE_PIP_CONF)
        hooks = [_BASE_CLEANUP, f'mkdir -p "$1{Path(_BASE_CA_PATH).parent}"']
        if HOST_CA_BUNDLE.is_file():
            hooks += [
                f"upload {HOST_CA_BUNDLE} {_BASE_CA_PATH}",
                f"upload {pip_conf} /etc/pip.conf",
            ]
        cmd = [
            _tool("mmdebstrap"),
            "--variant=apt",
            "--format=tar",
            *([f"--architectures={foreign}"] if foreign else []),
            "--aptopt=APT::Install-Recommends false",
            f"--include={','.join(BASE_PACKAGES)}",
            f"--hook-dir={_BASE_HOOK_DIR}",
            *(f"--dpkgopt={option}" for option in _BASE_DPKG_OPTIONS),
            *(f"--customize-hook={hook}" for hook in hooks),
            BASE_SUITE,
            str(partial),
            *BASE_SOURCES,
        ]
        _run(cmd, what="mmdebstrap", timeout=_BUILD, log=log)


# --- the controller -----------------------------------------------------------------------------


def _version(repo: Path) -> str:
    """The version in ``repo``'s pyproject.toml (the image's tag)."""
    for needed in ("Dockerfile", "pyproject.toml"):
        if not (repo / needed).is_file():
            raise ImageError(f"no {needed} in {repo.resolve()}: run in the checkout or pass --repo")
    try:
        with (repo / "pyproject.toml").open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise ImageError(
            f"no project version in {repo.resolve() / 'pyproject.toml'}: {exc}"
        ) from exc


def _copied_sources(dockerfile: str) -> list[str]:
    """The build-context paths the Dockerfile's ``COPY`` instructions read."""
    sources: list[str] = []
    for line in dockerfile.replace("\\\n", " ").splitlines():
        words = line.split()
        if not words or words[0].upper() != "COPY":
            continue
        if any(word.startswith("--from") for word in words):
            continue
        sources += [word for word in words[1:-1] if not word.startswith("--")]
    return sources


def _stage_context(repo: Path, into: Path) -> str:
    """Copy the Dockerfile and what it COPYs (no caches, no egg-info) into ``into``; the
    hash of those files' paths and bytes."""
    dockerfile = repo / "Dockerfile"
    if not dockerfile.is_file():
        raise ImageError(f"no Dockerfile in {repo.resolve()}: run in the checkout or pass --repo")
    shutil.copy2(dockerfile, into / "Dockerfile")
    for source in _copied_sources(dockerfile.read_text()):
        origin, target = repo / source, into / source
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, target, ignore=_NOT_SOURCES, dirs_exist_ok=True)
        elif origin.is_file():
            shutil.copy2(origin, target)
        else:
            raise ImageError(f"the Dockerfile copies {source}, which {repo.resolve()} lacks")
    parts: list[bytes] = []
    for path in sorted(p for p in into.rglob("*") if p.is_file()):
        parts += [path.relative_to(into).as_posix().encode(), path.read_bytes()]
    return _hash(*parts)


def build_image(
    repo: Path = Path("."),
    *,
    progress: Progress | None = None,
    python_image: str | None = None,
    arch: str | None = None,
) -> BuiltImage:
    """``localhost/kube-nudge:<version>`` (also tagged ``:dev``) built from ``repo``'s
    Dockerfile on ``base_image()``; ``archive`` is its OCI archive.

    The key is a hash of the base and of every file the Dockerfile copies (the Dockerfile,
    ``requirements/image-*.lock``, ``pyproject.toml``, ``README.md``, ``src/``): a warm call
    with none of them changed takes seconds. Cold: a few minutes (pip downloads).
    ``python_image`` (a release's ``python:3.11-slim``, pulled when missing) replaces the
    Debian base made here. A foreign ``arch`` (``arm64``) is built under emulation, on that
    architecture's base, as ``localhost/kube-nudge:<version>-<arch>`` (no ``:dev``).
    """
    _preflight("podman")
    say = _say(progress)
    version, foreign = _version(repo), _foreign(arch)
    suffix = f"-{foreign}" if foreign else ""
    with _locked():
        base = BuiltImage(python_image, Path()) if python_image else _base_image(say, arch)
        ref = f"{CONTROLLER_REPOSITORY}:{version}{suffix}"
        dev = f"{CONTROLLER_REPOSITORY}:{DEV_TAG}" if not foreign else ref
        directory = images_dir() / f"controller{suffix}"
        log = images_dir() / "build.log"
        with tempfile.TemporaryDirectory(prefix="kube-nudge-context-") as tmp:
            context = Path(tmp)
            key = _hash(_RECIPE.encode(), base.ref.encode(), _stage_context(repo, context).encode())
            archive = directory / f"kube-nudge-{version}-{key}.tar"
            present = _key_of(ref) == key
            if present and archive.is_file():
                _tag(ref, dev, log)
                return BuiltImage(ref, archive)
            if not present and archive.is_file():
                _load(archive, ref, key, log)
            elif not present:
                flags = ["--pull=missing" if python_image else "--pull=never"]
                flags += [f"--platform=linux/{foreign}"] if foreign else []
                _build(ref, key, base.ref, context, flags, say, log)
                _tag(ref, dev, log)
        _tag(ref, dev, log)
        if not archive.is_file():
            _save(ref, archive, log)
        return BuiltImage(ref, archive)


def _build(
    ref: str, key: str, base: str, context: Path, flags: list[str], say: Progress, log: Path
) -> None:
    """``podman build`` of the staged ``context`` on ``base`` as ``ref`` (labelled ``key``);
    the build it replaces is removed."""
    previous = _image_id(ref)
    say(f"building {ref} on {base} (log: {log}; a few minutes cold)")
    started = time.monotonic()
    cmd = podman_argv(
        "build",
        *flags,
        "--network=host",
        *RUN_LIMITS,
        f"--build-arg=PYTHON_IMAGE={base}",
        f"--label={KEY_LABEL}={key}",
        "--tag", ref,
        "--file", str(context / "Dockerfile"),
        str(context),
    )  # fmt: skip
    _run(cmd, what=f"podman build {ref}", timeout=_BUILD, log=log)
    say(f"{ref} built in {time.monotonic() - started:.0f} s")
    if previous is not None and previous != _image_id(ref):
        # the build it replaces, now untagged (kept if a container still uses it)
        _call(podman_argv("rmi", previous), what="podman rmi", timeout=_QUICK, log=log)


def _image_id(ref: str) -> str | None:
    code, out, _ = _call(
        podman_argv("image", "inspect", "--format", "{{.Id}}", ref),
        what="podman image inspect",
        timeout=_QUICK,
    )
    return out.strip() or None if code == 0 else None


def _tag(ref: str, extra: str, log: Path) -> None:
    _run(podman_argv("tag", ref, extra), what=f"podman tag {extra}", timeout=_QUICK, log=log)


def _save(ref: str, archive: Path, log: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.parent / f".{archive.name}.partial"
    partial.unlink(missing_ok=True)
    cmd = podman_argv("save", "--format", "oci-archive", "--output", str(partial), ref)
    _run(cmd, what=f"podman save {ref}", timeout=_QUICK, log=log)
    _publish(partial, archive)


def _load(archive: Path, ref: str, key: str, log: Path) -> None:
    """Put ``ref`` back into a wiped store from its archive (which names it)."""
    _run(
        podman_argv("load", "--input", str(archive)),
        what=f"podman load {archive.name}",
        timeout=_QUICK,
        log=log,
    )
    if _key_of(ref) != key:
        raise ImageError(f"podman load {archive} did not give {ref} with {KEY_LABEL}={key}")


# --- the pause image ----------------------------------------------------------------------------


def _pause_source() -> Path:
    return Path(str(resources.files("kube_nudge_dev") / PAUSE_SOURCE))


def pause_image(*, progress: Progress | None = None) -> BuiltImage:
    """``localhost/kube-nudge-pause:<id>``, the sandbox image for a kubelet node: ``pause.c``
    compiled with ``gcc -static -Os`` ``FROM scratch``; ``archive`` is its OCI archive.

    ``id`` is a hash of the source, the compiler flags, the compiler's version and the
    Containerfile. Seconds cold.
    """
    _preflight("podman", "gcc")
    say = _say(progress)
    with _locked():
        source = _pause_source().read_bytes()
        gcc_version = _run([_tool("gcc"), "--version"], what="gcc --version", timeout=_QUICK)
        compiler = gcc_version.splitlines()[0] if gcc_version else "gcc"
        recipe = [_RECIPE, " ".join(_PAUSE_CFLAGS), compiler, _PAUSE_CONTAINERFILE]
        key = _hash(source, *(item.encode() for item in recipe))
        ref = f"{PAUSE_REPOSITORY}:{key}"
        archive = images_dir() / "pause" / f"kube-nudge-pause-{key}.tar"
        log = images_dir() / "build.log"
        present = _key_of(ref) == key
        if present and archive.is_file():
            return BuiltImage(ref, archive)
        if not present and archive.is_file():
            _load(archive, ref, key, log)
            return BuiltImage(ref, archive)
        if not present:
            say(f"building {ref} (static pause binary FROM scratch; log: {log})")
            with tempfile.TemporaryDirectory(prefix="kube-nudge-pause-") as tmp:
                context = Path(tmp)
                (context / PAUSE_SOURCE).write_bytes(source)
                (context / "Containerfile").write_text(_PAUSE_CONTAINERFILE)
                _run(
                    [_tool("gcc"), *_PAUSE_CFLAGS, "-o", "pause", PAUSE_SOURCE],
                    what="gcc pause.c", timeout=_QUICK, log=log, cwd=context,
                )  # fmt: skip
                cmd = podman_argv(
                    "build", "--pull=never", *RUN_LIMITS, f"--label={KEY_LABEL}={key}",
                    "--tag", ref, "--file", str(context / "Containerfile"), str(context),
                )  # fmt: skip
                _run(cmd, what=f"podman build {ref}", timeout=_BUILD, log=log)
            _drop_other_tags(PAUSE_REPOSITORY, ref, log)
        _save(ref, archive, log)
        return BuiltImage(ref, archive)


# --- pushing ------------------------------------------------------------------------------------


def push_image(ref: str, target: str, *, cert_dir: Path | None = None) -> str:
    """``podman push`` image ``ref`` of the store to ``target`` (``HOST/REPO:TAG``), verifying
    the registry's TLS with the CAs in ``cert_dir`` (else the system's); the digest of the
    manifest the registry now holds (podman's ``--digestfile``)."""
    _preflight("podman")
    log = images_dir() / "push.log"
    with tempfile.TemporaryDirectory(prefix="kube-nudge-push-") as tmp:
        digest_file = Path(tmp) / "digest"
        tls = [f"--cert-dir={cert_dir}"] if cert_dir is not None else []
        cmd = podman_argv("push", *tls, f"--digestfile={digest_file}", ref, f"docker://{target}")
        _run(cmd, what=f"podman push {target}", timeout=_BUILD, log=log)
        digest = digest_file.read_text().strip()
    if not digest.startswith("sha256:"):
        raise ImageError(f"podman push {target} recorded no digest; log: {log}")
    return digest


def push_index(images: list[str], target: str, *, cert_dir: Path | None = None) -> str:
    """A manifest list of ``images`` (``REPO@sha256:...``, already pushed to the same
    registry) pushed as ``target`` (``HOST/REPO:TAG``); its digest."""
    _preflight("podman")
    log = images_dir() / "push.log"
    tls = [f"--cert-dir={cert_dir}"] if cert_dir is not None else []
    name = f"localhost/kube-nudge-index:{_hash(target.encode(), *(i.encode() for i in images))}"
    _call(podman_argv("manifest", "rm", name), what="podman manifest rm", timeout=_QUICK, log=log)
    _run(podman_argv("manifest", "create", name), what="podman manifest create", timeout=_QUICK,
         log=log)  # fmt: skip
    try:
        for image in images:
            _run(podman_argv("manifest", "add", *tls, name, f"docker://{image}"),
                 what=f"podman manifest add {image}", timeout=_BUILD, log=log)  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="kube-nudge-push-") as tmp:
            digest_file = Path(tmp) / "digest"
            record = f"--digestfile={digest_file}"
            cmd = podman_argv("manifest", "push", "--all=false", *tls, record, name,
                              f"docker://{target}")  # fmt: skip
            _run(cmd, what=f"podman manifest push {target}", timeout=_BUILD, log=log)
            digest = digest_file.read_text().strip()
    finally:
        _call(podman_argv("manifest", "rm", name), what="podman manifest rm", timeout=_QUICK,
              log=log)  # fmt: skip
    if not digest.startswith("sha256:"):
        raise ImageError(f"podman manifest push {target} recorded no digest; log: {log}")
    return digest
