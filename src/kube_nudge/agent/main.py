"""The agent's loop (look, validate, reload, record) and its entry point.

The loop looks at the files when inotify says a watched directory changed, and every
``--poll-interval`` whatever happens (the only way where there is no inotify). A failed
reload never stops the agent: it is logged with its stage, counted, and the agent waits for
the next change (each action retries what may pass, bounded, with backoff). A change that
lands during a reload is seen by the next look (the watcher fingerprints the files before
hashing them), so the app is reloaded once more, at most once per debounce.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence

from kube_nudge import __version__
from kube_nudge.agent.config import AgentConfig, HttpSpec, add_flags, build_config, shown_url
from kube_nudge.agent.inotify import Wakeup, open_wakeup
from kube_nudge.agent.keys import HashKey
from kube_nudge.agent.logs import setup_logging
from kube_nudge.agent.metrics import AgentMetrics
from kube_nudge.agent.podrecord import PodRecorder, RecordWorker, pod_from_env
from kube_nudge.agent.reload import (
    HttpAction,
    Reloader,
    ReloadFailed,
    SignalAction,
    Sleep,
    Validator,
    backoff_delays,
)
from kube_nudge.agent.server import start_server
from kube_nudge.agent.watch import Snapshot, Watcher, claim, dir_hashes

log = logging.getLogger("kube_nudge.agent")

Record = Callable[[str, float], None]


class Agent:
    """Turns settled changes of the watched files into reloads, one step per poll."""

    def __init__(
        self,
        watcher: Watcher,
        reloader: Reloader,
        metrics: AgentMetrics,
        keys: HashKey,
        *,
        validator: Validator | None = None,
        record: Record | None = None,
        record_failure: Callable[[float], None] | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watcher = watcher
        self.reloader = reloader
        self.validator = validator
        self.metrics = metrics
        self.keys = keys
        self.record = record
        self.record_failure = record_failure
        self.loaded: Snapshot | None = None
        """What the app runs (each file's SHA-256: in memory only, never shown)."""
        self.loaded_at: float | None = None
        """When the app last reloaded (None: not since the agent started)."""
        self._wall = wall
        self._monotonic = monotonic
        self._problems: dict[str, str] = {}
        self._said_plain: set[str] = set()  # directories already named as not kubelet volumes
        self.last_step = monotonic()

    def shown(self, loaded: Snapshot | None) -> str:
        """``loaded`` as the log shows it: each directory's keyed hash, shortened."""
        if loaded is None:
            return "(unknown)"
        hashes = dir_hashes(loaded, self.keys.key)
        return ", ".join(f"{d} {'missing' if h is None else h[:12]}" for d, h in hashes.items())

    def claim(self, loaded: Snapshot) -> str:
        """What records ``loaded`` on the pod (``kube-nudge.io/loaded-hash``)."""
        return claim(loaded, self.keys.key, self.keys.id)

    def start(self) -> None:
        """Take the files present now as what the app loaded when it started."""
        try:
            self.loaded = self.watcher.baseline()
        except OSError as exc:
            self.metrics.watch_failed()
            log.error("cannot read the watched files: %s; reloading at the next change", exc)
        else:
            self.metrics.loaded(dir_hashes(self.loaded, self.keys.key), self.keys.id)
        self._report_problems()
        log.info(
            "kube-nudge agent %s watching %s; the app runs %s",
            __version__,
            ", ".join(self.watcher.dirs),
            self.shown(self.loaded),
        )

    def _report_problems(self) -> None:
        """Log each directory once when it goes missing and once when it is back."""
        now = self.watcher.problems
        for directory in self.watcher.dirs:
            before, after = self._problems.get(directory), now.get(directory)
            if before == after:
                continue
            self.metrics.set_missing(directory, after is not None)
            if after is not None:
                log.warning(
                    "watched directory %s is %s; waiting for it (a change when it appears "
                    "reloads the app)",
                    directory,
                    after,
                    extra={"dir": directory},
                )
            else:
                log.info("watched directory %s is back", directory, extra={"dir": directory})
        self._problems = now
        for directory in set(self.watcher.plain) - self._said_plain:
            log.warning(
                "watched directory %s is not a kubelet volume (no ..data link): a plain "
                "directory or a subPath mount, which the kubelet never refreshes; watching its "
                "files anyway (mount the whole volume to get its changes)",
                directory,
                extra={"dir": directory},
            )
        self._said_plain |= set(self.watcher.plain)

    def step(self) -> None:
        """One look: reload if a settled change differs from what the app runs."""
        self.last_step = self._monotonic()
        if self.keys.refresh():
            self._key_changed()
        try:
            found = self.watcher.poll()
        except OSError as exc:
            self.metrics.watch_failed()
            log.error("cannot read the watched files: %s; waiting for the next change", exc)
            found = None
        self._report_problems()
        if found is None:
            return
        if found == self.loaded:
            log.info("files changed, but to what the app runs (%s): no reload", self.shown(found))
            return
        self.reload(found)

    def _key_changed(self) -> None:
        """The key file changed: show what the app runs under the new key, and record it
        again if a reload was recorded (its time stays: the app loaded nothing new)."""
        log.info(
            "the agent key is now %s (%s)",
            self.keys.id,
            self.keys.path,
            extra={"key": self.keys.id},
        )
        if self.loaded is None:
            return
        self.metrics.loaded(dir_hashes(self.loaded, self.keys.key), self.keys.id)
        if self.record is not None and self.loaded_at is not None:
            self.record(self.claim(self.loaded), self.loaded_at)

    def reload(self, found: Snapshot) -> bool:
        """Validate, then reload; whether the app now runs ``found``."""
        log.info("config changed (%s -> %s): reloading", self.shown(self.loaded), self.shown(found))
        try:
            if self.validator is not None:
                self.validator.check()
            done = self.reloader.reload()
        except ReloadFailed as exc:
            self.metrics.failed(exc.stage)
            log.error(
                "no reload to %s (%s failed): %s; the app keeps %s until the files change again",
                self.shown(found),
                exc.stage,
                exc,
                self.shown(self.loaded),
                extra={"stage": exc.stage},
            )
            if self.record_failure is not None:
                self.record_failure(self._wall())
            return False
        at = self._wall()
        self.loaded, self.loaded_at = found, at
        self.metrics.reloaded(dir_hashes(found, self.keys.key), self.keys.id, at)
        log.info("reloaded: %s; the app runs %s", done, self.shown(found))
        if self.record is not None:
            self.record(self.claim(found), at)
        return True

    def run(self, stop: threading.Event, interval: float, wakeup: Wakeup | None = None) -> None:
        """Look at the files whenever ``wakeup`` says so and at least every ``interval``
        seconds, until ``stop`` is set (and ``wakeup`` woken); never raises."""
        wakeup = wakeup or _StopWakeup(stop)
        while not stop.is_set():
            try:
                self.step()
            except Exception:
                log.exception("unexpected error in the watch loop; carrying on")
            if not stop.is_set():
                wakeup.wait(self.watcher.next_poll_in(interval))

    def health(self, grace: float) -> Callable[[], str | None]:
        """For /healthz: None while the loop has run within ``grace`` seconds."""

        def check() -> str | None:
            late = self._monotonic() - self.last_step
            return None if late <= grace else f"the watch loop has not run for {late:.0f}s"

        return check


class _StopWakeup(Wakeup):
    """Polling that ends as soon as ``stop`` is set."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self._woken = stop

    def wait(self, timeout: float) -> bool:
        return self._woken.wait(timeout)


def build_reloader(config: AgentConfig, sleep: Sleep) -> Reloader:
    """The reload action the flags ask for."""
    if isinstance(config.action, HttpSpec):
        return HttpAction(config.action, config.retry_backoff, sleep)
    return SignalAction(config.action, config.retry_backoff, sleep)


def _grace(config: AgentConfig) -> float:
    """The longest a healthy loop may go between polls: a reload with every retry."""
    action = config.action
    delays = sum(backoff_delays(config.retry_backoff, action.retries))
    calls = (action.retries + 1) * action.timeout if isinstance(action, HttpSpec) else 0.0
    check = config.validate.timeout + 5 if config.validate else 0.0
    return 3 * config.poll_interval + 30 + delays + calls + check


def _describe(config: AgentConfig) -> str:
    action = config.action
    if isinstance(action, HttpSpec):
        return f"{action.method} {shown_url(action.url)}"
    return f"{signal.Signals(action.signum).name} to {action.process}"


def run(config: AgentConfig) -> int:
    """Run the agent until SIGTERM or SIGINT; 2 if --listen cannot be bound, else 0."""
    setup_logging(config.log_format)
    stop = threading.Event()
    metrics = AgentMetrics(config.dirs)
    worker = _record_worker(config, metrics, stop)
    keys = HashKey(config.hash_key, config.hash_key_file, from_file=config.hash_key_from_file)
    agent = Agent(
        Watcher(config.dirs, config.debounce),
        build_reloader(config, stop.wait),
        metrics,
        keys,
        validator=None if config.validate is None else Validator(config.validate),
        record=None if worker is None else worker.submit,
        record_failure=None if worker is None else worker.submit_failure,
    )
    server = None
    if config.listen is not None:
        try:
            server = start_server(config.listen, metrics, agent.health(_grace(config)))
        except OSError as exc:
            host, port = config.listen
            print(
                f"kube-nudge: --listen {host}:{port}: {exc.strerror or exc}; choose another "
                "address, e.g. --listen :9091",
                file=sys.stderr,
            )
            return 2
    wakeup = open_wakeup(config.dirs, config.watch_mode)

    def stopping(*_: object) -> None:
        stop.set()
        wakeup.wake()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopping)
    _log_start(config, keys, wakeup.method, server.server_address[1] if server else None)
    agent.start()
    agent.run(stop, config.poll_interval, wakeup)
    wakeup.close()
    if server is not None:
        server.shutdown()
    if worker is not None:
        worker.stop()
    log.info("stopped")
    return 0


def _record_worker(
    config: AgentConfig, metrics: AgentMetrics, stop: threading.Event
) -> RecordWorker | None:
    """The started worker recording loads on the pod, or None (said once) when the agent
    does not know its pod or the API server."""
    pod = pod_from_env()
    if pod is None or config.api.server is None:
        missing = "POD_NAME/POD_NAMESPACE" if pod is None else "an API server (--api-server)"
        log.warning("not recording the loaded hash on the pod: no %s", missing)
        return None
    worker = RecordWorker(PodRecorder(config.api, config.api.server, pod, stop.wait), metrics)
    worker.start()
    return worker


def _log_start(config: AgentConfig, keys: HashKey, method: str, port: object | None) -> None:
    """What the agent does, and with which key, in the log once at start."""
    log.info(
        "reload by %s%s; changes seen by %s, polls every %gs, debounce %gs%s",
        _describe(config),
        f" after {' '.join(config.validate.argv)}" if config.validate else "",
        method,
        config.poll_interval,
        config.debounce,
        f", metrics on {port}" if port is not None else "",
    )
    if keys.from_file:
        log.info("the loaded hash is keyed with key %s from %s", keys.id, keys.path)
    else:
        log.info(
            "the loaded hash is keyed with a random key of this process (no %s): it tells "
            "whether the files changed, but kube-nudge cannot confirm this pod's reloads by "
            "it; mount Secret kube-nudge-agent-key there",
            keys.path,
        )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m kube_nudge.agent`` (the same flags as ``kube-nudge agent``)."""
    parser = argparse.ArgumentParser(prog="kube-nudge agent")
    add_flags(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Validate the flags (one line and exit code 2 when wrong), then run."""
    args = build_parser().parse_args(argv)
    try:
        config = build_config(args)
    except ValueError as exc:
        print(f"kube-nudge: {exc}", file=sys.stderr)
        return 2
    return run(config)
