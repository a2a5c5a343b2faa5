"""The agent's metrics, kept by hand and written in the Prometheus text format (0.0.4)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

STAGES = ("validate", "signal", "http")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


class AgentMetrics:
    """Counters and gauges, safe to update from one thread while another renders them."""

    def __init__(self, dirs: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self.reloads = 0
        self.failures = dict.fromkeys(STAGES, 0)
        self.record_failures = 0
        self.watch_errors = 0
        self.last_success: float | None = None
        self.loaded_hashes: dict[str, str | None] = {}
        self.key_id: str | None = None
        self.missing = dict.fromkeys(dirs, False)

    def loaded(self, hashes: Mapping[str, str | None], key_id: str) -> None:
        """The app runs the files with these keyed hashes per directory (at start: assumed;
        or the same files under a new key)."""
        with self._lock:
            self.loaded_hashes, self.key_id = dict(hashes), key_id

    def reloaded(self, hashes: Mapping[str, str | None], key_id: str, at: float) -> None:
        """A reload succeeded at ``at`` (Unix seconds)."""
        with self._lock:
            self.reloads += 1
            self.last_success = at
            self.loaded_hashes, self.key_id = dict(hashes), key_id

    def failed(self, stage: str) -> None:
        """A reload failed in ``stage``."""
        with self._lock:
            self.failures[stage] = self.failures.get(stage, 0) + 1

    def record_failed(self) -> None:
        """Writing the loaded hash on the Pod failed."""
        with self._lock:
            self.record_failures += 1

    def watch_failed(self) -> None:
        """The watched files could not be read."""
        with self._lock:
            self.watch_errors += 1

    def set_missing(self, directory: str, missing: bool) -> None:
        """Whether ``directory`` is missing (or unreadable)."""
        with self._lock:
            self.missing[directory] = missing

    def render(self) -> str:
        """Every metric in the Prometheus text format."""
        out: list[str] = []

        def family(name: str, kind: str, help: str, samples: list[tuple[str, float]]) -> None:
            out.append(f"# HELP {name} {help}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(f"{name}{labels} {_value(value)}" for labels, value in samples)

        with self._lock:
            family(
                "kube_nudge_agent_reloads_total",
                "counter",
                "Reloads that succeeded.",
                [("", self.reloads)],
            )
            family(
                "kube_nudge_agent_reload_failures_total",
                "counter",
                "Reloads that failed, by the stage that failed.",
                [(f'{{stage="{_label(s)}"}}', n) for s, n in self.failures.items()],
            )
            family(
                "kube_nudge_agent_last_success_timestamp_seconds",
                "gauge",
                "When the last reload succeeded (Unix seconds); absent before the first.",
                [] if self.last_success is None else [("", self.last_success)],
            )
            family(
                "kube_nudge_agent_loaded_info",
                "gauge",
                "The keyed hash of the files the app runs, per watched directory, and the "
                "key's id.",
                [
                    (f'{{dir="{_label(d)}",hash="{h}",key="{self.key_id}"}}', 1)
                    for d, h in sorted(self.loaded_hashes.items())
                    if h is not None
                ],
            )
            family(
                "kube_nudge_agent_pod_record_failures_total",
                "counter",
                "Failed writes of the loaded hash on the Pod.",
                [("", self.record_failures)],
            )
            family(
                "kube_nudge_agent_watch_errors_total",
                "counter",
                "Changes whose files could not be read.",
                [("", self.watch_errors)],
            )
            family(
                "kube_nudge_agent_watch_dir_missing",
                "gauge",
                "1 while a watched directory is missing or unreadable.",
                [(f'{{dir="{_label(d)}"}}', int(m)) for d, m in self.missing.items()],
            )
        return "\n".join(out) + "\n"
