"""``kube-nudge agent`` checks every flag before it starts: one line naming the value and how
to fix it, exit code 2. (Only bad flags go through ``main`` here: good ones would start the
agent, which replaces this process; test_agent_process.py runs those.)"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pytest

from kube_nudge.agent import config as config_module
from kube_nudge.agent import main as agent_main
from kube_nudge.agent.config import (
    HttpSpec,
    SignalSpec,
    add_flags,
    build_config,
    parse_duration,
    to_argv,
)
from kube_nudge.app.cli import main


@pytest.fixture
def watched(tmp_path: Path) -> str:
    (tmp_path / "config").mkdir()
    return str(tmp_path / "config")


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return parser.parse_args(argv)


BAD = [
    ([], "--watch missing: give the directory a ConfigMap or Secret is mounted at"),
    (["--process=nginx", "--http-url=http://127.0.0.1/r"],
     "--signal/--process and --http-url http://127.0.0.1/r both given: choose one"),
    (["--signal=HUP"], "--signal HUP needs --process NAME"),
    ([], "no reload action: give --signal HUP --process NAME or --http-url URL"),
    (["--process=nginx", "--signal=RELOAD"], "--signal 'RELOAD': unknown signal; use a name"),
    (["--process=/usr/sbin/nginx"], "--process '/usr/sbin/nginx': give the executable's name"),
    (["--http-url=ftp://host/r"], "--http-url: scheme 'ftp' not supported; want http://"),
    (["--http-url=http:///reload"], "--http-url http:///reload: no host"),
    (["--http-url=http://h:99999/"], "--http-url: not a URL"),
    (["--http-url=http://h/", "--http-expect=2xx"], "--http-expect '2xx': want a status code"),
    (["--http-url=http://h/", "--http-method=RE LOAD"], "--http-method 'RE LOAD': want e.g."),
    (["--http-url=http://h/", "--http-timeout=0"], "--http-timeout 0: must be greater than 0"),
    (["--http-url=http://h/", "--http-retries=-1"], "--http-retries '-1': want a whole number"),
    (["--process=nginx", "--http-retries=2"], "--http-retries given without --http-url"),
    (["--process=nginx", "--debounce=soon"], "--debounce 'soon': want a duration such as"),
    (["--process=nginx", "--poll-interval=0s"], "--poll-interval 0s: must be greater than 0"),
    (["--process=nginx", "--validate-command=nginx -t 'x"], "--validate-command \"nginx -t 'x\":"),
    (["--process=nginx", "--validate-command="], "--validate-command '': give a command"),
    (["--process=nginx", "--listen=9090"], "--listen '9090': want HOST:PORT or :PORT"),
    (["--process=nginx", "--hash-key-file=/no/key"], "--hash-key-file '/no/key': cannot read"),
    (["--process=nginx", "--log-validate-output"], "--log-validate-output given without --valid"),
    (["--process=nginx", "--api-server=localhost:6443"], "--api-server: scheme 'localhost'"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "says"), BAD)
def test_bad_flags_exit_2_with_one_line(
    flags: list[str], says: str, watched: str, capsys: pytest.CaptureFixture[str]
) -> None:
    watch = [] if says.startswith("--watch missing") else [f"--watch={watched}"]
    assert main(["agent", *watch, *flags]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.startswith("kube-nudge: ") and err.count("\n") == 1
    assert agent_main.main([*watch, *flags]) == 2  # python -m kube_nudge.agent says the same
    assert capsys.readouterr().err == err


def test_a_file_is_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "app.conf").write_text("x")
    assert main(["agent", f"--watch={tmp_path / 'app.conf'}", "--process=nginx"]) == 2
    assert "not a directory; a subPath mount never gets updates" in capsys.readouterr().err


def test_a_short_hash_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "key").write_text("short")
    argv = ["agent", f"--watch={tmp_path}", "--process=nginx", f"--hash-key-file={tmp_path}/key"]
    assert main(argv) == 2
    assert "an HMAC key needs at least 16 bytes" in capsys.readouterr().err


def test_the_hash_key_is_random_per_process_unless_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags = [f"--watch={tmp_path}", "--process=nginx"]
    monkeypatch.setattr(config_module, "DEFAULT_KEY_FILE", f"{tmp_path}/mounted/key")
    first, second = build_config(_parse(flags)), build_config(_parse(flags))
    assert len(first.hash_key) == 32 and first.hash_key != second.hash_key
    # Looked at again later: the Secret's volume may be filled once the Secret exists.
    assert (first.hash_key_file, first.hash_key_from_file) == (f"{tmp_path}/mounted/key", False)
    (tmp_path / "mounted").mkdir()
    (tmp_path / "mounted" / "key").write_bytes(b"m" * 16 + b"\n")  # the namespace's agent key
    mounted = build_config(_parse(flags))
    assert (mounted.hash_key, mounted.hash_key_from_file) == (b"m" * 16, True)
    (tmp_path / "key").write_bytes(b"k" * 20 + b"\n")
    given = build_config(_parse([*flags, f"--hash-key-file={tmp_path}/key"]))
    assert (given.hash_key, given.hash_key_file) == (b"k" * 20, f"{tmp_path}/key")
    assert "k" * 20 not in repr(given) and repr(first.hash_key) not in repr(first)
    (tmp_path / "mounted" / "key").write_bytes(b"short")
    with pytest.raises(ValueError, match=r"^the agent key \(Secret kube-nudge-agent-key\) at '"):
        build_config(_parse(flags))


def test_a_missing_directory_is_accepted(tmp_path: Path) -> None:
    config = build_config(_parse([f"--watch={tmp_path}/later", "--process=nginx"]))
    assert config.dirs == (f"{tmp_path}/later",)


def test_signal_flags_make_a_config(watched: str) -> None:
    config = build_config(
        _parse([f"--watch={watched}", f"--watch={watched}/", "--signal=usr2", "--process=nginx",
                "--debounce=500ms", "--poll-interval=1m30s",
                "--validate-command=nginx -t -c '/a b'", "--listen=127.0.0.1:0",
                "--api-server=https://10.0.0.1:443"])
    )  # fmt: skip
    assert config.dirs == (watched,)
    assert config.action == SignalSpec(signal.SIGUSR2, "nginx", 3)
    assert (config.debounce, config.poll_interval) == (0.5, 90.0)
    assert config.validate is not None
    assert config.validate.argv == ("nginx", "-t", "-c", "/a b") and config.validate.timeout == 30
    assert config.listen == ("127.0.0.1", 0)
    assert config.api.server == "https://10.0.0.1:443"


def test_the_agent_is_quiet_by_default(watched: str) -> None:
    config = build_config(_parse([f"--watch={watched}", "--process=nginx",
                                  "--validate-command=nginx -t"]))  # fmt: skip
    # Woken by inotify, with a short debounce; polls as the safety net.
    assert (config.watch_mode, config.debounce, config.poll_interval) == ("auto", 0.02, 1.0)
    # /healthz and /metrics on the loopback interface only: the pod's own containers.
    assert config.listen == ("127.0.0.1", 9090)
    # A failed check's output (it may quote a Secret's line) is not logged.
    assert config.validate is not None and config.validate.show_output is False
    flags = [f"--watch={watched}", "--process=nginx", "--listen=:9090",
             "--validate-command=nginx -t", "--log-validate-output"]  # fmt: skip
    told = build_config(_parse(flags))
    assert told.listen == ("", 9090)
    assert told.validate is not None and told.validate.show_output is True


def test_http_flags_make_a_config(watched: str) -> None:
    config = build_config(
        _parse([f"--watch={watched}", "--http-url=https://127.0.0.1:8443/-/reload",
                "--http-method=put", "--http-expect=204", "--http-timeout=2s", "--http-retries=0",
                "--listen=off"])
    )  # fmt: skip
    assert config.action == HttpSpec("https://127.0.0.1:8443/-/reload", "PUT", 204, 2.0, 0)
    assert config.listen is None


def test_the_in_cluster_api_server_comes_from_the_environment(
    watched: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    config = build_config(_parse([f"--watch={watched}", "--process=nginx"]))
    assert config.api.server == "https://[fd00::1]:6443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert build_config(_parse([f"--watch={watched}", "--process=nginx"])).api.server is None


@pytest.mark.parametrize(
    "argv",
    [
        ["--watch=/a", "--watch=/b", "--process=nginx", "--signal=USR1", "--debounce=0"],
        ["--watch=/a", "--http-url=http://x/?a=b", "--http-retries=0", "--log-format=json"],
        ["--watch=/a", "--process=p", "--validate-command=sh -c 'a b'", "--listen=[::1]:9"],
        ["--watch=/a", "--process=p", "--validate-command=check", "--log-validate-output"],
        ["--watch=/a", "--process=p", "--watch-mode=poll"],
    ],
)
def test_the_flags_survive_the_lean_re_execution(argv: list[str]) -> None:
    args = _parse(argv)
    assert _parse(to_argv(args)) == args


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0.0), ("500ms", 0.5), ("1.5s", 1.5), ("1m30s", 90.0), ("2h", 7200)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration("--x", text) == seconds


@pytest.mark.parametrize("text", ["", "1", "s", "-1s", "1d", "1s ", "25h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="--x"):
        parse_duration("--x", text)
