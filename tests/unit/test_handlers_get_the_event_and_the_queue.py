"""The event handlers get the event and the queue, as controller-runtime's EventHandler:
none is built with a reader of the caches or the rollout book. What a workload's change
means for our own writes comes with the event (``OwnNews``, asked of the book by the caches
first), a source's consumers from its map function (``Consumers``)."""

from __future__ import annotations

import dataclasses
import inspect
import typing

from kube_nudge.controller.handlers import EventHandlers

#: What a handler may be built with: the paced queue, its map function, the waiters to
#: wake, Events to post, the sync flag, the defaults an opt-in is parsed with.
ALLOWED = {"Enqueue", "Consumers", "Waiters", "BackgroundEvents", "Event", "WorkloadDefaults"}


def test_no_handler_is_built_with_a_reader_or_the_book() -> None:
    table = typing.get_type_hints(EventHandlers)
    built_with = {}
    for field in dataclasses.fields(EventHandlers):
        kind = table[field.name]
        if not inspect.isclass(kind):
            continue  # a callable's slot (source_pods): the pod replacer's own queue
        # As written (the module postpones annotations): an alias keeps its name.
        written = dict(kind.__init__.__annotations__)
        written.pop("return", None)
        built_with[field.name] = {hint.rpartition(".")[2] for hint in written.values()}
    assert built_with == {
        "sources": {"Consumers", "Enqueue", "BackgroundEvents", "Event"},
        "workloads": {"Enqueue", "Waiters", "Event"},
        "opt_in_errors": {"BackgroundEvents", "WorkloadDefaults"},
        "runners": {"Enqueue", "Waiters", "Event"},
    }
    assert set().union(*built_with.values()) <= ALLOWED
