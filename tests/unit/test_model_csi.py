"""Secrets Store CSI classes as sources (their row, read by ``model/mounts.py``): discovery,
the class's state from its newest pod status, and the decision once pods mount a class."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kube_nudge.agentwire import Claim, key_id
from kube_nudge.model import (
    Adopt,
    Apply,
    Noop,
    SourceKind,
    SourceRef,
    WorkloadDefaults,
    WorkloadMemory,
    assess,
    decide,
    describe_changes,
    project_workload,
)
from kube_nudge.model.mounts import PodStatus, advance, class_view, project_pod_status
from kube_nudge.model.references import CSI_DRIVER, discover
from kube_nudge.strategies.hot.claims import check_claim
from tests.agent_support import KEY as HOT_KEY
from tests.unit.fakes import KEY, NS, PATH

CSI = SourceKind.CSI
DB = SourceRef(CSI, NS, "db")
CSI_ON = WorkloadDefaults(csi_secrets=True)


def csi_volume(name: str = "secrets", spc: str = "db") -> dict[str, Any]:
    attributes = {"secretProviderClass": spc}
    return {"name": name, "csi": {"driver": CSI_DRIVER, "readOnly": True,
                                  "volumeAttributes": attributes}}  # fmt: skip


def pod_spec(*, sub_path: bool = False, env_secret: str | None = None) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": "secrets", "mountPath": "/mnt/secrets"}
    if sub_path:
        mount["subPath"] = "db-password"
    container: dict[str, Any] = {"name": "app", "volumeMounts": [mount]}
    if env_secret is not None:
        ref = {"secretKeyRef": {"name": env_secret, "key": "password"}}
        container["env"] = [{"name": "PASSWORD", "valueFrom": ref}]
    return {"containers": [container], "volumes": [csi_volume()]}


def deployment(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": NS, "uid": "u1",
                     "annotations": {"kube-nudge.io/enabled": "true", **(annotations or {})}},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"spec": spec}},
    }  # fmt: skip


def status(
    objects: dict[str, str],
    rv: int,
    *,
    pod: str = "web-1",
    mounted: object = True,
    written: str = "12:00:00",
) -> dict[str, Any]:
    """A SecretProviderClassPodStatus as the driver writes it (``written``: the time of its
    status write on 2026-11-27)."""
    managed = {"manager": "csi-secrets-store", "operation": "Update",
               "time": f"2026-11-27T{written}Z", "fieldsV1": {"f:status": {}}}  # fmt: skip
    return {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClassPodStatus",
        "metadata": {
            "name": f"{pod}-{NS}-db", "namespace": NS, "resourceVersion": str(rv),
            "managedFields": [managed],
            "labels": {"internal.secrets-store.csi.k8s.io/node-name": "node-1"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod}],
        },
        "status": {
            "podName": pod, "secretProviderClassName": "db", "mounted": mounted,
            "targetPath": f"/var/lib/kubelet/pods/{pod}/volumes/kubernetes.io~csi/secrets/mount",
            "objects": [{"id": k, "version": v} for k, v in sorted(objects.items())],
        },
    }  # fmt: skip


def kept(objects: dict[str, str], rv: int, **kwargs: Any) -> PodStatus:
    found = project_pod_status(status(objects, rv, **kwargs), CSI)
    assert found is not None
    return found


# -- discovery -----------------------------------------------------------------------------


def test_a_csi_volume_consumes_its_class_every_object_optional_refreshed() -> None:
    use = discover(pod_spec(), NS)[DB]
    assert (use.keys, use.optional, use.required_keys, use.via) == (
        None, True, frozenset(), ("volume secrets",),
    )  # fmt: skip
    assert not use.never_refreshed


def test_a_csi_volume_mounted_by_subpath_is_read_only_at_start() -> None:
    use = discover(pod_spec(sub_path=True), NS)[DB]
    assert use.via == ("volume secrets (subPath)",) and use.never_refreshed


def test_other_csi_drivers_and_unnamed_classes_consume_nothing() -> None:
    other = {"name": "x", "csi": {"driver": "other.csi.k8s.io",
                                  "volumeAttributes": {"secretProviderClass": "db"}}}  # fmt: skip
    unnamed = {"name": "y", "csi": {"driver": CSI_DRIVER, "volumeAttributes": {}}}
    assert discover({"volumes": [other, unnamed, {"name": "z", "csi": "junk"}]}, NS) == {}


def test_the_class_counts_only_with_csi_secrets_on() -> None:
    obj = deployment(pod_spec())
    off = project_workload(obj, PATH, WorkloadDefaults())
    on = project_workload(obj, PATH, CSI_ON)
    assert off is not None and on is not None
    assert DB not in off.consumed and DB in on.consumed


# -- the class's state ---------------------------------------------------------------------


def test_a_status_is_kept_as_sorted_pairs_and_an_unmounted_one_not_at_all() -> None:
    found = kept({"b": "2", "a": "1"}, 7)
    assert (found.ref, found.objects, found.resource_version) == (DB, (("a", "1"), ("b", "2")), 7)
    assert project_pod_status(status({"a": "1"}, 7, mounted=False), CSI) is None
    assert project_pod_status({"metadata": {}, "status": {"mounted": True}}, CSI) is None


def test_the_view_keeps_ids_and_digests_never_the_versions() -> None:
    view = class_view(kept({"db-password": "v42"}, 7))
    assert list(view.state.digests) == ["db-password"]
    assert "v42" not in repr(view)


def test_a_rotation_moves_the_class_and_a_new_pod_repeating_it_does_not() -> None:
    first = advance(None, None, kept({"pw": "1"}, 10))
    assert first is not None
    rotated = advance(first, kept({"pw": "1"}, 10), kept({"pw": "2"}, 20, written="12:00:05"))
    assert rotated is not None and rotated.state != first.state
    # A new pod of the rollout mounts the same versions: a newer view, the same state.
    fresh = advance(rotated, None, kept({"pw": "2"}, 30, pod="web-2", written="12:00:09"))
    assert fresh is not None and fresh.state == rotated.state
    # ... and the data last changed when the rotation was recorded, not at that mount.
    assert (
        fresh.data_changed_at
        == rotated.data_changed_at
        != class_view(kept({"pw": "2"}, 30, written="12:00:09")).data_changed_at
    )


def test_an_older_write_a_deletion_or_a_rewrite_of_the_same_objects_never_move_it() -> None:
    current = advance(None, None, kept({"pw": "2"}, 20))
    assert current is not None
    assert advance(current, None, kept({"pw": "1"}, 15, pod="web-0")) is None  # older
    assert advance(current, kept({"pw": "1"}, 15), None) is None  # its pod went away
    # A stale status relabelled later keeps its objects: not a write of versions.
    assert advance(current, kept({"pw": "1"}, 15), kept({"pw": "1"}, 25)) is None


@given(st.lists(st.tuples(st.integers(1, 50), st.sampled_from(["1", "2", "3"])), max_size=30))
def test_the_class_is_the_newest_write_whatever_the_order_of_events(
    writes: list[tuple[int, str]],
) -> None:
    """Statuses listed and updated in any order: the class ends at the versions of the write
    with the highest resourceVersion (each status written once here)."""
    view = None
    newest: tuple[int, str] | None = None
    for rv, version in writes:
        moved = advance(view, None, kept({"pw": version}, rv))
        view = moved or view
        if newest is None or rv > newest[0]:
            newest = (rv, version)
    if newest is None:
        assert view is None
    else:
        assert view == class_view(kept({"pw": newest[1]}, newest[0]))


# -- deciding ------------------------------------------------------------------------------


def test_pods_mounting_an_unknown_class_adopt_and_a_later_rotation_rolls() -> None:
    obj = deployment(pod_spec())
    view = project_workload(obj, PATH, CSI_ON)
    assert view is not None
    unknown = assess(view, lambda ref: None, KEY)
    off_view = project_workload(obj, PATH, WorkloadDefaults())
    assert off_view is not None
    # Unknown versions hash as if the feature were off: turning it on rolls nothing.
    assert unknown.desired == assess(off_view, lambda ref: None, KEY).desired
    assert unknown.unmounted is None
    memory = WorkloadMemory()
    baseline = {"kube-nudge.io/baseline-hash": unknown.desired}
    recorded_view = project_workload(deployment(pod_spec(), baseline), PATH, CSI_ON)
    assert recorded_view is not None
    v1 = class_view(kept({"pw": "1"}, 10))
    mounted = assess(recorded_view, {DB: v1}.get, KEY)
    assert mounted.unmounted == unknown.desired != mounted.desired
    assert decide(recorded_view, mounted, memory, 1000.0) == Adopt(mounted.desired, mounted=True)
    memory = replace(memory.applying("rollout", mounted.desired), rolled_with=mounted.states)
    assert decide(recorded_view, mounted, memory, 1000.0) == Noop()
    v2 = class_view(kept({"pw": "2"}, 20))
    rotated = assess(recorded_view, {DB: v2}.get, KEY)
    plan = decide(recorded_view, rotated, memory, 1000.0)
    assert isinstance(plan, Apply) and plan.changes == {DB: ["pw"]}
    assert describe_changes(plan.changes, rotated.states, NS) == (
        "secretproviderclass/db keys [pw] changed"
    )


# -- strategy hot: a directory of CSI volumes is confirmed by the driver's status ---------


def _claim(dirs: dict[str, str | None]) -> Claim:
    return Claim(key_id(HOT_KEY), dirs)


def _hot_spec() -> dict[str, Any]:
    spec = pod_spec()
    spec["containers"][0]["volumeMounts"][0]["mountPath"] = "/mnt/secrets"
    return spec


def test_a_csi_directory_counts_once_the_status_has_the_versions_and_the_agent_reloaded() -> None:
    spec, claim = _hot_spec(), _claim({"/mnt/secrets": "any-hash-of-the-provider-files"})

    def check(written: dict[str, float | None] | None, loaded_at: float | None) -> str | None:
        mounted = (
            None
            if written is None
            else {SourceRef(SourceKind.CSI, NS, name): at for name, at in written.items()}
        )
        return check_claim(claim, spec, NS, HOT_KEY, {}, mounted=mounted, loaded_at=loaded_at)

    assert check({"db": 100.0}, 100.4) is None  # the status write's second: after the files
    assert check({"db": 100.0}, 99.9) == (
        "/mnt/secrets: its agent has not reloaded since the CSI driver wrote secretproviderclass/db"
    )
    assert check({"db": None}, 200.0) == (
        "/mnt/secrets: the CSI driver has not written the delivered versions of "
        "secretproviderclass/db into it yet"
    )
    assert check({}, None) is None  # a class that doesn't count is not checked
