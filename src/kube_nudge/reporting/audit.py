"""The periodic drift audit (``--audit-interval``): what ``kube-nudge status -A --all``
reports, as metrics, so an alert can fire on pods that run stale config, opted in or not.

Off by default: each pass lists every workload and, per workload, its pods (the controller
otherwise keeps no pod cache, which keeps its memory flat). Runs on the leader only, so two
replicas don't double that load; the gauges keep the last pass's values on a standby.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.kube.workloads import WorkloadKind
from kube_nudge.reporting.status import collect
from kube_nudge.runtime.metrics import Metrics

__all__ = ["Audit"]

log = logging.getLogger(__name__)

#: Every state a row of the report can have, so a state that empties drops to 0.
_STATES = (
    "current",
    "rolling",
    "drift",
    "held",
    "stale",
    "rolled-back",
    "not-adopted",
    "notify-only",
)


class Audit:
    """Runnable (leader only): one drift audit every ``interval`` seconds."""

    name = "audit"
    needs_leader = True

    def __init__(
        self,
        client: KubeClient,
        metrics: Metrics,
        *,
        interval: float,
        namespaces: tuple[str, ...],
        kinds: tuple[WorkloadKind, ...],
        hmac_key: bytes,
        compat: bool,
        csi_secrets: bool = False,
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._interval = interval
        self._namespaces: tuple[str | None, ...] = namespaces or (None,)
        self._kinds = kinds
        self._key = hmac_key
        self._compat = compat
        self._csi_secrets = csi_secrets

    async def run(self) -> None:
        """Audit, wait, repeat until cancelled; a failed pass is logged and counted."""
        while True:
            try:
                await self.run_once()
            except ApiError as exc:
                self._metrics.errors.labels(stage="audit").inc()
                log.warning("drift audit failed: %s", exc)
            await asyncio.sleep(self._interval)

    async def run_once(self) -> None:
        """One pass: workloads by state and stale pods, opted in or not."""
        rows = await collect(
            self._client,
            namespaces=self._namespaces,
            hmac_key=self._key,
            include_opted_out=True,
            kinds=self._kinds,
            compat=self._compat,
            csi_secrets=self._csi_secrets,
        )
        states = Counter((row.state, "true" if row.opted_in else "false") for row in rows)
        for state in _STATES:
            for opted_in in ("true", "false"):
                self._metrics.audit_workloads.labels(state=state, opted_in=opted_in).set(
                    states[(state, opted_in)]
                )
        self._metrics.audit_stale_pods.set(sum(row.stale_pods for row in rows))
        self._metrics.audit_timestamp.set(time.time())
        drifting = [f"{r.namespace}/{r.kind}/{r.name}" for r in rows if r.drift]
        if drifting:
            log.info(
                "drift audit: %d workload(s) drift: %s",
                len(drifting),
                ", ".join(drifting[:10]) + (" ..." if len(drifting) > 10 else ""),
            )
