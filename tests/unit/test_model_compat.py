"""--compat: Reloader's and Wave's annotations mean the same here (docs/migrating.md's
table)."""

from __future__ import annotations

from typing import Any

from kube_nudge.model import (
    SourceKind,
    SourceRef,
    WorkloadDefaults,
    assess,
    parse_source,
    parse_workload,
)
from kube_nudge.model.projection import project_source, project_workload

NS = "shop"
COMPAT = WorkloadDefaults(compat=True)


def cm(name: str, namespace: str = NS) -> SourceRef:
    return SourceRef(SourceKind.CONFIGMAP, namespace, name)


def secret(name: str) -> SourceRef:
    return SourceRef(SourceKind.SECRET, NS, name)


def consumed(annotations: dict[str, str]) -> set[SourceRef]:
    env = [
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "A"}}},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "db", "key": "B"}}},
    ]
    obj: dict[str, Any] = {
        "metadata": {"namespace": NS, "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": env}]}}},
    }
    view = project_workload(obj, ("spec", "template"), COMPAT)
    assert view is not None
    return set(view.consumed)


def test_without_compat_peer_annotations_mean_nothing() -> None:
    settings, errors = parse_workload({"reloader.stakater.com/auto": "true"}, NS)
    assert (settings.enabled, errors) == (False, [])


def test_auto_opts_in_to_everything() -> None:
    assert consumed({"reloader.stakater.com/auto": "true"}) == {cm("app"), secret("db")}
    assert consumed({"wave.pusher.com/update-on-config-change": "true"}) == {
        cm("app"), secret("db")
    }  # fmt: skip


def test_per_type_auto_counts_only_that_kind() -> None:
    assert consumed({"configmap.reloader.stakater.com/auto": "true"}) == {cm("app")}
    assert consumed({"secret.reloader.stakater.com/auto": "true"}) == {secret("db")}


def test_named_lists_count_only_the_named_sources() -> None:
    named = {"configmap.reloader.stakater.com/reload": "app,other"}
    assert consumed(named) == {cm("app"), cm("other")}
    # With an auto as well, discovery stays and the named ones are added.
    both = {**named, "reloader.stakater.com/auto": "true"}
    assert consumed(both) == {cm("app"), cm("other"), secret("db")}


def test_wave_extras_are_our_extra_sources() -> None:
    annotations = {
        "wave.pusher.com/update-on-config-change": "true",
        "wave.pusher.com/extra-configmaps": "team/shared, flags",
        "wave.pusher.com/extra-secrets": "tls",
    }
    assert consumed(annotations) == {
        cm("app"), secret("db"), cm("shared", "team"), cm("flags"), secret("tls")
    }  # fmt: skip


def test_our_enabled_annotation_wins() -> None:
    settings, _ = parse_workload(
        {"reloader.stakater.com/auto": "true", "kube-nudge.io/enabled": "false"}, NS, COMPAT
    )
    assert settings.enabled is False


def test_unmappable_reloader_annotations_are_reported_not_ignored() -> None:
    settings, errors = parse_workload(
        {"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"},
        NS, COMPAT,
    )  # fmt: skip
    assert settings.enabled
    assert errors == [
        "reloader.stakater.com/rollout-strategy has no kube-nudge equivalent and is ignored "
        "(see the compat table in docs/migrating.md)"
    ]
    _, bad = parse_workload({"configmap.reloader.stakater.com/reload": "Bad_Name"}, NS, COMPAT)
    assert bad == ['--compat: invalid configmap name "Bad_Name" in a Reloader/Wave list']


def test_reloader_ignore_on_a_source() -> None:
    ignored = {"reloader.stakater.com/ignore": "true"}
    assert parse_source(ignored, compat=True)[0].ignore is True
    assert parse_source(ignored)[0].ignore is False
    ours = {**ignored, "kube-nudge.io/ignore": "false"}
    assert parse_source(ours, compat=True)[0].ignore is False


def visible_with(annotations: dict[str, str], matched: set[str]) -> set[str]:
    """Names of the sources that count for a workload with `annotations` when the sources
    in `matched` carry Reloader's match annotation."""
    obj: dict[str, Any] = {
        "metadata": {"namespace": NS, "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "envFrom": [
            {"configMapRef": {"name": "app"}}, {"secretRef": {"name": "db"}},
        ]}]}}},
    }  # fmt: skip
    view = project_workload(obj, ("spec", "template"), COMPAT)
    assert view is not None
    sources = {
        ref: project_source(
            {"metadata": {"name": ref.name, "namespace": NS, "annotations": (
                {"reloader.stakater.com/match": "true"} if ref.name in matched else {})},
             "data": {"K": "v"}},
            compat=True,
        )
        for ref in (cm("app"), secret("db"))
    }  # fmt: skip
    return {ref.name for ref in assess(view, sources.get, b"k" * 32).visible}


def test_search_counts_only_matched_sources() -> None:
    search = {"reloader.stakater.com/search": "true"}
    settings, errors = parse_workload(search, NS, COMPAT)
    assert (settings.enabled, settings.only_matched, errors) == (True, True, [])
    assert visible_with(search, {"app"}) == {"app"}
    assert visible_with(search, set()) == set()
    # Another opt-in is broader: every consumed source counts, matched or not.
    assert visible_with({**search, "reloader.stakater.com/auto": "true"}, {"app"}) == {
        "app", "db"
    }  # fmt: skip
    # The match annotation means nothing without --compat.
    assert parse_source({"reloader.stakater.com/match": "true"})[0].matched is False
