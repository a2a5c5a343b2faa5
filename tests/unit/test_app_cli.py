"""``kube-nudge run`` validates every flag before touching a cluster: one line naming the
value, exit code 2."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from kube_nudge.app.cli import COMMANDS, build_parser, main
from kube_nudge.app.run_command import RUN

NO_CLUSTER = ["--kubeconfig=/nonexistent/kubeconfig"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--workers=0"], "--workers 0: must be at least 1"),
        (["--write-qps=0"], "--write-qps 0: must be greater than 0"),
        (["--write-burst=0"], "--write-burst 0: must be greater than 0"),
        (["--namespace="], "--namespace '': give a namespace name"),
        (["--max-rollouts=3"], "--max-rollouts '3': want N/DURATION"),
        (["--debounce=soon"], '--debounce: invalid duration "soon"'),
        (["--metrics-addr=localhost"], "bad address 'localhost'"),
        (["--workload=example.com/v1/policies"], "--workload 'example.com/v1/policies'"),
        (["--source-selector=app in web"], "--source-selector 'app in web': not a label"),
        (["--workload-selector="], "--workload-selector '': give a label selector"),
        (["--audit-interval=5s"], "--audit-interval 5s: at least 10s"),
        (["--audit-interval=-1m"], "--audit-interval -1m: at least 10s"),
        (["--webhook-addr=:9443"], "--webhook-cert-file and --webhook-key-file missing"),
        (
            ["--webhook-addr=:9443", "--webhook-cert-file=/no/cert", "--webhook-key-file=/no/k"],
            "--webhook-cert-file '/no/cert': no such file",
        ),
        (
            ["--leader-elect", "--lease-duration=5s", "--renew-deadline=10s"],
            "--retry-period 2s < --renew-deadline 10s < --lease-duration 5s does not hold",
        ),
        (["--max-concurrent-rollouts=two"], "--max-concurrent-rollouts 'two': want a whole"),
        (
            ["--analysis-namespace-label=kubernetes.io/ns"],
            "--analysis-namespace-label 'kubernetes.io/ns': not a Prometheus label name",
        ),
        (["--analysis-error-interval=0s"], "--analysis-error-interval"),
        (
            ["--analysis-namespace-label=__name__"],
            "--analysis-namespace-label '__name__': not a Prometheus label name",
        ),
        (["--prometheus-url=http://127.0.0.1:0"], "the port is no number 1-65535"),
        (["--argo-analysis-templates"], "--argo-analysis-templates needs --prometheus-url"),
        (
            ["--notify-receivers-file=/no/receivers.json"],
            "cannot read notification receivers from file /no/receivers.json",
        ),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *NO_CLUSTER, *flags]) == 2
    err = capsys.readouterr().err
    assert says in err
    assert err.startswith("kube-nudge: ") and err.count("\n") == 1


def test_good_flags_make_a_config() -> None:
    args = build_parser().parse_args(
        ["run", "--workload=example.com/v1/things:Thing=spec.template", "--debounce=0",
         "--max-rollouts=5/1m", "--metrics-addr=127.0.0.1:0", "-n", "a", "-n", "b"]
    )  # fmt: skip
    config = RUN.config(args)
    assert config.controller.namespaces == ("a", "b")
    assert config.controller.defaults.debounce == 0
    assert (config.controller.defaults.max_rollouts, config.controller.defaults.rollout_window) == (
        5, 60.0
    )  # fmt: skip
    assert "notify" in config.controller.defaults.strategies
    assert config.metrics_addr == ("127.0.0.1", 0)
    assert config.lease is None
    assert config.audit_interval == 0 and config.webhook is None  # both off by default
    (spec,) = config.custom_workloads
    assert spec.known() is not None and spec.known().resource.kind == "Thing"  # type: ignore[union-attr]


def test_every_command_is_in_the_parser() -> None:
    parser = build_parser()
    assert [command.name for command in COMMANDS] == [
        "run",
        "status",
        "wait",
        "plan",
        "migrate",
        "release",
        "approve",
        "agent",
        "annotations",
        "completion",
    ]
    for command in COMMANDS:
        args = ["deployment/app"] if command.name in ("wait", "release", "approve") else []
        args = ["bash"] if command.name == "completion" else args
        args = ["-f", "-"] if command.name == "plan" else args
        assert parser.parse_args([command.name, *args]).command == command.name


def test_a_bad_receiver_url_is_refused_without_showing_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_path = "/services/T000/B000/XXXXXXXXXXXXXXXX"
    monkeypatch.setenv(
        "KUBE_NUDGE_NOTIFY_RECEIVERS", f'[{{"url": "ftp://hooks.example.com{secret_path}"}}]'
    )
    assert main(["run", *NO_CLUSTER]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kube-nudge: notification receivers in env KUBE_NUDGE_NOTIFY_RECEIVERS")
    assert err.count("\n") == 1 and secret_path not in err


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        ("/usr/local/bin/kubectl-nudge", "kubectl nudge"),  # what kubectl runs for `kubectl nudge`
        ("kubectl-nudge.exe", "kubectl nudge"),
        ("/usr/local/bin/kube-nudge", "kube-nudge"),
        ("/app/src/kube_nudge/__main__.py", "kube-nudge"),  # python -m kube_nudge
    ],
)
def test_usage_and_help_name_the_command_as_it_was_typed(
    argv0: str, prog: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0])
    with pytest.raises(SystemExit) as done:
        main(["plan", "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {prog} plan [-h]")
    with pytest.raises(SystemExit):
        main(["plan"])
    err = capsys.readouterr().err
    assert err.startswith("kube-nudge: plan: ") and err.endswith(f"(see {prog} plan --help)\n")


@pytest.mark.parametrize("command", [None, *(command.name for command in COMMANDS)])
def test_help_shows_no_docstring_markup(
    command: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Docstrings write literals as ``x``; a terminal shows them plain."""
    with pytest.raises(SystemExit):
        main([command, "--help"] if command else ["--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    if command is None:
        assert "\nThe kube-nudge command line.\n" in out


def _credentials(folder: Path, **files: str) -> str:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return f"--prometheus-credentials={folder}"


def test_a_prometheus_credentials_folder_must_say_which_server_it_is_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With two servers, a token with no url could go to either: refused (exit 2), never
    sent to both as it once was."""
    two = ["--prometheus-url=https://a.example", "--prometheus-url=https://b.example"]
    cases = [
        ([_credentials(tmp_path / "bare", token="t")], "with 2 --prometheus-url, say which one "
         "it is for in a file url beside the token"),
        ([_credentials(tmp_path / "other", token="t", url="https://c.example")],
         "its url 'https://c.example' is not a --prometheus-url; add it there"),
        ([_credentials(tmp_path / "one", url="https://a.example:443/"),
          _credentials(tmp_path / "again", url="https://A.example")],
         "https://a.example:443 has --prometheus-credentials already; one each"),
    ]  # fmt: skip
    for flags, says in cases:
        assert main(["run", *NO_CLUSTER, *two, *flags]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err


def test_credentials_that_cant_be_used_stop_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A garbage ca.crt, or a token with a line break, is exit 2 in one line naming the
    folder (never the token), not an Error at every measurement later."""
    url = "--prometheus-url=https://prometheus.monitoring:9090"
    for name, files in (("ca", {"ca.crt": "-----BEGIN CERTIFICATE-----\nnope\n"}),
                        ("token", {"token": "s3cret\nsecond-line"})):  # fmt: skip
        flag = _credentials(tmp_path / name, **files)
        assert main(["run", *NO_CLUSTER, url, flag]) == 2
        err = capsys.readouterr().err
        assert f"--prometheus-credentials '{tmp_path / name}': the credentials in " in err
        assert "can't be used" in err and err.count("\n") == 1
        assert "s3cret" not in err and "second-line" not in err


def test_a_token_for_a_plain_http_server_is_warned_of_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    flags = ["--prometheus-url=http://prometheus.monitoring:9090",
             _credentials(tmp_path / "creds", token="s3cret-t0ken")]  # fmt: skip
    config = RUN.config(build_parser().parse_args(["run", *flags]))
    assert config.controller.prometheus is not None
    assert config.controller.prometheus.cleartext_tokens() == ["http://prometheus.monitoring:9090"]
    with caplog.at_level(logging.WARNING):
        assert main(["run", *NO_CLUSTER, *flags]) == 2  # no kubeconfig: after the warning
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "--prometheus-url http://prometheus.monitoring:9090 is plain http:// and has a token: "
        "the token crosses the network unencrypted; use https:// with a CA (ca.crt)"
    ]
    assert "s3cret-t0ken" not in caplog.text
