"""Record what the app loaded on the agent's own Pod, so the controller can see it.

One JSON merge patch of annotations (after a reload ``kube-nudge.io/loaded-hash`` and
``kube-nudge.io/loaded-at``, after a failed one ``kube-nudge.io/reload-failed-at``, Unix
seconds: the wire protocol of ``kube_nudge.agentwire``, which strategy ``hot`` reads) to
``/api/v1/namespaces/NS/pods/NAME`` with field manager ``kube-nudge-agent``, authenticated
by the service account token (read again for every request: projected tokens rotate) over
TLS verified with the service account CA. The pod's name and namespace come from the
downward API (``POD_NAME``, ``POD_NAMESPACE``). Failures are logged and counted by the
caller, never raised past ``RecordWorker``.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from kube_nudge.agent.config import ApiSpec, shown_url
from kube_nudge.agent.metrics import AgentMetrics
from kube_nudge.agent.reload import USER_AGENT, Sleep, backoff_delays
from kube_nudge.agentwire import LOADED_AT, LOADED_HASH, RELOAD_FAILED_AT, format_time

FIELD_MANAGER = "kube-nudge-agent"
MERGE_PATCH = "application/merge-patch+json"
NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

log = logging.getLogger("kube_nudge.agent")


@dataclass(frozen=True)
class PodRef:
    """The agent's own Pod."""

    namespace: str
    name: str


def pod_from_env(
    env: Mapping[str, str] = os.environ, namespace_file: str = NAMESPACE_FILE
) -> PodRef | None:
    """``POD_NAME`` and ``POD_NAMESPACE`` (else the service account's namespace), or None."""
    name = env.get("POD_NAME", "")
    namespace = env.get("POD_NAMESPACE", "")
    if not namespace:
        try:
            with open(namespace_file) as f:
                namespace = f.read().strip()
        except OSError:
            namespace = ""
    return PodRef(namespace, name) if name and namespace else None


class RecordFailed(Exception):
    """The patch was not applied; the message says why and what to do."""


def loaded_annotations(content_hash: str, at: float) -> dict[str, str]:
    """What records ``content_hash`` as loaded at ``at``."""
    return {LOADED_HASH: content_hash, LOADED_AT: format_time(at)}


def failed_annotations(at: float) -> dict[str, str]:
    """What records a reload that failed at ``at`` (the app keeps what it loaded)."""
    return {RELOAD_FAILED_AT: format_time(at)}


def patch_body(annotations: Mapping[str, str]) -> bytes:
    """The merge patch that sets ``annotations`` on the pod."""
    return json.dumps({"metadata": {"annotations": dict(annotations)}}).encode()


def pod_url(server: str, pod: PodRef) -> str:
    """The Pod's URL on the API server, with the agent's field manager."""
    quote = urllib.parse.quote
    return (
        f"{server.rstrip('/')}/api/v1/namespaces/{quote(pod.namespace, safe='')}"
        f"/pods/{quote(pod.name, safe='')}?fieldManager={FIELD_MANAGER}"
    )


class PodRecorder:
    """Patches the Pod: bounded retries for what may pass (5xx, 429, no answer)."""

    def __init__(
        self,
        api: ApiSpec,
        server: str,
        pod: PodRef,
        sleep: Sleep,
        *,
        timeout: float = 10.0,
        retries: int = 2,
        backoff: float = 1.0,
    ) -> None:
        self.api = api
        self.server = server
        self.pod = pod
        self._sleep = sleep
        self._timeout = timeout
        self._delays = backoff_delays(backoff, retries)

    def _context(self) -> ssl.SSLContext | None:
        if not self.server.startswith("https:"):
            return None
        try:
            return ssl.create_default_context(cafile=self.api.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise RecordFailed(f"cannot use CA file {self.api.ca_file}: {exc}") from None

    def _token(self) -> str:
        try:
            with open(self.api.token_file) as f:
                return f.read().strip()
        except OSError as exc:
            raise RecordFailed(
                f"cannot read token file {self.api.token_file} ({exc.strerror}): mount the "
                "service account token (automountServiceAccountToken) or give --token-file"
            ) from None

    def request(self, annotations: Mapping[str, str]) -> urllib.request.Request:
        """The PATCH request that sets ``annotations`` (token read now)."""
        return urllib.request.Request(  # noqa: S310 # check_url allows only http(s)
            pod_url(self.server, self.pod),
            data=patch_body(annotations),
            method="PATCH",
            headers={
                "Authorization": f"Bearer {self._token()}",
                "Content-Type": MERGE_PATCH,
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
            },
        )

    def _refusal(self, exc: urllib.error.HTTPError) -> str:
        try:
            message = json.loads(exc.read(4096)).get("message", "")
        except (OSError, ValueError, AttributeError):
            message = ""
        pod = f"pod {self.pod.namespace}/{self.pod.name}"
        hint = {
            401: "the API server refused the token",
            403: f"the pod's service account needs 'patch' on 'pods' in {self.pod.namespace}",
            404: f"{pod} not found: set POD_NAME and POD_NAMESPACE from the downward API",
        }.get(exc.code, "")
        return "; ".join(part for part in (f"{exc.code}", message, hint) if part)

    def record(self, annotations: Mapping[str, str]) -> None:
        """Patch the annotations; RecordFailed when refused or the retries run out."""
        where = f"PATCH {shown_url(self.server)} pod {self.pod.namespace}/{self.pod.name}"
        for delay in [*self._delays, None]:
            try:
                request = self.request(annotations)
                with urllib.request.urlopen(  # noqa: S310  # nosec B310 # http(s) only, checked
                    request, timeout=self._timeout, context=self._context()
                ) as response:
                    response.read(1 << 16)
                    return
            except urllib.error.HTTPError as exc:
                with exc:
                    why = self._refusal(exc)
                if exc.code < 500 and exc.code != 429:
                    raise RecordFailed(f"{where}: {why}") from None
            except urllib.error.URLError as exc:
                why = str(exc.reason)
            except (OSError, ValueError) as exc:
                why = str(exc) or type(exc).__name__
            if delay is None or self._sleep(delay):
                raise RecordFailed(f"{where}: {why} (giving up)")
        raise AssertionError("unreachable")


class RecordWorker:
    """Records in a thread of its own, latest first, so a slow API never delays a reload."""

    def __init__(self, recorder: PodRecorder, metrics: AgentMetrics) -> None:
        self.recorder = recorder
        self._metrics = metrics
        self._cond = threading.Condition()
        self._latest: dict[str, str] | None = None
        self._busy = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="agent-record", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def submit(self, content_hash: str, at: float) -> None:
        """Record ``content_hash`` as loaded soon; replaces a load not yet recorded."""
        self._submit(loaded_annotations(content_hash, at))

    def submit_failure(self, at: float) -> None:
        """Record a failed reload soon."""
        self._submit(failed_annotations(at))

    def _submit(self, annotations: Mapping[str, str]) -> None:
        with self._cond:
            self._latest = {**(self._latest or {}), **annotations}
            self._cond.notify_all()

    def stop(self) -> None:
        """Let the thread end after the current write."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is left to record; whether that happened within ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._latest is None and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._latest is not None or self._stopped)
                if self._stopped or self._latest is None:
                    return
                annotations, self._latest = self._latest, None
                self._busy = True
            try:
                self.recorder.record(annotations)
            except RecordFailed as exc:
                self._metrics.record_failed()
                log.warning("could not record the loaded hash on the pod: %s", exc)
            except Exception:
                self._metrics.record_failed()
                log.exception("could not record the loaded hash on the pod")
            else:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(annotations.items()))
                log.info("recorded %s on the pod", shown)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
