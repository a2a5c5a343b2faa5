"""The agent's test helpers (tests/agent_support.py) do what the real thing does."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agent_support import (  # noqa: F401 # the fixtures app and http
    App,
    Recorder,
    app_fixture,
    http_fixture,
    kubelet_write,
)


def test_kubelet_write_leaves_the_kubelets_layout(tmp_path: Path) -> None:
    target = tmp_path / "config"
    first = kubelet_write(target, {"app.conf": b"a=1\n", "nested/x.json": b"{}"})
    second = kubelet_write(target, {"app.conf": b"a=2\n"})
    names = sorted(p.name for p in target.iterdir())
    assert names == sorted(["..data", second.name, "app.conf"])
    assert first.name.startswith("..") and not first.exists()
    assert os.readlink(target / "..data") == second.name
    assert os.readlink(target / "app.conf") == "..data/app.conf"
    assert (target / "app.conf").read_bytes() == b"a=2\n"


def test_the_app_process_is_found_by_its_own_name_in_proc(app: App) -> None:
    pid = app.process.pid
    assert Path(f"/proc/{pid}/comm").read_text().strip() == app.name
    argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert os.path.basename(argv0) == app.name
    assert os.path.basename(os.readlink(f"/proc/{pid}/exe")) != app.name  # the real python
    os.kill(pid, signal.SIGHUP)
    assert app.hups() == 1


def test_the_recording_server_answers_in_turn(http: Callable[..., tuple[str, Recorder]]) -> None:
    import urllib.error
    import urllib.request

    url, recorder = http(statuses=[500])
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{url}/x", data=b"{}")  # noqa: S310
    assert err.value.code == 500
    with urllib.request.urlopen(f"{url}/y") as response:  # noqa: S310
        assert json.loads(response.read()) == {}
    assert [(h.method, h.path) for h in recorder.hits] == [("POST", "/x"), ("GET", "/y")]
