"""The controller image, really run with podman (``make image`` builds the same one).

The session builds it once with ``kube_nudge_dev.image.build_image`` (minutes cold, seconds
warm) and runs it the way the chart does: uid 65532, read-only root filesystem, no network.
Skipped, in one line, without root or without podman. Every podman call has a timeout.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kube_nudge import __version__
from kube_nudge_dev.image import RUN_LIMITS, BuiltImage, ImageError, build_image, podman_argv

REPO = Path(__file__).resolve().parents[2]
USER = "65532:65532"
# The agent is a sidecar with a 64Mi limit in the snippet of docs/reload.md.
AGENT_RSS_BOUND_MIB = 60

# A cold build (Debian base with mmdebstrap, then pip downloads) takes minutes on 2 cores.
pytestmark = pytest.mark.timeout(1800)


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "not root: the image tests need rootful podman"
    if shutil.which("podman") is None:
        return "podman not found: run `make host-packages` (needs root)"
    return None


@pytest.fixture(scope="session")
def image() -> BuiltImage:
    reason = _unavailable()
    if reason is not None:
        pytest.skip(reason)
    try:
        return build_image(REPO)
    except ImageError as exc:
        pytest.fail(f"make image failed: {exc}", pytrace=False)


def podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        podman_argv(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


def run(
    image: BuiltImage, *args: str, entrypoint: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``podman run`` of the image as a pod runs it: its own user, read-only root, no network."""
    chosen = ["--entrypoint", entrypoint] if entrypoint else []
    return podman(
        "run", "--rm", *RUN_LIMITS, "--network=none", "--read-only", *chosen, image.ref, *args
    )


def test_image_prints_its_version(image: BuiltImage) -> None:
    result = run(image, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"kube-nudge {__version__}"
    assert image.ref.endswith(f":{__version__}") and image.archive.is_file()


def test_image_runs_as_non_root_on_a_read_only_root(image: BuiltImage) -> None:
    configured = podman("image", "inspect", "--format", "{{.Config.User}}", image.ref)
    assert configured.stdout.strip() == USER
    help_text = run(image, "run", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert help_text.stdout.startswith("usage: kube-nudge run")
    probe = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "for path in ('/probe', '/opt/kube-nudge/probe'):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "    except OSError as exc:\n"
        "        print(path, exc.errno)\n"
    )
    result = run(image, "-c", probe, entrypoint="/opt/kube-nudge/bin/python")
    assert result.returncode == 0, result.stderr
    uid, gid = USER.split(":")
    assert result.stdout.split("\n") == [
        f"{uid} {gid}",
        f"/probe {errno.EROFS}",
        f"/opt/kube-nudge/probe {errno.EROFS}",
        "",
    ]


def test_agent_starts_lean_in_the_image(image: BuiltImage) -> None:
    name = f"kube-nudge-test-agent-{uuid.uuid4().hex[:8]}"
    started = podman(
        "run", "--detach", "--name", name, *RUN_LIMITS, "--network=none", "--read-only",
        image.ref, "agent", "--watch", "/tmp", "--signal", "HUP", "--process", "app",
        "--listen", "127.0.0.1:9090",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        check = (
            "import urllib.request\n"
            "print(urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=2).status)\n"
            "print(open('/proc/1/cmdline').read().split('\\0')[1:3])\n"
            "status = dict(l.split(':', 1) for l in open('/proc/1/status'))\n"
            "print(status['Uid'].split()[0], status['VmRSS'].split()[0])\n"
        )
        deadline = time.monotonic() + 30
        while True:
            probe = podman("exec", name, "/opt/kube-nudge/bin/python", "-c", check)
            if probe.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        logs = podman("logs", name).stderr
        assert probe.returncode == 0, probe.stderr + logs
        health, argv, ids = probe.stdout.splitlines()
        uid, rss_kib = ids.split()
        assert health == "200" and "agent" in argv and uid == USER.split(":")[0]
        rss_mib = int(rss_kib) / 1024
        print(f"\nkube-nudge agent idle RSS in the image: {rss_mib:.1f} MiB")
        assert rss_mib < AGENT_RSS_BOUND_MIB, logs
    finally:
        podman("rm", "--force", "--time", "5", name, timeout=60)
