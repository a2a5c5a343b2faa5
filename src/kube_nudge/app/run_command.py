"""``kube-nudge run``: its flags, and their validation before anything touches the cluster."""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import sys
from pathlib import Path

from kube_nudge.app.errors import CommandError, UsageError, one_line
from kube_nudge.app.flags import (
    check_address,
    check_count,
    check_duration,
    check_name,
    check_namespace,
    check_namespaces,
    check_number,
    check_text,
    duration_out_of_range,
    key_from_file,
    quoted,
)
from kube_nudge.app.logs import setup_logging
from kube_nudge.app.run import RunConfig, WebhookConfig, default_state_namespace, run_forever
from kube_nudge.controller.controller import ControllerOptions
from kube_nudge.kube.client import ClientOptions, KubeconfigError, load_kubeconfig
from kube_nudge.kube.workloads import ARGO_ROLLOUTS, WorkloadSpec, parse_workload_flag
from kube_nudge.model import parse_duration
from kube_nudge.model.annotation_values import (
    MAX_DEBOUNCE,
    MAX_MAX_ROLLOUTS,
    debounce_seconds,
    rollout_cap,
)
from kube_nudge.model.parsing import Refused
from kube_nudge.model.query_scope import LABEL_NAME
from kube_nudge.model.selectors import check_label_selector
from kube_nudge.notifications.config import load_receivers
from kube_nudge.notifications.model import Receiver
from kube_nudge.runtime.http import TlsFiles, parse_address
from kube_nudge.runtime.leader import LeaseConfig
from kube_nudge.runtime.prometheus import PrometheusAccess, ServerCredentials, normalised
from kube_nudge.strategies.registry import product_defaults

__all__ = ["RUN", "RunCommand", "parse_max_rollouts"]

_PENDING_IDENTITY = "assigned-at-start"  # the replica's identity replaces it in serve()
# The ranges of the flags (the chart's values.schema.json mirrors them). --debounce and
# --max-rollouts are the annotations' defaults, so they take the annotations' ranges.
MIN_AUDIT_INTERVAL = 10.0
MAX_AUDIT_INTERVAL = 86400.0
MAX_WORKERS = 1000
MAX_CONCURRENT_ROLLOUTS = 100_000
MIN_WRITE_QPS, MAX_WRITE_QPS = 0.01, 100_000.0
MAX_WRITE_BURST = 100_000
MIN_LEASE_DURATION = 1.0  # a Lease counts whole seconds
MIN_LEASE_TIMING = 0.1  # --renew-deadline, --retry-period
MAX_LEASE_TIMING = 3600.0
MAX_CLUSTER_NAME = 100
MAX_QUIET_WINDOW = 10.0
MIN_ERROR_INTERVAL, MAX_ERROR_INTERVAL = 1.0, 600.0


#: How --max-rollouts words each part the model's rule (``rollout_cap``) refuses.
_CAP_REFUSALS = {
    "form": "want N/DURATION, e.g. 3/5m",
    "count": f"N must be from 1 to {MAX_MAX_ROLLOUTS}, e.g. 3/5m",
    "window": "the window: {reason}",
    "window range": "the window must be from 1s to 24h, e.g. 3/5m",
}


def parse_max_rollouts(text: str) -> tuple[int, float]:
    """``N/DURATION`` (e.g. ``3/5m``) → (N, seconds), by the rule of the
    ``kube-nudge.io/max-rollouts`` annotation (N from 1 to 1000, a window from 1s to 24h);
    a refusal says which part is wrong."""
    try:
        return rollout_cap(text)
    except Refused as exc:
        wording = _CAP_REFUSALS.get(exc.part, "{reason}").format(reason=exc)
        raise ValueError(f"--max-rollouts {quoted(text)}: {wording}") from None


def _duration(flag: str, text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


def _debounce(text: str) -> float | None:
    """``--debounce``: ``auto`` (None) or a duration from 0 to 1h, by the annotation's rule
    (``debounce_seconds``)."""
    try:
        return debounce_seconds(text)
    except Refused as exc:
        if exc.part == "range":
            raise duration_out_of_range("--debounce", text, 0.0, MAX_DEBOUNCE) from None
        raise ValueError(f"--debounce: {exc}") from None


def _lease_timing(flag: str, text: str, low: float = MIN_LEASE_TIMING) -> float:
    return check_duration(flag, text, low, MAX_LEASE_TIMING)


def _selector(flag: str, text: str | None) -> str | None:
    return None if text is None else check_label_selector(flag, text)


def _namespaces(names: list[str]) -> tuple[str, ...]:
    """The --namespace flags, checked (none: all namespaces)."""
    for namespace in names:
        if not namespace:
            raise ValueError(
                "--namespace '': give a namespace name, or omit the flag to watch all namespaces"
            )
    return check_namespaces("--namespace", names)


def _workloads(flags: list[str], argo_rollouts: bool) -> tuple[WorkloadSpec, ...]:
    """Every --workload, validated, plus the Rollout kind with --argo-rollouts (a Rollout
    asked for both ways is one mistake, said before the cluster is touched)."""
    specs = [parse_workload_flag(text) for text in flags]
    if argo_rollouts:
        rollouts = ARGO_ROLLOUTS.resource
        for spec in specs:
            if (spec.group, spec.plural) == (rollouts.group, rollouts.plural):
                raise ValueError(
                    f"--workload {spec.text!r}: --argo-rollouts already manages "
                    f"{rollouts.plural}.{rollouts.group}; drop one of them"
                )
        specs.append(WorkloadSpec.of(ARGO_ROLLOUTS, "--argo-rollouts"))
    return tuple(specs)


def _max_concurrent_rollouts(text: str) -> str:
    """--max-concurrent-rollouts as its digits (0: no limit); ValueError if not a count."""
    concurrent = text.strip()
    if not concurrent.isascii() or not concurrent.isdigit():
        raise ValueError(
            f"--max-concurrent-rollouts {quoted(text)}: want a whole "
            "number such as 5, or 0 for no limit"
        )
    check_count("--max-concurrent-rollouts", concurrent, 0, MAX_CONCURRENT_ROLLOUTS)
    return concurrent


def _audit_interval(text: str) -> float:
    """--audit-interval in seconds (0: off); ValueError below the minimum or above the most."""
    audit_interval = _duration("--audit-interval", text)
    if audit_interval < 0 or 0 < audit_interval < MIN_AUDIT_INTERVAL:
        raise ValueError(
            f"--audit-interval {text}: at least "
            f"{MIN_AUDIT_INTERVAL:g}s (each pass lists every workload's pods), or 0 for off"
        )
    check_duration("--audit-interval", text, MIN_AUDIT_INTERVAL, MAX_AUDIT_INTERVAL, off=True)
    return audit_interval


def _receivers(path: str | None) -> tuple[Receiver, ...]:
    """The notification receivers of --notify-receivers-file (and the environment)."""
    try:
        return load_receivers(Path(path) if path else None, os.environ)
    except ValueError as exc:
        if not path:
            raise
        raise ValueError(f"--notify-receivers-file: {exc}") from None


def _lease(args: argparse.Namespace, namespace: str, name: str) -> LeaseConfig:
    """The Lease settings of the --lease-* flags, their order checked."""
    timings = {
        "lease_duration": _lease_timing(
            "--lease-duration", args.lease_duration, MIN_LEASE_DURATION
        ),
        "renew_deadline": _lease_timing("--renew-deadline", args.renew_deadline),
        "retry_period": _lease_timing("--retry-period", args.retry_period),
    }
    if not timings["retry_period"] < timings["renew_deadline"] < timings["lease_duration"]:
        raise ValueError(
            f"--retry-period {args.retry_period} < --renew-deadline {args.renew_deadline} "
            f"< --lease-duration {args.lease_duration} does not hold: a leader must stop "
            "before its lease can expire for the others"
        )
    return LeaseConfig(namespace=namespace, name=name, identity=_PENDING_IDENTITY, **timings)


def _webhook(args: argparse.Namespace) -> WebhookConfig | None:
    """--webhook-addr with its certificate and key, all three or none, files readable."""
    given = {
        "--webhook-addr": args.webhook_addr, "--webhook-cert-file": args.webhook_cert_file,
        "--webhook-key-file": args.webhook_key_file,
    }  # fmt: skip
    if not any(given.values()):
        return None
    missing = [flag for flag, value in given.items() if not value]
    if missing:
        raise ValueError(
            f"{' and '.join(missing)} missing: the snapshot webhook needs --webhook-addr, "
            "--webhook-cert-file and --webhook-key-file together"
        )
    for flag in ("--webhook-cert-file", "--webhook-key-file"):
        if not Path(given[flag]).is_file():
            raise ValueError(f"{flag} {given[flag]!r}: no such file")
    try:
        address = check_address("--webhook-addr", parse_address(args.webhook_addr))
    except ValueError as exc:
        raise ValueError(f"--webhook-addr: {exc}") from None
    tls = TlsFiles(Path(args.webhook_cert_file), Path(args.webhook_key_file))
    return WebhookConfig(address, tls)


def _prometheus(args: argparse.Namespace) -> PrometheusAccess | None:
    """--prometheus-url (each an http(s) URL), and each --prometheus-credentials folder with
    the one server it is for: the URL in its file ``url``, or the only --prometheus-url."""
    allowed = []
    for url in args.prometheus_url:
        try:
            allowed.append(normalised(url))
        except ValueError as exc:
            raise ValueError(f"--prometheus-url: {exc}") from None
    allowed = list(dict.fromkeys(allowed))
    if args.prometheus_credentials and not allowed:
        raise ValueError("--prometheus-credentials needs --prometheus-url")
    credentials: dict[str, ServerCredentials] = {}
    for given in args.prometheus_credentials:
        folder = Path(given)
        flag = f"--prometheus-credentials {given!r}"
        if not folder.is_dir():
            raise ValueError(f"{flag}: not a directory")
        server = _credentials_server(flag, folder, allowed)
        if server in credentials:
            raise ValueError(f"{flag}: {server} has --prometheus-credentials already; one each")
        credentials[server] = _usable(flag, ServerCredentials(folder))
    if not allowed:
        return None
    return PrometheusAccess(tuple(allowed), credentials=credentials)


def _usable(flag: str, credentials: ServerCredentials) -> ServerCredentials:
    """``credentials`` once its files read as a token and a CA bundle (a garbage ca.crt, a
    token with a line break: exit 2 at start, not an Error at every measurement)."""
    try:
        credentials.check()
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise ValueError(f"{flag}: {credentials.unusable(exc)}") from None
    return credentials


def _credentials_server(flag: str, folder: Path, allowed: list[str]) -> str:
    """The allowed server a credentials folder is for: its file ``url``, or the one
    --prometheus-url there is (a token is never sent to a server it wasn't meant for)."""
    named = folder / "url"
    if not named.is_file():
        if len(allowed) == 1:
            return allowed[0]
        raise ValueError(
            f"{flag}: with {len(allowed)} --prometheus-url, say which one it is for in a "
            "file url beside the token (a key url of its Secret)"
        )
    url = named.read_text(encoding="utf-8").strip()
    try:
        server = normalised(url)
    except ValueError as exc:
        raise ValueError(f"{flag}: its url: {exc}") from None
    if server not in allowed:
        raise ValueError(f"{flag}: its url {url!r} is not a --prometheus-url; add it there")
    return server


def _state_namespace(given: str | None) -> str:
    """--state-namespace, checked; the default when not given."""
    if given is not None:
        check_namespace("--state-namespace", given)
    return given or default_state_namespace()


def _argo_templates(args: argparse.Namespace) -> bool:
    """--argo-analysis-templates: only with analysis on (a --prometheus-url)."""
    if args.argo_analysis_templates and not args.prometheus_url:
        raise ValueError("--argo-analysis-templates needs --prometheus-url")
    return bool(args.argo_analysis_templates)


def _error_interval(text: str) -> float:
    """--analysis-error-interval: seconds, 1s to 10m."""
    return check_duration("--analysis-error-interval", text, MIN_ERROR_INTERVAL, MAX_ERROR_INTERVAL)


def _namespace_label(label: str | None) -> str | None:
    """--analysis-namespace-label: a Prometheus label name."""
    if label is not None and (not LABEL_NAME.fullmatch(label) or label.startswith("__")):
        raise ValueError(
            f"--analysis-namespace-label {label!r}: not a Prometheus label name "
            "([a-zA-Z_][a-zA-Z0-9_]*, not starting with __, which Prometheus keeps for "
            "itself), e.g. namespace"
        )
    return label


def _warn_of_cleartext_tokens(access: PrometheusAccess | None) -> None:
    """A warning at start for each plain-http server given a token (allowed, not refused:
    a Prometheus inside the cluster network is often served so)."""
    for server in access.cleartext_tokens() if access is not None else []:
        logging.getLogger("kube_nudge").warning(
            "--prometheus-url %s is plain http:// and has a token: the token crosses the "
            "network unencrypted; use https:// with a CA (ca.crt)",
            server,
        )


def _positive(flag: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{flag} {value:g}: must be greater than 0")


def _metrics_address(text: str) -> tuple[str, int] | None:
    if not text:
        return None
    try:
        return check_address("--metrics-addr", parse_address(text))
    except ValueError as exc:
        raise ValueError(f"--metrics-addr: {exc}") from None


class RunCommand:
    """Run the controller."""

    name = "run"
    help = "run the controller"
    exit_codes = (
        (0, "stopped by SIGTERM or SIGINT"),
        (1, "a fatal error, logged (e.g. the API server unreachable at start)"),
        (2, "a bad flag or kubeconfig; nothing was started"),
    )

    def configure(self, parser: argparse.ArgumentParser) -> None:
        """Every flag of ``kube-nudge run``."""
        parser.description = (
            "Roll opted-in workloads when the ConfigMaps/Secrets they consume change."
        )
        add = parser.add_argument
        add(
            "--kubeconfig",
            help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
        )
        add("--context", help="kubeconfig context (default: current)")
        add(
            "--namespace",
            "-n",
            action="append",
            default=[],
            dest="namespaces",
            help="only watch this namespace (repeatable; default: all)",
        )
        add("--source-selector", help="label selector for ConfigMaps/Secrets to watch")
        add("--workload-selector", help="label selector for workloads to watch")
        add(
            "--workload",
            action="append",
            default=[],
            metavar="GROUP/VERSION/PLURAL[:KIND]=PATH",
            help="also manage a custom resource with a pod template at PATH (repeatable); "
            "its Kind comes from API discovery unless given",
        )
        add(
            "--argo-rollouts",
            action="store_true",
            help="also manage Argo Rollouts (argoproj.io/v1alpha1 rollouts), their rollouts "
            "followed as Argo reports them; watched once the API serves the CRD",
        )
        add(
            "--compat",
            action="store_true",
            help="also opt in workloads annotated for Wave or Reloader",
        )
        add(
            "--csi-secrets",
            action="store_true",
            help="also count the SecretProviderClasses of Secrets Store CSI volumes as sources: "
            "new object versions in their SecretProviderClassPodStatus are a change "
            "(docs/csi-secrets.md)",
        )
        add(
            "--debounce",
            default="auto",
            help="default debounce: auto (a quiet window that "
            "extends while changes arrive, up to 2s) or a fixed window such as 2s (default auto)",
        )
        add(
            "--quiet-window",
            default="50ms",
            help="the quiet window of debounce auto, for "
            "writers not known to be slower (0 to 10s, default 50ms)",
        )
        add(
            "--max-rollouts",
            default="3/5m",
            help="default cap: at most N rollouts per window per workload (default 3/5m)",
        )
        add("--workers", type=int, default=64, help="concurrent reconciles (default 64)")
        add(
            "--max-concurrent-rollouts",
            default="0",
            help="at most this many rollouts in progress at once, cluster-wide; others wait "
            "their turn (default 0: no limit)",
        )
        add("--write-qps", type=float, default=500.0, help="client-side write rate (default 500/s)")
        add("--write-burst", type=int, default=1000, help="client-side write burst (default 1000)")
        add(
            "--metrics-addr",
            default=":8080",
            help="address for /metrics, /healthz, /readyz (default :8080; empty disables)",
        )
        add(
            "--webhook-addr",
            default="",
            help="serve the snapshot admission webhook over TLS on this address, e.g. :9443 "
            "(default: off; needs --webhook-cert-file and --webhook-key-file)",
        )
        add("--webhook-cert-file", help="PEM certificate (chain) of the webhook")
        add("--webhook-key-file", help="PEM private key of the webhook")
        add(
            "--audit-interval",
            default="0",
            help="every this long (e.g. 10m), audit every workload's pods for stale config and "
            "export kube_nudge_audit_* metrics (default 0: off; it lists pods)",
        )
        add(
            "--notify-receivers-file",
            help='JSON list of notification receivers ([{"url": ..., "format": "slack", '
            '"on": ["failed", ...]}]), e.g. a key of a mounted Secret; also read from '
            "$KUBE_NUDGE_NOTIFY_RECEIVERS. URLs are never logged",
        )
        add("--cluster-name", default="", help="names this cluster in notifications")
        add(
            "--prometheus-url",
            action="append",
            default=[],
            metavar="URL",
            help="a Prometheus server analysis templates may query (repeatable); no other "
            "address is ever contacted. None: analysis is off, and workloads asking for it "
            "are held",
        )
        add(
            "--argo-analysis-templates",
            action="store_true",
            help="also read Argo Rollouts' AnalysisTemplates (and, watching every namespace, "
            "ClusterAnalysisTemplates); watched once the API serves their CRDs",
        )
        add(
            "--analysis-error-interval",
            default="10s",
            help="how long after a measurement that errored (Prometheus unreachable, say) it is "
            "tried again, or the metric's interval where shorter, as Argo Rollouts paces it "
            "(1s to 10m, default 10s)",
        )
        add(
            "--analysis-namespace-label",
            metavar="LABEL",
            help="require every series selector of an analysis query to set LABEL to the "
            'workload\'s namespace (e.g. namespace: up{namespace="shop"}), as prom-label-proxy '
            "would; a query that can't be shown to is refused. Default: queries may read any "
            "series the servers hold",
        )
        add(
            "--prometheus-credentials",
            action="append",
            default=[],
            metavar="DIR",
            help="a mounted Secret of kube-nudge's own namespace with a bearer token (file "
            "token) and/or a CA bundle (file ca.crt) for one --prometheus-url: the one its "
            "file url names, or the only one (repeatable, one per server; files are read "
            "again when they change)",
        )
        add("--leader-elect", action="store_true", help="take a Lease; only the leader writes")
        add("--lease-duration", default="15s", help="how long a Lease is valid (default 15s)")
        add(
            "--renew-deadline",
            default="10s",
            help="a leader that can't renew within this stops writing (default 10s)",
        )
        add("--retry-period", default="2s", help="how often to try to acquire/renew (default 2s)")
        add(
            "--state-namespace",
            default=None,
            help="namespace of the Lease and the HMAC key Secret (default: own namespace)",
        )
        add("--lease-name", default="kube-nudge", help="Lease name (default kube-nudge)")
        add("--hmac-key-file", help="read the hash key from this file instead of a Secret")
        add(
            "--hmac-secret",
            default="kube-nudge-hmac-key",
            help="name of the Secret holding the hash key (created if missing)",
        )
        add("--log-level", default="info", help="debug, info, warning or error (default info)")
        add("--log-format", default="text", choices=["text", "json"], help="log format")

    def config(self, args: argparse.Namespace) -> RunConfig:
        """Validate every flag into a ``RunConfig``; ValueError names the bad value."""
        namespaces = _namespaces(args.namespaces)
        if args.workers < 1:
            raise ValueError(f"--workers {args.workers}: must be at least 1")
        check_count("--workers", args.workers, 1, MAX_WORKERS)
        _positive("--write-qps", args.write_qps)
        check_number("--write-qps", args.write_qps, MIN_WRITE_QPS, MAX_WRITE_QPS)
        concurrent = _max_concurrent_rollouts(args.max_concurrent_rollouts)
        _positive("--write-burst", args.write_burst)
        check_count("--write-burst", args.write_burst, 1, MAX_WRITE_BURST)
        count, window = parse_max_rollouts(args.max_rollouts)
        debounce = _debounce(args.debounce)
        quiet_window = check_duration("--quiet-window", args.quiet_window, 0.0, MAX_QUIET_WINDOW)
        webhook = _webhook(args)
        audit_interval = _audit_interval(args.audit_interval)
        receivers = _receivers(args.notify_receivers_file)
        cluster_name = check_text("--cluster-name", args.cluster_name, MAX_CLUSTER_NAME)
        state_namespace = _state_namespace(args.state_namespace)
        lease_name = check_name("--lease-name", args.lease_name)
        check_name("--hmac-secret", args.hmac_secret)
        if args.hmac_key_file:
            key_from_file(args)
        # Checked with or without --leader-elect: a bad value is a mistake either way.
        lease = _lease(args, state_namespace, lease_name)
        return RunConfig(
            kubeconfig=args.kubeconfig,
            context=args.context,
            controller=ControllerOptions(
                namespaces=namespaces,
                defaults=product_defaults(
                    debounce=debounce,
                    max_rollouts=count,
                    rollout_window=window,
                    compat=args.compat,
                    csi_secrets=args.csi_secrets,
                ),
                workers=args.workers,
                source_selector=_selector("--source-selector", args.source_selector),
                workload_selector=_selector("--workload-selector", args.workload_selector),
                max_concurrent_rollouts=int(concurrent) or None,
                quiet_window=quiet_window,
                prometheus=_prometheus(args),
                argo_analysis_templates=_argo_templates(args),
                analysis_error_interval=_error_interval(args.analysis_error_interval),
                analysis_namespace_label=_namespace_label(args.analysis_namespace_label),
            ),
            client=ClientOptions(write_qps=args.write_qps, write_burst=args.write_burst),
            metrics_addr=_metrics_address(args.metrics_addr),
            webhook=webhook,
            audit_interval=audit_interval,
            state_namespace=state_namespace,
            lease=lease if args.leader_elect else None,
            hmac_key_file=Path(args.hmac_key_file) if args.hmac_key_file else None,
            hmac_secret=args.hmac_secret,
            custom_workloads=_workloads(args.workload, args.argo_rollouts),
            receivers=receivers,
            cluster_name=cluster_name or None,
        )

    def execute(self, args: argparse.Namespace) -> int:
        """Validate, then serve until SIGINT/SIGTERM."""
        try:
            try:
                setup_logging(args.log_level, args.log_format)
            except ValueError as exc:
                raise ValueError(f"--log-level: {exc}") from None
            config = self.config(args)
            _warn_of_cleartext_tokens(config.controller.prometheus)
            load_kubeconfig(config.kubeconfig, config.context)  # in-cluster when none is given
        except (ValueError, KubeconfigError, UsageError) as exc:
            print(f"kube-nudge: {one_line(exc)}", file=sys.stderr)
            return 2
        log = logging.getLogger("kube_nudge")
        try:
            return run_forever(config)
        except (CommandError, KubeconfigError) as exc:  # says what to fix: the line is all
            log.error("fatal: %s", one_line(exc))
            return 1
        except Exception as exc:
            log.error("fatal: unexpected %s: %s", type(exc).__name__, one_line(exc))
            return 1


RUN = RunCommand()
