"""One PATCH per workload per pass (issue 54): what the parts of a pass gather
(``WorkloadChanges``) goes out as one request, with its preconditions; the effects that say
so run only once it is written; a second PATCH in one pass is refused at run time."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.controller.writer import SecondWrite, WorkloadWriter
from kube_nudge.kube.client import ApiError
from kube_nudge.kube.patches import PatchType
from kube_nudge.kube.workloads import BUILTIN_KINDS, Target
from kube_nudge.runtime.metrics import Metrics
from kube_nudge.strategies.base import StrategyContext
from kube_nudge.strategies.changes import Operations, WorkloadChanges, merged
from tests.unit.fakes import KEY, NS, FakeApi, PostedEvents, workload

DEPLOYMENT = BUILTIN_KINDS[0]
PATH = DEPLOYMENT.resource.path(NS, "web")
TARGET = Target(DEPLOYMENT, NS, "web", workload())


def writer_over(api: FakeApi) -> WorkloadWriter:
    events = PostedEvents()
    context = StrategyContext(api.as_client(), events, Metrics(), KEY)  # type: ignore[arg-type]
    return WorkloadWriter(context)


def patches(api: FakeApi) -> list[tuple[Any, str]]:
    """Each PATCH sent: its body and content type."""
    return [(o["body"], o["content_type"]) for m, _, o in api.requests if m == "PATCH"]


async def test_what_the_parts_of_a_pass_add_goes_out_as_one_merge_patch() -> None:
    """The follower's record, the gate's measurement and the strategy's rollout: one PATCH
    carrying the uid precondition; a later part wins where both set a field."""
    api = FakeApi()
    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": "h0@1", "kube-nudge.io/analysis-run": "a"})
    changes.annotate({"kube-nudge.io/analysis-run": "b"})
    changes.add({"spec": {"template": {"metadata": {"annotations": {"h": "v2"}}}}})
    await writer_over(api).write(TARGET, changes)
    [(body, kind)] = patches(api)
    assert kind == PatchType.MERGE.value
    assert body == {
        "metadata": {
            "annotations": {"kube-nudge.io/failed": "h0@1", "kube-nudge.io/analysis-run": "b"},
            "uid": TARGET.view.uid,
        },
        "spec": {"template": {"metadata": {"annotations": {"h": "v2"}}}},
    }


async def test_a_rollback_carries_the_failure_record_as_operations_of_the_same_patch() -> None:
    """The record goes in as an ``add``; a removal only of an annotation the read found."""
    api = FakeApi()
    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": "h1@5", "a/b~c": None, "gone": None})
    undo = ({"op": "test", "path": "/metadata/resourceVersion", "value": "7"},)
    changes.replace_by(Operations(undo, {"a/b~c": "x"}))
    await writer_over(api).write(TARGET, changes)
    [(body, kind)] = patches(api)
    assert kind == PatchType.JSON.value
    assert body == [
        *undo,
        {"op": "add", "path": "/metadata/annotations/kube-nudge.io~1failed", "value": "h1@5"},
        {"op": "remove", "path": "/metadata/annotations/a~1b~0c"},
    ]


async def test_a_rollback_refused_leaves_the_failure_record_written_alone() -> None:
    """The workload changed since the rollback read it (409): the record (it holds the
    line) goes alone as a merge patch, the refusal is said, RolledBack is not, and the pass
    fails (retried)."""
    said: list[str] = []

    class RefusesOperations(FakeApi):
        async def request(self, method: str, path: str, **options: Any) -> Any:
            if options.get("content_type") == PatchType.JSON.value:
                self.requests.append((method, path, options))
                raise ApiError(409, "Conflict", "the object has been modified")
            return await super().request(method, path, **options)

    api = RefusesOperations()
    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": "h1@5"})
    changes.then(lambda: said.append("RolloutFailed"))
    changes.replace_by(Operations(({"op": "test", "path": "/x", "value": 1},), {"a": "b"}))
    changes.said_of_operations(lambda: said.append("RolledBack"),
                               lambda exc: said.append(f"RollbackFailed {exc.status}"))  # fmt: skip
    with pytest.raises(ApiError):
        await writer_over(api).write(TARGET, changes)
    assert [kind for _, kind in patches(api)] == [PatchType.JSON.value, PatchType.MERGE.value]
    assert patches(api)[1][0] == {
        "metadata": {"annotations": {"kube-nudge.io/failed": "h1@5"}, "uid": TARGET.view.uid}
    }
    assert said == ["RollbackFailed 409", "RolloutFailed"]


async def test_a_rollback_written_says_so_after_what_came_with_it() -> None:
    said: list[str] = []
    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": "h1@5"})
    changes.then(lambda: said.append("RolloutFailed"))
    changes.replace_by(Operations((), {"a": "b"}))
    changes.said_of_operations(lambda: said.append("RolledBack"), lambda exc: None)
    await writer_over(FakeApi()).write(TARGET, changes)
    assert said == ["RolloutFailed", "RolledBack"]


async def test_a_rollback_of_a_workload_without_annotations_adds_the_map_first() -> None:
    api = FakeApi()
    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": "h1@5"})
    changes.replace_by(Operations((), {}))
    await writer_over(api).write(TARGET, changes)
    [(body, _)] = patches(api)
    assert body[0] == {"op": "add", "path": "/metadata/annotations", "value": {}}


async def test_effects_run_once_written_and_never_when_the_write_fails() -> None:
    api = FakeApi()
    said: list[str] = []
    changes = WorkloadChanges()
    changes.annotate({"x": "1"})
    changes.then(lambda: said.append(f"after {len(patches(api))} PATCH"))
    api.errors[PATH] = ApiError(422, "Invalid", "no")
    with pytest.raises(ApiError):
        await writer_over(api).write(TARGET, changes)
    assert said == []
    del api.errors[PATH]
    await writer_over(api).write(TARGET, changes)
    assert said == ["after 2 PATCH"]  # the refused one was sent too


async def test_a_pass_with_nothing_to_write_sends_nothing_and_says_what_it_has() -> None:
    api = FakeApi()
    said: list[str] = []
    changes = WorkloadChanges()
    changes.then(lambda: said.append("said"))
    await writer_over(api).write(TARGET, changes)
    assert (patches(api), said) == ([], ["said"])


async def test_a_second_patch_of_the_workload_in_one_pass_is_refused() -> None:
    api = FakeApi()
    writer = writer_over(api)
    first, second = WorkloadChanges(), WorkloadChanges()
    first.annotate({"x": "1"})
    second.annotate({"x": "2"})
    with writer.pass_of(TARGET.key):
        await writer.write(TARGET, first)
        with pytest.raises(SecondWrite):
            await writer.write(TARGET, second)
    assert len(patches(api)) == 1
    with writer.pass_of(TARGET.key):  # the next pass may write again
        await writer.write(TARGET, second)
    assert len(patches(api)) == 2


class ConflictOnce(FakeApi):
    """Answers the first PATCH with 409 (the workload changed since its read)."""

    async def request(self, method: str, path: str, **options: Any) -> Any:
        if method == "PATCH" and not patches(self):
            self.requests.append((method, path, options))
            raise ApiError(409, "Conflict", "the object has been modified")
        return await super().request(method, path, **options)


async def test_a_patch_refused_by_its_precondition_is_no_write_of_the_pass() -> None:
    """A patch built from a full read and refused (409) is built again from a new read:
    still the pass's one write, not its second."""
    api = ConflictOnce(objects={PATH: {"metadata": {"uid": TARGET.view.uid,
                                                    "resourceVersion": "7"}}})  # fmt: skip
    writer = writer_over(api)

    async def build(read: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": read["metadata"]["resourceVersion"]}}

    changes = WorkloadChanges()
    changes.annotate({"kube-nudge.io/failed": None})
    changes.build_fresh(build)
    with writer.pass_of(TARGET.key):
        await writer.write(TARGET, changes)
    expected = {"metadata": {"annotations": {"kube-nudge.io/failed": None},
                             "resourceVersion": "7"}}  # fmt: skip
    assert patches(api) == [(expected, PatchType.MERGE.value)] * 2
    assert [m for m, _, _ in api.requests] == ["GET", "PATCH", "GET", "PATCH"]


# -- merging the parts, a pure rule ---------------------------------------------------------

values = st.one_of(st.none(), st.text(max_size=3))
patch_maps = st.recursive(
    st.dictionaries(st.sampled_from("abc"), values, max_size=3),
    lambda inner: st.dictionaries(st.sampled_from("abc"), st.one_of(values, inner), max_size=3),
    max_leaves=8,
)
documents = st.recursive(
    st.dictionaries(st.sampled_from("abc"), st.text(max_size=3), max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from("abc"), st.one_of(st.text(max_size=3), inner), max_size=3
    ),
    max_leaves=8,
)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


@given(documents, patch_maps, patch_maps)
def test_one_merged_patch_does_what_the_two_would_in_turn(
    document: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    """Gathering two parts into one PATCH changes the object as two PATCHes would; where no
    merge patch can (a map set where the first part replaced the key: none of kube-nudge's
    parts does), gathering them is refused rather than wrong."""
    in_turn = apply_merge_patch(apply_merge_patch(document, first), second)
    try:
        one = merged(first, second)
    except ValueError:
        assert _sets_a_map_over_a_replaced_key(first, second)
        return
    assert apply_merge_patch(document, one) == in_turn


def _sets_a_map_over_a_replaced_key(first: Any, second: Any) -> bool:
    for key, value in second.items():
        before = first.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            if _sets_a_map_over_a_replaced_key(before, value):
                return True
        elif isinstance(value, dict) and key in first:
            return True
    return False
