"""`make demo` checks what it prints (kube_nudge_dev/demo.py): "pods not restarted" and "no
rollout" are read back from the Deployment, its ReplicaSets and its pods, and a claim that is
not true stops the demo."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kube_nudge.model import CONFIG_HASH
from kube_nudge_dev.demo import DemoFailed, Fleet, confirm, unchanged


def _deployment(
    generation: int = 1, config_hash: str | None = None, image: str = "web:1"
) -> dict[str, Any]:
    annotations = {CONFIG_HASH: config_hash} if config_hash else {}
    return {"metadata": {"name": "web", "generation": generation},
            "spec": {"template": {"metadata": {"annotations": annotations},
                                  "spec": {"containers": [{"image": image}]}}}}  # fmt: skip


def _named(*names: str) -> list[dict[str, Any]]:
    return [{"metadata": {"name": name}} for name in names]


def _pods(*uids: str, deleting: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    pods = [{"metadata": {"uid": uid}} for uid in uids]
    pods += [{"metadata": {"uid": uid, "deletionTimestamp": "2026-01-01T00:00:00Z"}}
             for uid in deleting]  # fmt: skip
    return pods


BEFORE = Fleet.of(_deployment(1), _named("web-a"), _pods("p1", "p2"))


def test_an_adoption_that_writes_only_metadata_changes_nothing() -> None:
    # A Deployment's generation counts its annotations' edits too: adopting bumps it.
    after = Fleet.of(_deployment(2), _named("web-a"), _pods("p2", "p1"))
    assert BEFORE.changes(after) == []
    unchanged("opting in restarted nothing", BEFORE, after)


def test_a_terminating_pod_is_not_a_live_one() -> None:
    assert Fleet.of(_deployment(1), [], _pods("p1", deleting=("p0",))).pods == {"p1"}


@pytest.mark.parametrize(
    ("after", "says"),
    [
        (Fleet.of(_deployment(2, "v1-x"), _named("web-a"), _pods("p1", "p2")),
         "pod template edited (config hash None -> v1-x)"),
        (Fleet.of(_deployment(2, image="web:2"), _named("web-a"), _pods("p1", "p2")),
         "pod template edited (config hash None -> None)"),
        (Fleet.of(_deployment(1), _named("web-a", "web-b"), _pods("p1", "p2")),
         "replicasets ['web-a'] -> ['web-a', 'web-b']"),
        (Fleet.of(_deployment(1), _named("web-a"), _pods("p1", "p3")), "1 pod(s) replaced"),
    ],
)  # fmt: skip
def test_a_restart_or_a_rollout_is_named_and_fails_the_demo(after: Fleet, says: str) -> None:
    assert says in BEFORE.changes(after)
    with pytest.raises(DemoFailed, match=r"rolled nothing: not true \(.*" + re.escape(says)):
        unchanged("a change nobody consumes rolled nothing", BEFORE, after)


def test_an_untrue_claim_fails_with_its_detail() -> None:
    confirm("one rollout", True)
    with pytest.raises(DemoFailed, match=r"^one rollout: not true \(3 replicasets\)$"):
        confirm("one rollout", False, "3 replicasets")
