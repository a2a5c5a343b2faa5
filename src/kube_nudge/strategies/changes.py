"""What one pass intends to write to one workload, as data (kopf's ``patch`` object).

Every part of a pass adds to the same ``WorkloadChanges``: the follower (a failure's
record, a rollback), the analysis gate (its measurements and verdict), the strategy
(adopting, rolling, delivering in place, keeping its own objects in order). None of them
sends anything to the workload: the reconciler's writer (``controller/writer.py``) sends
what they gathered as one PATCH at the end of the pass, with its preconditions, field
manager, expectations and metrics, and only then runs the effects that say it happened
(Events, log lines, metrics, notifications, a nudge of the pods). A later part of a pass
overrides an earlier one where both set the same field: it decided later.

A write of another object that the workload's write needs first (snapshot's copies, which
the template then names) is made by the strategy before it returns, or by the ``fresh``
builder just before the PATCH; one that needs the workload's write first is the next
pass's (``docs/design.md``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kube_nudge.kube.client import JSON, ApiError

log = logging.getLogger(__name__)

__all__ = ["Effect", "FreshBuild", "Operations", "WorkloadChanges", "merged"]

Effect = Callable[[], Awaitable[None] | None]
"""What to do once the write is made (or, with nothing to write, at the end of the pass)."""
FreshBuild = Callable[[JSON], Awaitable[dict[str, Any]]]
"""Builds a merge patch from the workload read in full, carrying its resourceVersion."""


@dataclass(frozen=True, slots=True)
class Operations:
    """JSON patch operations built from one read of the workload (their ``test`` ones
    check that read still stands), and that read's metadata annotations: the pass's
    annotations go in the same request as operations of their own. What to say once
    they are written (``done``), or when the API refuses them (``refused``: the pass's
    annotations are then written without them, and the pass is retried)."""

    operations: tuple[dict[str, Any], ...]
    annotations: Mapping[str, Any]
    done: Effect = lambda: None
    refused: Callable[[ApiError], None] = lambda _: None


@dataclass(slots=True)
class WorkloadChanges:
    """The changes one pass makes to one workload, sent as one PATCH by the writer."""

    merge: dict[str, Any] = field(default_factory=dict)
    """A JSON merge patch of the workload (the writer adds the uid precondition)."""
    fresh: FreshBuild | None = None
    """Set when the patch must be built from a full read (lists that a merge patch would
    replace whole): ``merge`` is merged under what it builds."""
    operations: Operations | None = None
    """Set when the change is JSON patch operations (a rollback's template): ``merge``
    may then carry only metadata annotations, which become operations too."""
    effects: list[Effect] = field(default_factory=list)
    failure: ApiError | None = None
    """An error met on the way that ends the pass (a rollback's read failed): what was
    gathered before it is written all the same, then the pass is retried with backoff."""

    def annotate(self, annotations: Mapping[str, str | None]) -> None:
        """Set (or, with None, remove) annotations on the workload's metadata."""
        self.add({"metadata": {"annotations": dict(annotations)}})

    def add(self, patch: Mapping[str, Any]) -> None:
        """Merge the merge patch ``patch`` into the pass's (its fields win)."""
        self.merge = merged(self.merge, patch)

    def build_fresh(self, build: FreshBuild) -> None:
        """Build the patch from a full read of the workload (``FreshBuild``)."""
        self.fresh = build

    def replace_by(self, operations: Operations) -> None:
        """Send ``operations`` (a rollback's), with the pass's annotations."""
        self.operations = operations

    def said_of_operations(self, done: Effect, refused: Callable[[ApiError], None]) -> None:
        """What to say once the operations are written (``done``; with none, once the pass
        is), or when the API refuses them (``refused``)."""
        if self.operations is None:
            self.then(done)
        else:
            self.operations = replace(self.operations, done=done, refused=refused)

    def then(self, effect: Effect) -> None:
        """Run ``effect`` once the write is made: what says it happened comes after it."""
        self.effects.append(effect)

    def copy(self) -> WorkloadChanges:
        """What has been gathered so far, unchanged by what is added from here."""
        return WorkloadChanges(merged({}, self.merge), self.fresh, self.operations,
                               list(self.effects), self.failure)  # fmt: skip

    def json_operations(self) -> list[dict[str, Any]]:
        """``operations`` followed by the pass's annotations as operations on the annotations
        that read found (a removal only of one it found: removing one absent fails)."""
        assert self.operations is not None  # nosec B101 # asked only when set
        extra = {k: v for k, v in self.merge.items() if k != "metadata"}
        extra.update({k: v for k, v in self.merge.get("metadata", {}).items()
                      if k not in ("annotations", "uid")})  # fmt: skip
        if extra:
            raise ValueError(f"a JSON patch pass carries merge fields {sorted(extra)}")
        found = self.operations.annotations
        ops = list(self.operations.operations)
        wanted = self.merge.get("metadata", {}).get("annotations", {})
        if not found and any(value is not None for value in wanted.values()):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        for key, value in wanted.items():
            pointer = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
            if value is not None:
                ops.append({"op": "add", "path": pointer, "value": value})
            elif key in found:
                ops.append({"op": "remove", "path": pointer})
        return ops

    async def run_effects(self) -> None:
        """Run the effects, in the order they were added, once. One the API refuses (hot's
        nudge of a pod) is logged and the others still run: the write they follow stands."""
        effects, self.effects = self.effects, []
        for effect in effects:
            try:
                result = effect()
                if inspect.isawaitable(result):
                    await result
            except ApiError as exc:
                log.warning("after a write: %s failed: %s", getattr(effect, "__qualname__",
                                                                    "an effect"), exc)  # fmt: skip


def merged(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` then ``patch``, two JSON merge patches, as one: maps merge key by key, and
    any other value of ``patch`` (None, which deletes, included) wins. A map set where
    ``base`` deletes can't be one merge patch (it would merge into what the object has):
    ``ValueError``, a bug of the pass that gathered them."""
    out = dict(base)
    for key, value in patch.items():
        before = out.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            out[key] = merged(before, value)
        elif isinstance(value, Mapping):
            if key in out:
                raise ValueError(f"{key!r}: a map set where an earlier part replaced it")
            out[key] = merged({}, value)
        else:
            out[key] = value
    return out
