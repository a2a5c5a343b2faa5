"""The release gates of a decided rollout, with what they need to know of the fleet: the
other workloads consuming a changed source (a failed one stops the line, a lower order goes
first) and how many rollouts are in progress (``--max-concurrent-rollouts``). The rules are
the model's (``model/gates.py``, pure); this gathers their input from the caches and the
book."""

from __future__ import annotations

from kube_nudge.controller.book import RolloutBook
from kube_nudge.controller.reader import Reader, WorkloadKey
from kube_nudge.kube.workloads import Target
from kube_nudge.model import Apply, Assessment, Decision, WorkloadMemory, WorkloadView, assess
from kube_nudge.model.gates import Sibling, display_workload, gate
from kube_nudge.runtime.clock import Clock

__all__ = ["SiblingGates"]


class SiblingGates:
    """Holds a decided rollout while a gate keeps it from starting."""

    def __init__(
        self,
        reader: Reader,
        book: RolloutBook,
        *,
        hmac_key: bytes,
        clock: Clock,
        max_concurrent: int | None = None,
    ) -> None:
        self._reader = reader
        self._book = book
        self._hmac_key = hmac_key
        self._clock = clock
        self._max_concurrent = max_concurrent

    def gate(
        self, key: WorkloadKey, target: Target, assessment: Assessment, plan: Apply
    ) -> Decision:
        """``plan``, or the hold that keeps it from starting now."""
        view = target.view
        siblings = self._siblings(key, view, assessment, plan)
        rolling = 0
        if self._max_concurrent is not None:
            rolling = self._book.rolling_count(exclude=key)
        name = display_workload(target.kind.resource.kind, target.namespace, target.name)
        hold = gate(
            view, now=self._clock.now(), changed_at=assessment.changed_at, siblings=siblings,
            rolling_elsewhere=rolling, window=view.settings.window,
            max_concurrent=self._max_concurrent, workload_name=name,
        )  # fmt: skip
        return plan if hold is None else hold

    def _siblings(
        self, key: WorkloadKey, own: WorkloadView, assessment: Assessment, plan: Apply
    ) -> list[Sibling]:
        """The other workloads consuming a source that changed for ``plan`` that a gate
        may wait for: those whose rollout failed, and, for an ordered workload, those of a
        lower order (``own``: the view the pass decided on). Unordered workloads with no
        failure about cost nothing here."""
        reader, book = self._reader, self._book
        mine = own.settings.rollout_order
        if mine is None and not reader.any_failed():
            return []
        changed = plan.changes.keys() if plan.changes else assessment.visible.keys()
        others = {other: view for ref in changed for other, view in reader.consumers(ref)
                  if other != key}  # fmt: skip
        found = []
        for other in sorted(others, key=lambda k: (str(k[0]), k[1], k[2])):
            view = others[other]
            lower = (
                mine is not None
                and view.settings.rollout_order is not None
                and view.settings.rollout_order < mine
            )
            if not lower and not reader.failed(other):
                continue
            memory = book.memory(other) or WorkloadMemory()
            desired = assess(view, reader.source, self._hmac_key).desired
            found.append(Sibling(
                name=f"{other[0].resource.kind} {other[1]}/{other[2]}",
                order=view.settings.rollout_order,
                tracking=book.tracking(other, view),
                pending=desired != (memory.applied or view.applied_hash),
                released_at=view.released_at,
            ))  # fmt: skip
        return found
