"""The agent as it runs in a pod: a real process started by the product's command line,
watching a kubelet-style directory, calling a local app, patching a stand-in API server,
serving /healthz and /metrics, lean in imports and memory, stopped by SIGTERM."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kube_nudge.agent import LEAN_EXCLUDED
from kube_nudge.agent.watch import dir_hash, directory_files, loaded_hash
from kube_nudge.agentwire import HASH_DOMAIN, LOADED_HASH, key_id
from tests.agent_support import (  # noqa: F401 # the fixture http
    KEY,
    WAIT,
    Recorder,
    http_fixture,
    kubelet_write,
    wait_for,
)

Http = Callable[..., tuple[str, Recorder]]
MAX_RSS_KB = 48 * 1024
"""Twice what the agent benchmark measures (bench/results/agent.*, about 24 MiB): only a
gross regression trips it (the controller's stack imported by mistake costs more than the
difference), never a busy machine or allocator noise. The figure itself is the benchmark's."""


def test_the_agents_import_closure_is_the_standard_library() -> None:
    probe = (
        "import json, sys; before = set(sys.modules); import kube_nudge.agent.main; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = json.loads(out)
    ours = [m for m in loaded if m.split(".")[0] == "kube_nudge"]
    others = [m for m in loaded if m.split(".")[0] != "kube_nudge"]
    # The agent's own modules, and the stdlib-only modules it shares (log line fields, the
    # wire protocol of what it writes on its pod).
    shared = {"kube_nudge", "kube_nudge.logrecords", "kube_nudge.agentwire"}
    assert all(m in shared or m.startswith("kube_nudge.agent") for m in ours), ours
    assert [m for m in others if m.split(".")[0] not in sys.stdlib_module_names] == []
    assert not [m for m in loaded if m.startswith(LEAN_EXCLUDED)]


def _rss_kb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    assert match is not None
    return int(match[1])


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Running:
    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def lines(self) -> list[dict[str, object]]:
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def said(self, pattern: str) -> re.Match[str] | None:
        for line in self.lines():
            match = re.search(pattern, str(line["msg"]))
            if match:
                return match
        return None


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    started: list[subprocess.Popen[bytes]] = []

    def run(*flags: str, env: dict[str, str] | None = None) -> Running:
        log = tmp_path / f"agent-{len(started)}.log"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "kube_nudge", "agent", "--log-format=json", *flags],
                stderr=out, env={**environment, **(env or {})},
            )  # fmt: skip
        started.append(process)
        return Running(process, log)

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_agent_reloads_records_and_reports(
    tmp_path: Path, http: Http, start: Callable[..., Running]
) -> None:
    app_url, app = http()
    api_url, api = http()
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"v1"})
    token = tmp_path / "token"
    token.write_text("sa-token")
    key = tmp_path / "key"
    key.write_bytes(KEY + b"\n")
    agent = start(
        f"--watch={target}", f"--http-url={app_url}/-/reload", "--poll-interval=50ms",
        "--debounce=200ms", "--listen=127.0.0.1:0", f"--api-server={api_url}",
        f"--token-file={token}", f"--hash-key-file={key}",
        env={"POD_NAME": "web-0", "POD_NAMESPACE": "team-a"},
    )  # fmt: skip
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    port_line = agent.said(r"metrics on (\d+)")
    assert port_line is not None
    metrics_url = f"http://127.0.0.1:{port_line[1]}"

    pid = agent.process.pid
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1:4] == [b"-m", b"kube_nudge", b"agent"]  # the launcher, lean from start
    assert "orjson" not in Path(f"/proc/{pid}/maps").read_text()
    rss = _rss_kb(pid)
    assert rss < MAX_RSS_KB, f"the agent uses {rss} kB"
    assert _get(f"{metrics_url}/healthz") == (200, "ok\n")

    kubelet_write(target, {"app.conf": b"v2"})
    wait_for(lambda: api.count("PATCH") == 1, "the loaded hash on the pod")
    loaded = loaded_hash((str(target),), KEY, key_id(KEY))
    assert app.count("POST") == 1
    (patch,) = api.hits
    assert patch.path.startswith("/api/v1/namespaces/team-a/pods/web-0?")
    assert json.loads(patch.body)["metadata"]["annotations"][LOADED_HASH] == loaded
    status, text = _get(f"{metrics_url}/metrics")
    assert status == 200
    assert "\nkube_nudge_agent_reloads_total 1\n" in text
    shown = json.loads(loaded)["dirs"][str(target)]
    labels = f'dir="{target}",hash="{shown}",key="{key_id(KEY)}"'
    assert f"\nkube_nudge_agent_loaded_info{{{labels}}} 1\n" in text
    assert '\nkube_nudge_agent_reload_failures_total{stage="http"} 0\n' in text

    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(WAIT) == 0
    assert agent.said(r"^stopped$")


def test_inotify_sees_the_swap_where_a_poll_would_not_for_an_hour(
    tmp_path: Path, http: Http, start: Callable[..., Running]
) -> None:
    app_url, app = http()
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"v1"})
    agent = start(f"--watch={target}", f"--http-url={app_url}/-/reload", "--poll-interval=1h",
                  "--listen=off")  # fmt: skip
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    assert agent.said(r"changes seen by inotify, polls every 3600s, debounce 0.02s")
    for n in (1, 2, 3):
        kubelet_write(target, {"app.conf": f"v{n + 1}".encode()})
        wait_for(lambda n=n: app.count("POST") == n, f"reload {n}")  # type: ignore[misc]
    agent.process.send_signal(signal.SIGTERM)  # ends its hour-long wait at once
    assert agent.process.wait(WAIT) == 0


def test_forced_polling_says_so(tmp_path: Path, start: Callable[..., Running]) -> None:
    agent = start(f"--watch={tmp_path}", "--process=x", "--watch-mode=poll", "--listen=off")
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    assert agent.said(r"changes seen by polling, polls every 1s")
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(WAIT) == 0


def test_a_directory_that_is_no_kubelet_volume_is_named_once(
    tmp_path: Path, start: Callable[..., Running]
) -> None:
    (tmp_path / "app.conf").write_text("x")  # a plain directory: no ..data link
    agent = start(f"--watch={tmp_path}", "--process=x", "--listen=off")
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    named = [line for line in agent.lines() if "is not a kubelet volume" in str(line["msg"])]
    assert len(named) == 1 and named[0]["level"] == "WARNING"
    assert str(tmp_path) in str(named[0]["msg"]) and "subPath" in str(named[0]["msg"])
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(WAIT) == 0


def _plain_digests(files: dict[str, bytes]) -> set[str]:
    """Every unkeyed SHA-256 one could compute from the files: of each file, and of the
    directory in the agent's documented format without the key."""
    digest = hashlib.sha256(HASH_DOMAIN)
    for rel in sorted(files):
        digest.update(len(rel.encode()).to_bytes(8, "big") + rel.encode())
        digest.update(hashlib.sha256(files[rel]).digest())
    return {digest.hexdigest(), *(hashlib.sha256(c).hexdigest() for c in files.values())}


def test_without_a_key_file_no_plain_digest_leaves_the_agent(
    tmp_path: Path, http: Http, start: Callable[..., Running]
) -> None:
    app_url, _ = http()
    api_url, api = http()
    target = tmp_path / "secret"
    kubelet_write(target, {"password": b"hunter1"})
    token = tmp_path / "token"
    token.write_text("sa-token")
    agent = start(
        f"--watch={target}", f"--http-url={app_url}/-/reload", "--poll-interval=50ms",
        "--debounce=0", "--listen=127.0.0.1:0", f"--api-server={api_url}",
        f"--token-file={token}", env={"POD_NAME": "web-0", "POD_NAMESPACE": "team-a"},
    )  # fmt: skip
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    port_line = agent.said(r"metrics on (\d+)")
    assert port_line is not None
    assert agent.said(r"keyed with a random key of this process")
    plain = _plain_digests({"password": b"hunter1"})
    files = {"password": b"hunter2"}
    kubelet_write(target, files)
    plain |= _plain_digests(files)
    wait_for(lambda: api.count("PATCH") == 1, "the loaded hash on the pod")
    (patch,) = api.hits
    published = json.loads(json.loads(patch.body)["metadata"]["annotations"][LOADED_HASH])
    shown = published["dirs"][str(target)]
    assert len(shown) == 64 and shown not in plain
    on_disk = directory_files(str(target))
    assert on_disk is not None and shown != dir_hash(KEY, on_disk)  # not a fixed key either
    _, metrics = _get(f"http://127.0.0.1:{port_line[1]}/metrics")
    assert f'hash="{shown}",key="{published["key"]}"}} 1' in metrics
    agent.process.send_signal(signal.SIGTERM)
    assert agent.process.wait(WAIT) == 0
    # Not on the pod, not in /metrics, not in any log line: not even the short forms.
    everything = [patch.body.decode(), metrics, agent.log.read_text()]
    for digest in plain:
        assert not any(digest[:12] in text for text in everything), digest


def test_a_broken_app_is_counted_and_the_agent_keeps_running(
    tmp_path: Path, http: Http, start: Callable[..., Running]
) -> None:
    app_url, app = http(statuses=[500] * 100)
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"v1"})
    agent = start(
        f"--watch={target}", f"--watch={tmp_path}/absent", f"--http-url={app_url}/-/reload",
        "--http-retries=1", "--retry-backoff=10ms", "--poll-interval=50ms", "--debounce=0",
        "--listen=127.0.0.1:0", "--validate-command=true",
    )  # fmt: skip
    wait_for(lambda: agent.said(r"the app runs"), "the agent to start")
    port_line = agent.said(r"metrics on (\d+)")
    assert port_line is not None
    kubelet_write(target, {"app.conf": b"v2"})
    wait_for(lambda: agent.said(r"\(http failed\)"), "the failed reload")
    assert app.count() == 2
    _, text = _get(f"http://127.0.0.1:{port_line[1]}/metrics")
    assert '\nkube_nudge_agent_reload_failures_total{stage="http"} 1\n' in text
    assert f'\nkube_nudge_agent_watch_dir_missing{{dir="{tmp_path}/absent"}} 1\n' in text
    assert agent.process.poll() is None
    assert _get(f"http://127.0.0.1:{port_line[1]}/healthz")[0] == 200


def test_a_port_in_use_exits_2(tmp_path: Path, start: Callable[..., Running]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        agent = start(f"--watch={tmp_path}", "--process=nginx", f"--listen=127.0.0.1:{port}")
        assert agent.process.wait(WAIT) == 2
    assert f"kube-nudge: --listen 127.0.0.1:{port}: Address already in use" in (
        agent.log.read_text()
    )


def test_bad_flags_exit_2_from_the_console_script(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kube_nudge", "agent", f"--watch={tmp_path}", "--process=x",
         "--http-url=http://127.0.0.1:1/"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("kube-nudge: --signal/--process and --http-url")
    assert done.stderr.count("\n") == 1
