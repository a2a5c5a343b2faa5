"""Every flag of every command, property-based: nonsense (negative or out-of-range durations
and counts, inf and nan, names that aren't DNS names, any text at all) is refused with one
line naming the flag and exit code 2, before anything is sent to a cluster; sensible values
pass. A new flag fails `test_every_flag_is_covered` until it is given its kind here."""

from __future__ import annotations

import argparse
import io
import logging
import os
import string
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kube_nudge.app import agent_command, run_command
from kube_nudge.app.cli import COMMANDS, build_parser, main
from kube_nudge.kube.client import KubeClient
from kube_nudge.model.parsing import is_dns_label, is_dns_subdomain

KEY_FILE = __file__  # 16 bytes or more: a usable HMAC key file
#: Manifests `plan` reads (the pull-request example's).
MANIFEST = str(Path(__file__).resolve().parents[1] / "examples" / "pr-check" / "v1" / "app.yaml")
MISSING = "/nonexistent/kube-nudge/file"
#: A receivers file of every format (docs/install.md, Notifications).
RECEIVERS = str(Path(__file__).resolve().parents[1] / "examples" / "notify" / "receivers.json")


class Reached(BaseException):
    """Every flag passed: the command went on to use the cluster (or to start)."""


def _reached(*args: Any, **kwargs: Any) -> Any:
    raise Reached


@pytest.fixture(scope="module", autouse=True)
def _stop_before_the_cluster() -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    patch.setattr(KubeClient, "from_config", classmethod(_reached))
    patch.setattr(run_command, "load_kubeconfig", _reached)
    patch.setattr(agent_command, "run", _reached)
    patch.setattr(os, "execv", _reached)
    patch.delenv("KUBE_NUDGE_NOTIFY_RECEIVERS", raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    patch.undo()
    root.handlers[:] = handlers  # `run` sets up logging before it would start
    root.setLevel(level)


def outcome(argv: list[str]) -> tuple[int | None, str]:
    """(None, "") when the flags were accepted, else (exit code, stderr)."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            code: Any = main(argv)
        except Reached:
            return None, ""
        except SystemExit as exc:
            code = exc.code
    return int(code), err.getvalue()


def refused(argv: list[str], flag: str) -> None:
    code, err = outcome(argv)
    assert code == 2, (argv, code, err)
    assert err.startswith("kube-nudge: ") and err.count("\n") == 1, (argv, err)
    assert flag in err, (argv, err)
    assert "Traceback" not in err


def accepted(argv: list[str]) -> None:
    code, err = outcome(argv)
    # They print and exit 0, never reaching a cluster (plan with --base: offline).
    offline = ("completion", "annotations", "plan")
    assert code is None or (code == 0 and argv[0] in offline), (argv, code, err)


# --- Values -----------------------------------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def durations(low: float, high: float) -> st.SearchStrategy[str]:
    """Go-style durations from ``low`` to ``high`` seconds, in whole units."""
    choices = []
    for unit, size in _UNITS.items():
        first, last = int(-(-low // size)), int(high // size)
        if first <= last:
            choices.append(st.builds(f"{{}}{unit}".format, st.integers(first, last)))
    return st.one_of(choices)


def bad_durations(low: float, high: float, *, off: bool = False) -> st.SearchStrategy[str]:
    """Negative, too short, too long, inf/nan, junk."""
    too_short = [] if low <= 0 else [durations(0.001, low * 0.999)]
    if off and too_short:
        too_short = [too_short[0].filter(lambda text: text not in ("0ms", "0s", "0m", "0h"))]
    return st.one_of(
        durations(0.001, 10 * high).map(lambda text: "-" + text),
        durations(high * 1.001, 1000 * high),
        *too_short,
        st.sampled_from(["inf", "nan", "-inf", "1e9s", "soon", "5", "1.5", "", " ", "1d"]),
    )


def counts(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(str)


def bad_counts(low: int, high: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(max_value=low - 1).map(str),
        st.integers(min_value=high + 1).map(str),
        st.sampled_from(["inf", "nan", "-inf", "1.5", "1e3", "two", "", "0x10"]),
    )


def numbers(low: float, high: float) -> st.SearchStrategy[str]:
    return st.floats(low, high).map(repr)


def bad_numbers(low: float, high: float) -> st.SearchStrategy[str]:
    return st.one_of(
        st.floats(max_value=low, exclude_max=True).map(repr),
        st.floats(min_value=high, exclude_min=True).map(repr),
        st.sampled_from(["inf", "-inf", "nan", "NaN", "Infinity", "1e400", "fast", ""]),
    )


_LABEL = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z")
NAMESPACES = _LABEL.filter(is_dns_label)
NAMES = st.lists(_LABEL, min_size=1, max_size=3).map(".".join).filter(is_dns_subdomain)
BAD_NAMESPACES = st.one_of(
    st.sampled_from(["BAD_NS", "Team", "-a", "a-", "a.b", "a b", "", "a" * 64, "ns/x"]),
    st.text(min_size=1, max_size=30).filter(lambda text: not is_dns_label(text)),
)
BAD_NAMES = st.one_of(
    st.sampled_from(["Key", "-a", "a..b", "a_b", "", "a" * 254, "a/b"]),
    st.text(min_size=1, max_size=30).filter(lambda text: not is_dns_subdomain(text)),
)
ANY_TEXT = st.text(max_size=40)


@dataclass(frozen=True)
class Kind:
    """What a flag takes: values it must accept, values it must refuse, and other flags it
    needs to be checked at all."""

    good: st.SearchStrategy[str] | None
    bad: st.SearchStrategy[str] | None
    needs: tuple[str, ...] = ()


def duration(low: float, high: float, *, off: bool = False, needs: tuple[str, ...] = ()) -> Kind:
    good = durations(low, high)
    if off:
        good = st.one_of(good, st.just("0"))
    return Kind(good, bad_durations(low, high, off=off), needs)


NAMESPACE = Kind(NAMESPACES, BAD_NAMESPACES)
NAME = Kind(NAMES, BAD_NAMES)
KEY = Kind(st.just(KEY_FILE), st.sampled_from([MISSING, "/dev/null", "/"]))
FREE = Kind(None, None)  # checked where it is used (the kubeconfig, a context)
TARGET = Kind(
    st.tuples(st.sampled_from(["configmap", "secret", "deployment", "cronjob"]), NAMES).map(
        "/".join
    ),
    st.one_of(
        st.sampled_from(["app", "pod/x", "configmap/App", "deployment/", "/web", "a/b/c"]),
        st.builds("configmap/{}".format, BAD_NAMES),
    ),
)
WORKLOAD = Kind(
    st.builds("deployment/{}".format, NAMES),
    st.sampled_from(["configmap/app", "secret/db", "web", "pod/web", "deployment/Web"]),
)

# Every flag of every command (agent: see test_agent_flags_never_crash).
FLAGS: dict[str, dict[str, Kind]] = {
    "run": {
        "--kubeconfig": FREE,
        "--context": FREE,
        "--namespace": NAMESPACE,
        "--source-selector": Kind(
            st.sampled_from(["app=web", "tier in (a,b)", "!legacy", "a!=b,c"]),
            st.sampled_from(["", " ", "app in web", "=x", "a==b==c", "(", "app=web,"]),
        ),
        "--workload-selector": Kind(
            st.sampled_from(["app=web", "team notin (x)"]), st.sampled_from(["", "a b", "x in"])
        ),
        "--workload": Kind(
            st.sampled_from(["example.com/v1/things:Thing=spec.template"]),
            st.sampled_from(["", "x", "example.com/v1/policies", "A/v1/x=spec", "a/b/c:lower=s"]),
        ),
        "--debounce": Kind(
            st.one_of(durations(0.0, 3600.0), st.just("auto")),
            st.one_of(bad_durations(0.0, 3600.0), st.sampled_from(["Auto", "auto2", "on"])),
        ),
        "--quiet-window": duration(0.0, 10.0),
        "--max-rollouts": Kind(
            st.builds("{}/{}".format, counts(1, 1000), durations(1.0, 86400.0)),
            st.one_of(
                st.sampled_from(
                    [
                        "1001/5m",
                        "0/5m",
                        "3/banana",
                        "3",
                        "/5m",
                        "3/",
                        "-1/5m",
                        "3/-5m",
                        "3/0s",
                        "3/500ms",
                        "3/25h",
                        "inf/5m",
                        "3/inf",
                        "٣/5m",
                        "3 /5m",
                    ]
                ),
                st.builds("{}/5m".format, st.integers(min_value=1001)),
                st.builds("3/{}".format, bad_durations(1.0, 86400.0)),
            ),
        ),
        "--workers": Kind(counts(1, 1000), bad_counts(1, 1000)),
        "--max-concurrent-rollouts": Kind(counts(0, 100_000), bad_counts(0, 100_000)),
        "--write-qps": Kind(numbers(0.01, 100_000.0), bad_numbers(0.01, 100_000.0)),
        "--write-burst": Kind(counts(1, 100_000), bad_counts(1, 100_000)),
        "--metrics-addr": Kind(
            st.sampled_from(["", ":8080", "127.0.0.1:0", "[::1]:9000", "metrics.local:80"]),
            st.sampled_from(["localhost", ":99999", "a b:80", "::1:80", ":-1", ":http", "x"]),
        ),
        "--webhook-addr": Kind(
            st.sampled_from([":9443", "0.0.0.0:443"]),
            st.sampled_from(["9443", ":70000", "bad host:1", "x"]),
            needs=(f"--webhook-cert-file={KEY_FILE}", f"--webhook-key-file={KEY_FILE}"),
        ),
        "--webhook-cert-file": Kind(
            st.just(KEY_FILE),
            st.just(MISSING),
            needs=("--webhook-addr=:9443", f"--webhook-key-file={KEY_FILE}"),
        ),
        "--webhook-key-file": Kind(
            st.just(KEY_FILE),
            st.just(MISSING),
            needs=("--webhook-addr=:9443", f"--webhook-cert-file={KEY_FILE}"),
        ),
        "--audit-interval": duration(10.0, 86400.0, off=True),
        "--notify-receivers-file": Kind(st.just(RECEIVERS), st.sampled_from([MISSING, "/"])),
        "--prometheus-url": Kind(
            st.sampled_from(["http://prometheus.monitoring:9090", "https://p.example/prom/"]),
            st.sampled_from(["ftp://p", "prometheus:9090", "http://u:p@p", "http://p/?q=1", ""]),
        ),
        "--analysis-error-interval": duration(1.0, 600.0),
        "--analysis-namespace-label": Kind(
            st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,20}", fullmatch=True),
            st.sampled_from(["", "9ns", "kubernetes.io/ns", "name-space", "a b"]),
        ),
        "--prometheus-credentials": Kind(
            st.just(str(Path(__file__).resolve().parent)),
            st.sampled_from([MISSING, KEY_FILE]),
            needs=("--prometheus-url=http://prometheus:9090",),
        ),
        "--cluster-name": Kind(
            st.text(string.ascii_letters + string.digits + " -_.", max_size=100),
            st.one_of(st.sampled_from(["a\nb", "\x1b[31m", "x" * 101, "tab\there"])),
        ),
        # The lease timings must keep retry < renew < lease with the others' defaults.
        "--lease-duration": Kind(durations(11.0, 3600.0), bad_durations(1.0, 3600.0)),
        "--renew-deadline": Kind(
            durations(3.0, 14.0), st.one_of(bad_durations(0.1, 3600.0), durations(15.0, 3600.0))
        ),
        "--retry-period": Kind(
            durations(0.1, 9.0), st.one_of(bad_durations(0.1, 3600.0), durations(10.0, 3600.0))
        ),
        "--state-namespace": NAMESPACE,
        "--lease-name": NAME,
        "--hmac-key-file": KEY,
        "--hmac-secret": NAME,
        "--log-level": Kind(
            st.sampled_from(["debug", "info", "WARNING", "error"]),
            st.sampled_from(["loud", "", "verbose", "5"]),
        ),
        "--log-format": Kind(st.sampled_from(["text", "json"]), st.sampled_from(["xml", ""])),
    },
    "status": {
        "--kubeconfig": FREE,
        "--context": FREE,
        "--namespace": NAMESPACE,
        "--output": Kind(st.sampled_from(["table", "json"]), st.sampled_from(["yaml", ""])),
        "--state-namespace": NAMESPACE,
        "--hmac-secret": NAME,
        "--hmac-key-file": KEY,
    },
    "wait": {
        "targets": TARGET,
        "--kubeconfig": FREE,
        "--context": FREE,
        "--namespace": NAMESPACE,
        "--timeout": duration(0.001, 86400.0),
        "--state-namespace": NAMESPACE,
        "--hmac-secret": NAME,
        "--hmac-key-file": KEY,
    },
    "release": {
        "workloads": WORKLOAD,
        "--kubeconfig": FREE,
        "--context": FREE,
        "--namespace": NAMESPACE,
    },
}
FLAGS["approve"] = FLAGS["release"]
FLAGS["plan"] = {
    # This Python file is text, but no manifest: refused like a missing one.
    "--filename": Kind(st.just(MANIFEST), st.sampled_from([MISSING, KEY_FILE])),
    "--base": Kind(st.just(MANIFEST), st.sampled_from([MISSING, "-", KEY_FILE])),
    "--namespace": NAMESPACE,
    "--output": Kind(st.sampled_from(["table", "json", "markdown"]), st.sampled_from(["md", ""])),
    "--kubeconfig": FREE,
    "--context": FREE,
    "--state-namespace": NAMESPACE,
    "--hmac-secret": NAME,
    "--hmac-key-file": KEY,
}
FLAGS["migrate"] = {
    "--kubeconfig": FREE,
    "--context": FREE,
    "--namespace": NAMESPACE,
    "--output": Kind(st.sampled_from(["table", "json", "markdown"]), st.sampled_from(["md", ""])),
}
FLAGS["completion"] = {
    "shell": Kind(st.sampled_from(["bash", "zsh"]), st.sampled_from(["fish", "", "BASH", "sh"]))
}
FLAGS["annotations"] = {
    "--output": Kind(st.sampled_from(["text", "markdown"]), st.sampled_from(["json", "", "md"]))
}
#: A flag whose errors name it by its short form, as people type it (`plan -f`).
SHORT = {"--filename": "-f"}
# What each command needs besides the flag under test, and the key file for wait.
BASE = {
    "run": ["run"],
    "status": ["status"],
    "wait": ["wait", "configmap/app", f"--hmac-key-file={KEY_FILE}"],
    "release": ["release", "deployment/web"],
    "approve": ["approve", "deployment/web"],
    "completion": ["completion", "bash"],
    "annotations": ["annotations"],
    "plan": ["plan", f"--filename={MANIFEST}"],
    "migrate": ["migrate"],
}
CASES = [(command, flag) for command, flags in FLAGS.items() for flag in flags]
#: The flags with nonsense to refuse, and with sensible values to accept: a case of neither
#: would test nothing, so it is not a case (``test_only_the_kubeconfig_flags_go_unchecked``).
BAD_CASES = [(command, flag) for command, flag in CASES if FLAGS[command][flag].bad is not None]
GOOD_CASES = [(command, flag) for command, flag in CASES if FLAGS[command][flag].good is not None]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    [group] = [
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    return dict(group.choices)


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every flag that takes a value (the long form), and the positional arguments."""
    found = set()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.nargs == 0:
            continue  # --help and switches such as --compat take no value
        long = [o for o in action.option_strings if o.startswith("--")]
        found.add(long[0] if long else action.dest)
    return found


def test_every_flag_is_covered() -> None:
    parsers = _subparsers()
    assert set(parsers) == {c.name for c in COMMANDS}
    for name, parser in parsers.items():
        if name == "agent":
            continue  # the agent's own checks: test_agent_flags_never_crash
        assert _flags(parser) == set(FLAGS[name]), name


def argv(command: str, flag: str, value: str) -> list[str]:
    kind = FLAGS[command][flag]
    base = BASE[command]
    if not flag.startswith("--"):  # a positional argument: replace the default target
        return [base[0], value, *base[2:]]
    rest = [arg for arg in base if not arg.startswith(flag + "=")]
    return [*rest, *kind.needs, f"{flag}={value}"]


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("command", "flag"), BAD_CASES)
@SETTINGS
@given(data=st.data())
def test_nonsense_is_refused_with_one_line_and_exit_2(
    command: str, flag: str, data: st.DataObject
) -> None:
    bad = FLAGS[command][flag].bad
    assert bad is not None
    value = data.draw(bad)
    shown = flag if flag.startswith("--") else ""
    refused(argv(command, flag, value), SHORT.get(shown, shown))


@pytest.mark.parametrize(("command", "flag"), GOOD_CASES)
@SETTINGS
@given(data=st.data())
def test_sensible_values_pass(command: str, flag: str, data: st.DataObject) -> None:
    good = FLAGS[command][flag].good
    assert good is not None
    accepted(argv(command, flag, data.draw(good)))


#: Flags whose value no command checks before it reaches for the cluster, where this test
#: stops it: the kubeconfig is read then (a missing or junk one exits 2 with one line,
#: tests/unit/test_app_errors.py), and a context is looked up in it.
UNCHECKED = {"--kubeconfig", "--context"}


def test_only_the_kubeconfig_flags_go_unchecked() -> None:
    """A flag without nonsense to refuse, or without sensible values to accept, has no case
    above: only the kubeconfig's flags may be such, and they have neither."""
    no_bad = {flag for command, flag in CASES if (command, flag) not in BAD_CASES}
    no_good = {flag for command, flag in CASES if (command, flag) not in GOOD_CASES}
    assert no_bad == UNCHECKED
    assert no_good == UNCHECKED


@pytest.mark.parametrize(("command", "flag"), CASES)
@SETTINGS
@given(value=ANY_TEXT)
def test_any_text_is_accepted_or_refused_in_one_line(command: str, flag: str, value: str) -> None:
    code, err = outcome(argv(command, flag, value))
    if code not in (None, 0):
        assert code == 2 and "Traceback" not in err, (flag, value, err)
        assert err.startswith("kube-nudge: ") and err.count("\n") == 1, (flag, value, err)


@pytest.mark.parametrize(("command", "flag"), [c for c in CASES if c[1].startswith("--")])
def test_a_double_dash_value_is_refused_naming_the_flag(command: str, flag: str) -> None:
    # Python's argparse drops "--" from "--flag=--" and stores [], which crashed the checks
    # that expect one value (hypothesis found it on --write-burst).
    code, err = outcome(argv(command, flag, "--"))
    assert code == 2 and f"{flag} '--': want a value" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--debounce=-1s"], "--debounce '-1s': want a duration from 0ms to 1h"),
        (["--namespace=BAD_NS"], "--namespace 'BAD_NS': not a namespace name"),
        (["--max-rollouts=1001/5m"], "--max-rollouts '1001/5m': N must be from 1 to 1000"),
        (["--max-rollouts=0/5m"], "--max-rollouts '0/5m': N must be from 1 to 1000"),
        (["--max-rollouts=3/banana"], "--max-rollouts '3/banana': the window: invalid"),
        (["--write-qps=inf"], "--write-qps inf: want a number from 0.01 to 100000"),
        (["--write-qps=nan"], "--write-qps nan"),
        (["--lease-duration=banana"], "--lease-duration: invalid duration"),
        (["--namespace=a", "--namespace=a"], "--namespace 'a': given twice"),
    ],
)
def test_the_issues_examples(flags: list[str], says: str) -> None:
    code, err = outcome(["run", *flags])
    assert code == 2 and says in err and err.count("\n") == 1, err


def test_agent_flags_never_crash() -> None:
    """The agent checks its own flags (kube_nudge.agent.config): whatever they are given, it
    refuses in one line with exit code 2 or goes on."""
    parser = _subparsers()["agent"]
    flags = sorted(_flags(parser))
    assert "--debounce" in flags

    @SETTINGS
    @given(flag=st.sampled_from(flags), value=st.one_of(ANY_TEXT, st.sampled_from(
        ["-1s", "inf", "nan", "0", "1e9", "-5", "99999999999999h"])))  # fmt: skip
    def check(flag: str, value: str) -> None:
        code, err = outcome(["agent", "--watch=/tmp", "--process=app", f"{flag}={value}"])
        if code is not None:
            assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (flag, err)

    check()


def test_a_key_file_is_read_as_a_flag(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(b"tiny")
    refused(["status", f"--hmac-key-file={short}"], "--hmac-key-file")
