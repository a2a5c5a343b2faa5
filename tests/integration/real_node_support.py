"""Pods on the real node that only the tests use: an app printing the config it runs with,
and a container's crash (the shared specs and readers: ``kube_nudge_dev.nodepods``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

JSON = dict[str, Any]

#: Prints the config it runs with at start, then every file change under /config; its
#: readiness probe fails while /config/ok is not "true" (an app that refuses bad config).
CONFIG_PRINTER = """
import os, sys, time
print("env", os.environ.get("LEVEL"), flush=True)
seen = None
while True:
    files = {}
    for name in sorted(os.listdir("/config")):
        if not name.startswith(".."):
            with open(os.path.join("/config", name)) as f:
                files[name] = f.read()
    if files != seen:
        print("files", files, flush=True)
        seen = files
    time.sleep(0.2)
"""


def kill_container(pod: JSON, container: str) -> int:
    """SIGKILL every process of ``container`` in ``pod`` from the machine (a crash: the
    process gets no chance to clean up); the number of processes killed."""
    [status] = [s for s in pod["status"]["containerStatuses"] if s["name"] == container]
    container_id = status["containerID"].split("://", 1)[1]
    killed = 0
    for procs in Path("/sys/fs/cgroup/pids/kubepods").rglob(f"{container_id}/cgroup.procs"):
        for pid in procs.read_text().split():
            os.kill(int(pid), signal.SIGKILL)
            killed += 1
    if not killed:
        raise RuntimeError(f"no process of {container} ({container_id}) found to kill")
    return killed
