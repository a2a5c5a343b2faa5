"""Workload kinds named by ``--workload`` that the API server did not serve at start (a
CRD not installed yet): asked for again with backoff, and watched from the moment they
are served. Every other kind works meanwhile, and readiness never waits for them.

API discovery is polled rather than CustomResourceDefinitions watched: a watch would
need cluster-wide read access to CRDs, one more grant for a least-privilege audit, for a
question asked a handful of times.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from kube_nudge.kube.client import ApiError
from kube_nudge.kube.workloads import WorkloadKind, WorkloadSpec
from kube_nudge.runtime.metrics import Metrics

__all__ = ["FIRST_RETRY", "MAX_RETRY", "PendingKinds", "spec_label"]

log = logging.getLogger(__name__)

FIRST_RETRY = 1.0
MAX_RETRY = 60.0

Resolver = Callable[[WorkloadSpec], Awaitable[WorkloadKind]]
"""Raises ValueError (naming the flag) while the API server doesn't serve the kind."""


def spec_label(spec: WorkloadSpec) -> str:
    """The ``resource`` metric label of a kind not resolved yet (as ``str(Resource)``)."""
    return f"{spec.plural}.{spec.group}" if spec.group else spec.plural


class PendingKinds:
    """Runnable (every replica, like the caches it feeds): resolves each pending spec
    until the API serves it, then hands the kind to ``watch``."""

    name = "pending-kinds"
    needs_leader = False

    def __init__(
        self,
        specs: Sequence[WorkloadSpec],
        *,
        resolve: Resolver,
        watch: Callable[[WorkloadKind], None],
        metrics: Metrics,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        first_retry: float = FIRST_RETRY,
        max_retry: float = MAX_RETRY,
    ) -> None:
        self._pending = list(specs)
        self._resolve = resolve
        self._watch = watch
        self._metrics = metrics
        self._sleep = sleep
        self._first_retry = first_retry
        self._max_retry = max_retry
        for spec in self._pending:
            metrics.kind_available.labels(resource=spec_label(spec)).set(0)

    @property
    def pending(self) -> tuple[WorkloadSpec, ...]:
        """The specs still waiting for the API server."""
        return tuple(self._pending)

    async def run(self) -> None:
        """Retry until every kind is watched, then idle until cancelled (a runnable that
        returns would stop the manager)."""
        delay = self._first_retry
        while self._pending:
            await self._sleep(delay)
            self._pending = [spec for spec in self._pending if not await self._try(spec)]
            delay = min(delay * 2, self._max_retry)
        await asyncio.Event().wait()

    async def _try(self, spec: WorkloadSpec) -> bool:
        try:
            kind = await self._resolve(spec)
        except ValueError as exc:
            log.debug("still not watching: %s", exc)
            return False
        except ApiError as exc:
            log.warning("--workload %r: API discovery failed (%s); retrying", spec.text, exc)
            return False
        self._watch(kind)
        self._metrics.kind_available.labels(resource=spec_label(spec)).set(1)
        log.info("now watching %s (%s): the API server serves it", kind.resource.kind, spec.text)
        return True
