"""The agent's flags and their validation: one line naming the value and the fix, or a config."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import urllib.parse
from dataclasses import dataclass, field

from kube_nudge.agent.keys import DEFAULT_KEY_FILE, random_key, read_key

IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # noqa: S105  # nosec B105 # a path
IN_CLUSTER_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"

_COMPONENT = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_METHOD = re.compile(r"[A-Z]{1,20}")
DEFAULT_LISTEN = "127.0.0.1:9090"
DEFAULT_DEBOUNCE = "20ms"
WATCH_MODES = ("auto", "poll")


@dataclass(frozen=True)
class SignalSpec:
    """Reload by sending ``signum`` to every process named ``process``."""

    signum: int
    process: str
    retries: int


@dataclass(frozen=True)
class HttpSpec:
    """Reload by calling ``method url`` and expecting ``expect``."""

    url: str
    method: str
    expect: int
    timeout: float
    retries: int


@dataclass(frozen=True)
class ValidateSpec:
    """Run ``argv`` (no shell) before each reload; a non-zero exit or ``timeout`` blocks it."""

    argv: tuple[str, ...]
    timeout: float
    show_output: bool = False
    """Whether a failure's message quotes the end of the command's output (validators often
    quote the offending line, and the line may hold a Secret's value): off by default."""


@dataclass(frozen=True)
class ApiSpec:
    """Where the agent records what it loaded on its own Pod (``server`` None: nowhere)."""

    server: str | None
    token_file: str
    ca_file: str


@dataclass(frozen=True)
class AgentConfig:
    """Everything ``kube-nudge agent`` was asked to do, validated."""

    dirs: tuple[str, ...]
    debounce: float
    poll_interval: float
    watch_mode: str
    action: SignalSpec | HttpSpec
    validate: ValidateSpec | None
    retry_backoff: float
    listen: tuple[str, int] | None
    api: ApiSpec
    hash_key: bytes = field(repr=False)
    """The HMAC key of the loaded hash: ``hash_key_file``'s, else random for this process."""
    hash_key_file: str
    """Where the key is read from (again whenever it changes)."""
    hash_key_from_file: bool
    log_format: str


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The agent's flags; all values stay strings until ``build_config`` checks them."""
    parser.description = "reload an app in place when its mounted ConfigMap/Secret files change"
    add = parser.add_argument
    add("--watch", action="append", metavar="DIR", help="a mounted directory (repeatable)")
    add(
        "--debounce",
        default=DEFAULT_DEBOUNCE,
        help=f"wait this long after the first change, so that a burst of changes makes one "
        f"reload (default {DEFAULT_DEBOUNCE})",
    )
    add(
        "--watch-mode",
        default="auto",
        choices=WATCH_MODES,
        help="auto: inotify wakes the agent as the kubelet swaps the files, polling where the "
        "kernel has no inotify to give; poll: polling only (default auto)",
    )
    add(
        "--poll-interval",
        default="1s",
        help="how often to look at the files: the safety net under inotify, or the only way "
        "(default 1s)",
    )
    add("--signal", metavar="NAME", help="reload by sending this signal (HUP, USR1, ...)")
    add("--process", metavar="NAME", help="the executable name of the process to signal")
    add("--signal-retries", default="3", help="retries when no such process runs (default 3)")
    add("--http-url", metavar="URL", help="reload by calling this http(s) URL")
    add("--http-method", help="method of the reload call (default POST)")
    add("--http-expect", help="status that means reloaded (default 200)")
    add("--http-timeout", help="timeout of one reload call (default 5s)")
    add("--http-retries", help="retries of a failed reload call (default 3)")
    add("--retry-backoff", default="1s", help="first wait before a retry, doubling (default 1s)")
    add("--validate-command", metavar="CMD", help='check the new files first, e.g. "nginx -t"')
    add("--validate-timeout", default="30s", help="kill the check after this (default 30s)")
    add(
        "--log-validate-output",
        action="store_true",
        help="log the end of a failed check's output (off: its exit code and duration only, "
        "as the output may quote a Secret's value)",
    )
    add(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"/healthz and /metrics address (default {DEFAULT_LISTEN}: this pod only; "
        "':9090' for every interface, as an httpGet probe needs); 'off' for none",
    )
    add("--api-server", metavar="URL", help="API server (default: in-cluster)")
    add("--token-file", default=IN_CLUSTER_TOKEN, help="service account token file")
    add("--ca-file", default=IN_CLUSTER_CA, help="API server CA bundle")
    add(
        "--hash-key-file",
        metavar="FILE",
        help=f"HMAC key of the loaded hash, 16+ bytes (default {DEFAULT_KEY_FILE}: Secret "
        "kube-nudge-agent-key mounted there); without it a random key of this process, and "
        "the hash tells only whether the files changed",
    )
    add("--log-format", default="text", choices=("text", "json"), help="log line format")


def to_argv(args: argparse.Namespace) -> list[str]:
    """The command line that gives ``args`` back (for re-executing the agent lean)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    argv: list[str] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if value is None or value == action.default:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(action.option_strings[0])
            continue
        for item in value if isinstance(action, argparse._AppendAction) else [value]:
            argv.append(f"{action.option_strings[0]}={item}")
    return argv


def parse_duration(flag: str, text: str, *, positive: bool = False) -> float:
    """Seconds in a Go-style duration (``0``, ``500ms``, ``1.5s``, ``1m30s``)."""
    if text != "0":
        pos, total = 0, 0.0
        while pos < len(text):
            match = _COMPONENT.match(text, pos)
            if match is None:
                break
            total += float(match[1]) * _UNIT[match[2]]
            pos = match.end()
        if not text or pos < len(text):
            raise ValueError(f"{flag} {text!r}: want a duration such as 500ms, 2s or 1m30s")
        if total > 24 * 3600:
            raise ValueError(f"{flag} {text}: at most 24h")
    else:
        total = 0.0
    if positive and total <= 0:
        raise ValueError(f"{flag} {text}: must be greater than 0")
    return total


def _count(flag: str, text: str) -> int:
    if not text.isdigit() or int(text) > 100:
        raise ValueError(f"{flag} {text!r}: want a whole number from 0 to 100")
    return int(text)


def parse_signal(text: str) -> int:
    """``HUP``, ``SIGHUP``, ``hup`` or a number → the signal number."""
    name = text.upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    if text.isdigit() and int(text) in {s.value for s in signal.Signals}:
        return int(text)
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise ValueError(
            f"--signal {text!r}: unknown signal; use a name such as HUP, USR1, USR2 or TERM"
        ) from None


def shown_url(url: str) -> str:
    """``url`` without credentials, query or fragment: safe to log."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def check_url(flag: str, url: str) -> str:
    """An absolute http(s) URL with a host, or ValueError naming only its harmless parts."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 # raises ValueError on a bad port
    except ValueError:
        raise ValueError(f"{flag}: not a URL; want e.g. http://127.0.0.1:8080/-/reload") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(
            f"{flag}: scheme {parts.scheme or '(none)'!r} not supported; want http:// or https://"
        )
    if not parts.hostname:
        raise ValueError(f"{flag} {shown_url(url)}: no host; want e.g. http://127.0.0.1:8080/")
    return url


def parse_listen(text: str) -> tuple[str, int] | None:
    """``127.0.0.1:9090``, ``:9090`` (every interface), ``[::]:9090`` or ``off``."""
    if text == "off":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {text!r}: want HOST:PORT or :PORT (e.g. :9090), or off")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _action(args: argparse.Namespace) -> SignalSpec | HttpSpec:
    http_only = {
        "--http-method": args.http_method,
        "--http-expect": args.http_expect,
        "--http-timeout": args.http_timeout,
        "--http-retries": args.http_retries,
    }
    if (args.signal or args.process) and args.http_url:
        raise ValueError(
            f"--signal/--process and --http-url {shown_url(args.http_url)} both given: "
            "choose one reload action"
        )
    if args.http_url:
        method = (args.http_method or "POST").upper()
        if not _METHOD.fullmatch(method):
            raise ValueError(f"--http-method {args.http_method!r}: want e.g. POST, PUT or GET")
        expect = args.http_expect or "200"
        if not expect.isdigit() or not 100 <= int(expect) <= 599:
            raise ValueError(f"--http-expect {expect!r}: want a status code from 100 to 599")
        return HttpSpec(
            url=check_url("--http-url", args.http_url),
            method=method,
            expect=int(expect),
            timeout=parse_duration("--http-timeout", args.http_timeout or "5s", positive=True),
            retries=_count("--http-retries", args.http_retries or "3"),
        )
    given = [flag for flag, value in http_only.items() if value is not None]
    if given:
        raise ValueError(f"{given[0]} given without --http-url: add --http-url URL")
    if args.process is None:
        if args.signal is not None:
            raise ValueError(
                f"--signal {args.signal} needs --process NAME: the executable name of the "
                "app's process (as in /proc/PID/comm)"
            )
        raise ValueError("no reload action: give --signal HUP --process NAME or --http-url URL")
    if not args.process or "/" in args.process or "\0" in args.process:
        raise ValueError(
            f"--process {args.process!r}: give the executable's name (e.g. nginx), not a path"
        )
    return SignalSpec(
        signum=parse_signal(args.signal or "HUP"),
        process=args.process,
        retries=_count("--signal-retries", args.signal_retries),
    )


def _dirs(args: argparse.Namespace) -> tuple[str, ...]:
    if not args.watch:
        raise ValueError(
            "--watch missing: give the directory a ConfigMap or Secret is mounted at, "
            "e.g. --watch /etc/app"
        )
    dirs: list[str] = []
    for raw in args.watch:
        path = os.path.normpath(raw) if raw else ""
        if not path:
            raise ValueError("--watch '': give a directory")
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(
                f"--watch {raw!r}: not a directory; a subPath mount never gets updates, so "
                "mount the whole volume and watch its directory"
            )
        if path not in dirs:
            dirs.append(path)
    return tuple(dirs)


def _validate(args: argparse.Namespace) -> ValidateSpec | None:
    timeout = parse_duration("--validate-timeout", args.validate_timeout, positive=True)
    if args.validate_command is None:
        if args.log_validate_output:
            raise ValueError(
                "--log-validate-output given without --validate-command: add the check"
            )
        return None
    try:
        argv = shlex.split(args.validate_command)
    except ValueError as exc:
        raise ValueError(f"--validate-command {args.validate_command!r}: {exc}") from None
    if not argv:
        raise ValueError("--validate-command '': give a command such as \"nginx -t\"")
    return ValidateSpec(tuple(argv), timeout, show_output=bool(args.log_validate_output))


def _hash_key(path: str | None) -> tuple[bytes, str, bool]:
    """(key, the file it comes from, whether it came from it). Without a file a random key,
    never none: a plain digest of a Secret's files on the pod or in /metrics would let anyone
    who reads them test guesses."""
    given = path is not None
    path = path or DEFAULT_KEY_FILE
    if not given and not os.path.exists(path):
        return random_key(), path, False
    try:
        return read_key(path), path, True
    except ValueError as exc:
        where = "--hash-key-file" if given else "the agent key (Secret kube-nudge-agent-key) at"
        raise ValueError(f"{where} {exc}") from None


def _api(args: argparse.Namespace) -> ApiSpec:
    server = args.api_server
    if server is not None:
        check_url("--api-server", server)
    else:
        host, port = (
            os.environ.get("KUBERNETES_SERVICE_HOST"),
            os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
        )
        if host:
            server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return ApiSpec(server=server, token_file=args.token_file, ca_file=args.ca_file)


def build_config(args: argparse.Namespace) -> AgentConfig:
    """Check every flag; ValueError with one line naming the value and how to fix it."""
    dirs = _dirs(args)
    action = _action(args)
    key, key_file, from_file = _hash_key(args.hash_key_file)
    return AgentConfig(
        dirs=dirs,
        debounce=parse_duration("--debounce", args.debounce),
        poll_interval=parse_duration("--poll-interval", args.poll_interval, positive=True),
        watch_mode=args.watch_mode,
        action=action,
        validate=_validate(args),
        retry_backoff=parse_duration("--retry-backoff", args.retry_backoff),
        listen=parse_listen(args.listen),
        api=_api(args),
        hash_key=key,
        hash_key_file=key_file,
        hash_key_from_file=from_file,
        log_format=args.log_format,
    )
