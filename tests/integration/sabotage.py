"""The fault suite's rows broken on purpose, one switch each: ``FAULT_SABOTAGE=NAME``.

Each sabotage undoes, in the running code, the one thing its fault scenario exists to prove,
so that scenario must fail; ``make test-sabotage`` runs each against its scenarios and
records how they failed (bench/results/sabotage.jsonl, docs/reliability.md). The product
has no hook for this: the switch patches the code from here, in the test process (the
session fixture ``sabotaged``) and in each ``kube-nudge run`` it starts (``python -m
tests.integration.sabotage``, which patches, then runs the command line as ``python -m
kube_nudge`` does).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import pytest

from kube_nudge.controller.workers import Workers
from kube_nudge.controller.writer import WorkloadWriter
from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.informer import Informer
from kube_nudge.kube.transport import Transport
from kube_nudge.kube.workloads import Target
from kube_nudge.runtime.manager import Manager
from kube_nudge.strategies.base import StrategyContext

ENV = "FAULT_SABOTAGE"


@dataclass(frozen=True, slots=True)
class Sabotage:
    """What is broken, the scenarios (pytest ``-k`` expression) that must then fail, and how:
    each one's failure message must contain ``catches``, the check of the row's own guarantee
    (a scenario failing on some other check proves a different thing). ``targets`` are the
    attributes ``apply`` replaces, (owner, name), so a test can see it patch and undo them."""

    broken: str
    scenarios: str
    catches: str
    apply: Callable[[pytest.MonkeyPatch], None]
    targets: tuple[tuple[object, str], ...]


#: The restart reason an informer last reported, kept on it by ``no-relist-on-410``.
_LAST_RESTART = "_sabotage_last_restart"
#: How long ``no-relist-on-410`` waits before resuming an expired watch: paced as a failed
#: watch's retry is, never a hot loop against the API server.
RESUME_PAUSE = 1.0


def _no_relist_on_410(patch: pytest.MonkeyPatch) -> None:
    # Only the re-list is broken: a 410 is still seen, logged and counted as an expired
    # watch (the scenarios also check that count), but the informer then resumes from the
    # expired version instead of re-listing, so what changed in the gap never reaches it.
    init, fill = Informer.__init__, Informer._fill

    def noting_restarts(self: Informer[Any], *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        report = self.on_restart

        def noted(reason: str) -> None:
            setattr(self, _LAST_RESTART, reason)
            report(reason)

        self.on_restart = noted

    async def resume_instead(self: Informer[Any]) -> None:
        if getattr(self, _LAST_RESTART, None) != "expired":
            await fill(self)  # the first fill, or a re-list for any other reason
            return
        await asyncio.sleep(RESUME_PAUSE)
        await self._watch()

    patch.setattr(Informer, "__init__", noting_restarts)
    patch.setattr(Informer, "_fill", resume_instead)


def _no_watch_timeout(patch: pytest.MonkeyPatch) -> None:
    watch = KubeClient.watch

    def without_timeout(self: KubeClient, *args: Any, **kwargs: Any) -> Any:
        return watch(self, *args, **{**kwargs, "inactivity_timeout": 86400.0})

    patch.setattr(KubeClient, "watch", without_timeout)


def _no_resync_at_start(patch: pytest.MonkeyPatch) -> None:
    # The resync when workers start queues only workloads never adopted: a restarted
    # replica trusts that every adopted one is current, so changes made while it was down
    # wait for the next change of the same source, if any.
    run = Workers.run

    async def only_new_workloads(self: Workers) -> None:
        reader = self._reader
        self._reader = _OnlyNew(reader)  # type: ignore[assignment]
        try:
            await run(self)
        finally:
            self._reader = reader

    patch.setattr(Workers, "run", only_new_workloads)


class _OnlyNew:
    def __init__(self, reader: Any) -> None:
        self._reader = reader

    def workload_keys(self) -> list[Any]:
        views = {key: self._reader.workload(key) for key in self._reader.workload_keys()}
        return [
            key
            for key, view in views.items()
            if view is not None and view.baseline_hash is None and view.template_hash is None
        ]


def _workers_without_lease(patch: pytest.MonkeyPatch) -> None:
    init = Manager.__init__

    def everything_always(self: Manager, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._always += self._leading
        self._leading = []

    patch.setattr(Manager, "__init__", everything_always)


#: The instance attribute through which a 429's Retry-After holds every request of a client.
HOLD = "_hold_until"


class _NoTransport:
    """Enough of a ``Transport`` to build a ``KubeClient`` that never sends anything."""

    def sibling(self, connections: int) -> _NoTransport:
        return self


def _retry_after_per_request(patch: pytest.MonkeyPatch) -> None:
    # A 429's Retry-After delays the retried request only; the client holds nothing else.
    # The hold is an instance attribute, which only a class property (its setter dropping
    # every write) can shadow, and MonkeyPatch can only check the class for it: so a client
    # is built first, and a rename of the attribute in the product fails here, loudly.
    if HOLD not in vars(KubeClient(cast(Transport, _NoTransport()))):
        raise AttributeError(
            f"KubeClient instances have no {HOLD!r} any more: follow the rename of the "
            "Retry-After hold in tests/integration/sabotage.py"
        )
    no_hold = property(lambda self: 0.0, lambda self, value: None)
    patch.setattr(KubeClient, HOLD, no_hold, raising=False)  # checked just above


def _stale_read_modify_write(patch: pytest.MonkeyPatch) -> None:
    async def read_modify_put(
        self: WorkloadWriter, target: Target, body: Any, patch_type: Any = None
    ) -> None:
        context: StrategyContext = self._context
        path = target.kind.resource.path(target.namespace, target.name)
        workload = await context.client.get(path)
        await asyncio.sleep(0.2)  # the copy is a moment old, as a cache's would be
        workload["metadata"].pop("resourceVersion", None)  # no conflict check
        _merge(workload, body)
        await context.client.request("PUT", path, body=workload)
        context.metrics.writes.labels(kind=target.kind.resource.kind).inc()

    patch.setattr(WorkloadWriter, "_send", read_modify_put)


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch semantics, enough for kube-nudge's patches."""
    for key, value in patch.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


#: The fault suite's own check that a change reached every workload (faults.Convergence).
CHANGES_LOST = "not converged (changes lost)"

SABOTAGES: dict[str, Sabotage] = {
    "no-relist-on-410": Sabotage(
        "no re-list on 410",
        "apiserver_restart or expired or compaction",
        CHANGES_LOST,
        _no_relist_on_410,
        ((Informer, "__init__"), (Informer, "_fill")),
    ),
    "no-watch-timeout": Sabotage(
        "no read timeout on watches",
        "silent",
        CHANGES_LOST,
        _no_watch_timeout,
        ((KubeClient, "watch"),),
    ),
    "no-resync-at-start": Sabotage(
        "the resync when workers start skips adopted workloads",
        "sigkill_during",
        CHANGES_LOST,
        _no_resync_at_start,
        ((Workers, "run"),),
    ),
    "workers-without-lease": Sabotage(
        "workers started regardless of the lease",
        "leader_dies",
        "writers interleaved",
        _workers_without_lease,
        ((Manager, "__init__"),),
    ),
    "retry-after-per-request": Sabotage(
        "Retry-After holds only the retried request",
        "throttled",
        "Retry-After not honoured",
        _retry_after_per_request,
        ((KubeClient, HOLD),),
    ),
    "stale-read-modify-write": Sabotage(
        "writes as read-modify-write of a stale copy (GET, then PUT)",
        "concurrent_writer",
        "the other writer's edit was lost",
        _stale_read_modify_write,
        ((WorkloadWriter, "_send"),),
    ),
}


def chosen() -> Sabotage | None:
    """The sabotage ``$FAULT_SABOTAGE`` names, if any; an unknown name is a usage error."""
    name = os.environ.get(ENV, "")
    if not name:
        return None
    if name not in SABOTAGES:
        raise pytest.UsageError(f"{ENV}={name!r}: use one of {', '.join(SABOTAGES)}")
    return SABOTAGES[name]


@contextmanager
def sabotaged() -> Iterator[Sabotage | None]:
    """Apply the chosen sabotage, if any, for the duration of the block."""
    sabotage = chosen()
    with pytest.MonkeyPatch.context() as patch:
        if sabotage is not None:
            sabotage.apply(patch)
        yield sabotage


def replica_command() -> list[str]:
    """How to start ``kube-nudge``: sabotaged like this process when a sabotage is chosen."""
    module = "tests.integration.sabotage" if chosen() else "kube_nudge"
    return [sys.executable, "-m", module]


if __name__ == "__main__":
    from kube_nudge.launch import main

    with sabotaged():
        raise SystemExit(main())
