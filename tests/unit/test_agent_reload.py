"""Reloads against real things: a process that counts SIGHUPs, a local HTTP server, real
validation commands. The agent's loop is stepped by hand with a clock that moves only when
told to, so "exactly one reload" means one, not "one so far"."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kube_nudge.agent.config import HttpSpec, SignalSpec, ValidateSpec
from kube_nudge.agent.keys import HashKey, random_key
from kube_nudge.agent.main import Agent
from kube_nudge.agent.metrics import AgentMetrics
from kube_nudge.agent.reload import (
    HttpAction,
    Reloader,
    ReloadFailed,
    SignalAction,
    Validator,
    find_processes,
)
from kube_nudge.agent.watch import Watcher, loaded_hash, snapshot
from kube_nudge.agentwire import key_id
from tests.agent_support import (  # noqa: F401 # the fixtures app and http
    KEY,
    App,
    Recorder,
    app_fixture,
    http_fixture,
    kubelet_write,
    wait_for,
)
from tests.unit.fakes import FakeClock

Http = Callable[..., tuple[str, Recorder]]
FAILED = "<failed>"  # what the fixture records for a failed reload


def _no_wait(delay: float) -> bool:
    return False


def _agent(
    target: Path, reloader: Reloader, validator: Validator | None = None, debounce: float = 1.0,
    keys: HashKey | None = None,
) -> tuple[Agent, FakeClock, list[tuple[str, float]]]:  # fmt: skip
    clock = FakeClock()
    recorded: list[tuple[str, float]] = []
    agent = Agent(
        Watcher((str(target),), debounce, clock=clock.monotonic),
        reloader,
        AgentMetrics((str(target),)),
        keys or HashKey.fixed(KEY),
        validator=validator,
        record=lambda h, at: recorded.append((h, at)),
        record_failure=lambda at: recorded.append((FAILED, at)),
        wall=clock.now,
        monotonic=clock.monotonic,
    )
    agent.start()
    return agent, clock, recorded


def _steps(agent: Agent, clock: FakeClock, n: int = 8, every: float = 0.5) -> None:
    for _ in range(n):
        agent.step()
        clock.advance(every)


def _hup(app: App, retries: int = 0) -> SignalAction:
    return SignalAction(SignalSpec(signal.SIGHUP, app.name, retries), 0.01, _no_wait)


def test_a_kubelet_swap_reloads_the_app_exactly_once(tmp_path: Path, app: App) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"nginx.conf": b"worker_processes 1;\n"})
    agent, clock, recorded = _agent(target, _hup(app))
    _steps(agent, clock, 3)
    assert app.hups() == 0

    # The reload lands between the rename of ..data and the kubelet's later steps (the new
    # key's visible symlink, removal of the old directory): it must load the whole new
    # content, and those steps must not count as further changes.
    def reload_mid_write() -> None:
        _steps(agent, clock, 3)

    kubelet_write(
        target, {"nginx.conf": b"worker_processes 2;\n", "mime.types": b"types {}\n"},
        after_swap=reload_mid_write,
    )  # fmt: skip
    assert agent.metrics.reloads == 1
    _steps(agent, clock, 10)

    assert app.hups() == 1
    assert agent.loaded == snapshot((str(target),)) and agent.metrics.reloads == 1
    # recorded on the pod once
    assert [h for h, _ in recorded] == [loaded_hash((str(target),), KEY, key_id(KEY))]


def test_every_process_of_the_name_gets_the_signal_and_the_agent_never(app: App) -> None:
    (found,) = find_processes(app.name)
    assert found.pid == app.process.pid and found.comm == app.name
    assert all(p.pid != os.getpid() for p in find_processes(os.path.basename(sys.executable)))
    assert "sent SIGHUP" in _hup(app).reload()
    assert app.hups() == 1


def test_no_such_process_fails_after_bounded_retries(tmp_path: Path) -> None:
    waits: list[float] = []

    def sleep(delay: float) -> bool:
        waits.append(delay)
        return False

    action = SignalAction(SignalSpec(signal.SIGHUP, "no-such-app-x1", 3), 0.5, sleep)
    with pytest.raises(ReloadFailed) as failed:
        action.reload()
    assert failed.value.stage == "signal"
    assert "no process named 'no-such-app-x1'" in str(failed.value)
    assert "shareProcessNamespace: true" in str(failed.value)
    assert waits == [0.5, 1.0, 2.0]  # 3 retries, doubling


EPERM_PROBE = """
import os, signal, sys
from kube_nudge.agent.config import SignalSpec
from kube_nudge.agent.reload import ReloadFailed, SignalAction
os.setgroups([])
os.setgid(65534)
os.setuid(65534)  # after every import: the interpreter's files may be root's alone
try:
    SignalAction(SignalSpec(signal.SIGHUP, sys.argv[1], 0), 0, lambda d: False).reload()
except ReloadFailed as exc:
    print(exc.stage, exc, sep=": ")
"""


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run the agent as another user")
def test_a_process_of_another_user_is_a_clear_eperm(app: App) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", EPERM_PROBE, app.name],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert probe.stdout.startswith("signal: SIGHUP to ")
    assert "not permitted (EPERM): the agent runs as uid 65534" in probe.stdout
    assert f"pid {app.process.pid} (uid 0)" in probe.stdout
    assert app.hups() == 0


def _http(url: str, retries: int = 3, timeout: float = 5.0, expect: int = 200) -> HttpAction:
    spec = HttpSpec(f"{url}/-/reload", "POST", expect, timeout, retries)
    return HttpAction(spec, 0.01, _no_wait)


def test_one_post_per_change(tmp_path: Path, http: Http) -> None:
    url, server = http()
    target = tmp_path / "config"
    kubelet_write(target, {"a": b"1"})
    agent, clock, _ = _agent(target, _http(url))
    for n in (2, 3):
        kubelet_write(target, {"a": str(n).encode()})
        _steps(agent, clock)
    assert [(h.method, h.path) for h in server.hits] == [("POST", "/-/reload")] * 2
    assert agent.metrics.reloads == 2


def test_a_500_is_retried_up_to_the_limit(http: Http) -> None:
    url, server = http(statuses=[500] * 10)
    with pytest.raises(ReloadFailed) as failed:
        _http(url, retries=3).reload()
    assert failed.value.stage == "http"
    assert "answered 500 (attempt 4, giving up)" in str(failed.value)
    assert server.count("POST") == 4  # the call and 3 retries


def test_a_500_then_200_succeeds(http: Http) -> None:
    url, server = http(statuses=[500, 503])
    assert _http(url).reload().endswith("answered 200")
    assert server.count("POST") == 3


def test_a_404_is_not_retried(http: Http) -> None:
    url, server = http(statuses=[404])
    with pytest.raises(ReloadFailed, match="answered 404, want 200; check --http-url"):
        _http(url).reload()
    assert server.count() == 1


def test_a_hanging_server_is_timed_out(http: Http) -> None:
    import threading

    url, server = http(hang=threading.Event())
    with pytest.raises(ReloadFailed) as failed:
        _http(url, retries=1, timeout=0.3).reload()
    assert "no answer within 0.3s (attempt 2, giving up)" in str(failed.value)
    assert server.count() == 2


def test_a_server_that_is_down_fails_cleanly(http: Http) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ReloadFailed, match="Connection refused"):
        _http(f"http://127.0.0.1:{port}", retries=1).reload()


def test_files_changing_during_a_reload_reload_once_more(tmp_path: Path, http: Http) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"a": b"1"})

    during: list[str] = []

    def change_on_first_call(hit: object) -> None:
        if server.count() == 1:
            during.append(loaded_hash((str(target),), KEY, key_id(KEY)))  # what it loads
            kubelet_write(target, {"a": b"3"})

    url, server = http(on_request=change_on_first_call)
    agent, clock, recorded = _agent(target, _http(url))
    kubelet_write(target, {"a": b"2"})
    _steps(agent, clock, 12)
    assert server.count("POST") == 2
    assert agent.loaded == snapshot((str(target),))
    assert [h for h, _ in recorded] == [during[0], loaded_hash((str(target),), KEY, key_id(KEY))]


def test_a_failing_validation_reloads_nothing(
    tmp_path: Path, http: Http, caplog: pytest.LogCaptureFixture
) -> None:
    url, server = http()
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"good"})
    check = textwrap.dedent(f"""
        import sys
        if open({str(target / "app.conf")!r}).read() != "good":
            print("app.conf: line 1: unknown directive")
            sys.exit(1)
    """)
    script = tmp_path / "check.py"  # by path: the command line is logged, the script not
    script.write_text(check)
    validator = Validator(ValidateSpec((sys.executable, str(script)), 30))
    agent, clock, recorded = _agent(target, _http(url), validator)
    loaded = agent.loaded
    kubelet_write(target, {"app.conf": b"bad"})
    with caplog.at_level(logging.INFO, "kube_nudge.agent"):
        _steps(agent, clock)
    assert server.count() == 0
    assert [h for h, _ in recorded] == [FAILED]  # recorded on the pod: the controller sees it
    assert agent.loaded == loaded
    assert agent.metrics.failures == {"validate": 1, "signal": 0, "http": 0}
    assert "(validate failed)" in caplog.text
    # The exit code and how long it took, never what it printed: a validator quotes the line
    # it rejects, and in a Secret that line is the secret.
    assert re.search(r"check\.py exited with 1 after \d+\.\d\ds;", caplog.text)
    assert "unknown directive" not in caplog.text and "line 1" not in caplog.text

    kubelet_write(target, {"app.conf": b"good"})  # back to what the app runs: nothing to do
    _steps(agent, clock)
    assert server.count() == 0


def test_the_output_of_a_failed_validation_is_logged_only_when_asked(tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text("print('password = hunter2 is not valid'); raise SystemExit(3)")
    argv = (sys.executable, str(script))
    with pytest.raises(ReloadFailed) as quiet:
        Validator(ValidateSpec(argv, 30)).check()
    assert "hunter2" not in str(quiet.value)
    assert re.fullmatch(r".* exited with 3 after \d+\.\d\ds", str(quiet.value))
    with pytest.raises(ReloadFailed) as told:
        Validator(ValidateSpec(argv, 30, show_output=True)).check()
    assert str(told.value).endswith("; its output ends: password = hunter2 is not valid")


HANG = """
import os, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {os.getpgrp()} {grandchild.pid}")
time.sleep(600)
"""


def _live_in_group(pgid: int) -> list[int]:
    live = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            live.append(int(name))
    return live


def test_a_hanging_validation_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    validator = Validator(ValidateSpec((sys.executable, "-c", HANG, str(pids)), 3.0))
    with pytest.raises(ReloadFailed) as failed:
        validator.check()
    assert failed.value.stage == "validate"
    assert "no result within 3s; killed its process group" in str(failed.value)
    assert pids.exists(), "the command did not start within its timeout"
    pid, pgid, grandchild = map(int, pids.read_text().split())
    assert pgid == pid != os.getpgrp()  # a group of its own, not the agent's
    wait_for(lambda: not _live_in_group(pgid), f"process group {pgid} to be gone")
    assert grandchild not in _live_in_group(pgid)


def test_a_validation_that_cannot_run_says_so() -> None:
    with pytest.raises(ReloadFailed, match=r"no-such-validator-x -t: cannot run it \(No such file"):
        Validator(ValidateSpec(("no-such-validator-x", "-t"), 5)).check()


def test_a_directory_that_appears_later_reloads_once(
    tmp_path: Path, http: Http, caplog: pytest.LogCaptureFixture
) -> None:
    url, server = http()
    target = tmp_path / "not-yet"
    with caplog.at_level(logging.INFO, "kube_nudge.agent"):
        agent, clock, _ = _agent(target, _http(url))
        _steps(agent, clock, 5)
        assert agent.metrics.missing == {str(target): True}
        kubelet_write(target, {"a": b"1"})
        _steps(agent, clock, 5)
    assert caplog.text.count(f"watched directory {target} is missing") == 1  # logged once
    assert caplog.text.count(f"watched directory {target} is back") == 1
    assert agent.metrics.missing == {str(target): False}
    assert server.count() == 1


def test_a_key_that_arrives_later_records_what_the_app_runs_under_it(
    tmp_path: Path, http: Http, caplog: pytest.LogCaptureFixture
) -> None:
    url, server = http()
    target, secret = tmp_path / "config", tmp_path / "agent-key"
    kubelet_write(target, {"a": b"1"})
    # No Secret kube-nudge-agent-key yet: its optional volume is empty, the key random.
    keys = HashKey(random_key(), str(secret / "key"), from_file=False)
    agent, clock, recorded = _agent(target, _http(url), keys=keys)
    kubelet_write(target, {"a": b"2"})
    _steps(agent, clock)
    [(first, at)] = recorded
    assert json.loads(first)["key"] == keys.id != key_id(KEY)
    kubelet_write(secret, {"key": KEY + b"\n"})  # the kubelet fills the volume
    with caplog.at_level(logging.INFO, "kube_nudge.agent"):
        _steps(agent, clock)
    # The same load, recorded again under the namespace's key: no reload, the same time.
    assert recorded[1:] == [(loaded_hash((str(target),), KEY, key_id(KEY)), at)]
    assert server.count() == 1 and keys.id == key_id(KEY)
    assert f"the agent key is now {key_id(KEY)}" in caplog.text
    kubelet_write(secret, {"key": b"short"})  # a bad key is refused once, the last one kept
    with caplog.at_level(logging.INFO, "kube_nudge.agent"):
        _steps(agent, clock)
    assert keys.id == key_id(KEY) and len(recorded) == 2
    assert caplog.text.count("an HMAC key needs at least 16 bytes; keeping key") == 1
