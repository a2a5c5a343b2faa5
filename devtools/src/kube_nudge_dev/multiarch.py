"""Images for another architecture than this machine's (``arm64`` on these amd64 machines),
built under emulation: Debian's qemu-user-static runs the foreign binaries of mmdebstrap's
maintainer scripts and of the Dockerfile's ``RUN`` steps, through the kernel's binfmt_misc.

Debian registers qemu's binfmt handlers at boot with systemd-binfmt; these machines run no
systemd, so ``enable`` does what it would: mount binfmt_misc and register the handler from the
file qemu-user-static ships (``/usr/lib/binfmt.d/qemu-<cpu>.conf``, with the ``F`` flag, so the
interpreter works inside containers). It changes nothing else, and nothing for this machine's
own binaries. Whatever is missing is one line (:class:`EmulationUnavailable`).
"""

from __future__ import annotations

import os
import subprocess  # nosec B404 # mount(8) for binfmt_misc, as systemd-binfmt does
from pathlib import Path

#: OCI architecture -> the CPU name qemu and binfmt use.
QEMU_CPU = {"arm64": "aarch64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
BINFMT_CONF = Path("/usr/lib/binfmt.d")


class EmulationUnavailable(RuntimeError):
    """This machine cannot build for that architecture; the message says what is missing."""


def handler(arch: str) -> Path:
    """The binfmt_misc entry that runs ``arch``'s binaries."""
    return BINFMT / f"qemu-{QEMU_CPU.get(arch, arch)}"


def missing(arch: str) -> list[str]:
    """What building ``arch`` images here lacks (empty: nothing)."""
    cpu = QEMU_CPU.get(arch)
    if cpu is None:
        return [f"a qemu CPU for {arch!r} (this builds {', '.join(QEMU_CPU)})"]
    lacks = []
    if not Path(f"/usr/bin/qemu-{cpu}-static").is_file():
        lacks.append(f"qemu-{cpu}-static (the Debian package qemu-user-static)")
    if "binfmt_misc" not in Path("/proc/filesystems").read_text():
        lacks.append("binfmt_misc in the kernel")
    elif not (BINFMT / "register").exists():
        lacks.append(f"binfmt_misc mounted at {BINFMT}")
    elif not handler(arch).is_file() or "enabled" not in handler(arch).read_text():
        lacks.append(f"the binfmt handler {handler(arch).name} registered and enabled")
    return lacks


def enable(arch: str) -> list[str]:
    """Make ``arch`` buildable: mount binfmt_misc and register qemu's handler where needed
    (root); what it did. Raises :class:`EmulationUnavailable` naming what is still missing."""
    done: list[str] = []
    lacks = missing(arch)
    cpu = QEMU_CPU.get(arch, arch)
    conf = BINFMT_CONF / f"qemu-{cpu}.conf"
    fixable = [line for line in lacks if "mounted" in line or "registered" in line]
    if lacks and lacks == fixable and os.geteuid() == 0 and conf.is_file():
        if not (BINFMT / "register").exists():
            subprocess.run(  # nosec B603 B607 # mount(8) from PATH, fixed argv
                ["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], check=False,
                capture_output=True, timeout=30,
            )  # fmt: skip
            done.append(f"mounted binfmt_misc at {BINFMT}")
        if not handler(arch).is_file():
            (BINFMT / "register").write_text(conf.read_text().strip())
            done.append(f"registered {handler(arch).name} from {conf}")
        lacks = missing(arch)
    if lacks:
        how = "`apt-get install qemu-user-static` and, as root, this again"
        raise EmulationUnavailable(f"building {arch} images needs {', '.join(lacks)}: {how}")
    return done
