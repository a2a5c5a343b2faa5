"""``model.preview.predict``: what a reconcile does with a workload once a change is applied,
on a fake clock, with the product's strategies (their models give the delivery)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_nudge.model import CONFIG_HASH, SourceKind, SourceRef, SourceView, assess
from kube_nudge.model.preview import Prediction, Verb, predict
from kube_nudge.model.projection import WorkloadView, project_source, project_workload
from kube_nudge.model.records import format_rolled_at
from kube_nudge.strategies.registry import capped_by_name, model_extensions, product_defaults
from kube_nudge_dev import manifests

NS = "shop"
KEY = b"k" * 32
APP = SourceRef(SourceKind.CONFIGMAP, NS, "app")
NOW = 1_800_000_000.0
MODELS = {model.name: model for model in model_extensions()}


def configmap(annotations: Mapping[str, str] | None = None, **data: str) -> SourceView:
    obj = manifests.configmap("app", data, dict(annotations or {}))
    obj["metadata"].update(namespace=NS, uid="cm")
    return project_source(obj)


AGENT = {"name": "kube-nudge-agent", "image": "kube-nudge", "args": ["agent", "--watch", "/c"]}


def volume_consumer(*, agent: bool = True) -> dict[str, Any]:
    """A pod spec mounting ConfigMap app as a volume (refreshed in running pods), with the
    reload agent beside the app unless ``agent`` is False."""
    return manifests.pod_spec(
        containers=[
            {"name": "app", "image": "x", "volumeMounts": [{"name": "c", "mountPath": "/c"}]},
            *([AGENT] if agent else []),
        ],
        volumes=[{"name": "c", "configMap": {"name": "app"}}],
    )


def view_of(
    spec: dict[str, Any] | None = None, *, recorded: str | None = None, **annotations: str
) -> WorkloadView:
    """An opted-in Deployment ``web`` (env LEVEL of app unless ``spec``), recording
    ``recorded`` on its template, with more annotations (``_`` for ``-``)."""
    given = {"kube-nudge.io/enabled": "true"} | {
        f"kube-nudge.io/{k.replace('_', '-')}": v for k, v in annotations.items()
    }
    obj = manifests.deployment(
        "web", spec=spec or manifests.env_consumer("LEVEL"), annotations=given,
        template_annotations={CONFIG_HASH: recorded} if recorded else None,
    )  # fmt: skip
    obj["metadata"].update(namespace=NS, uid="u1")
    view = project_workload(obj, ("spec", "template"), product_defaults(), opted_out_too=True)
    assert view is not None
    return view


def plan(
    view: WorkloadView,
    before: Mapping[SourceRef, SourceView],
    after: Mapping[SourceRef, SourceView],
    *,
    known: bool = False,
    now: float = NOW,
) -> Prediction:
    strategy = view.settings.strategy
    return predict(
        view, assess(view, before.get, KEY), assess(view, after.get, KEY), now=now,
        capped=capped_by_name()[strategy], strategy=MODELS.get(strategy), applied_known=known,
        changed={ref for ref in after if before.get(ref) != after.get(ref)}, siblings=[],
        display="-n shop deployment/web",
    )  # fmt: skip


INFO, DEBUG = {APP: configmap(LEVEL="info")}, {APP: configmap(LEVEL="debug")}


def test_a_changed_key_it_reads_rolls_it_naming_the_key() -> None:
    p = plan(view_of(), INFO, DEBUG)
    assert (p.verb, dict(p.changes)) == (Verb.ROLL, {APP: ("LEVEL",)})


def test_a_key_it_does_not_read_changes_nothing_and_says_so() -> None:
    before, after = (
        {APP: configmap(LEVEL="info", OTHER="a")},
        {APP: configmap(LEVEL="info", OTHER="b")},
    )
    p = plan(view_of(), before, after)
    assert (p.verb, p.reason) == (Verb.NONE, "configmap/app: no key it reads changes")


def test_an_ignored_source_or_an_excluded_one_is_named() -> None:
    ignore = {"kube-nudge.io/ignore": "true"}
    before, after = {APP: configmap(ignore, LEVEL="info")}, {APP: configmap(ignore, LEVEL="debug")}
    assert plan(view_of(), before, after).reason.startswith("configmap/app is ignored")
    excluded = view_of(exclude="configmap/app")
    assert plan(excluded, INFO, DEBUG).reason == "configmap/app is excluded (kube-nudge.io/exclude)"


def test_not_opted_in_is_none() -> None:
    p = plan(view_of(enabled="false"), INFO, DEBUG)
    assert (p.verb, p.reason) == (Verb.NONE, "not opted in (kube-nudge.io/enabled)")


def test_a_key_that_goes_holds_it_as_missing() -> None:
    p = plan(view_of(), INFO, {APP: configmap(OTHER="x")})
    assert (p.verb, p.hold) == (Verb.HOLD, "missing")
    assert "LEVEL" in p.reason


def test_hot_reloads_what_a_volume_carries_and_rolls_an_env_var() -> None:
    reloads = plan(view_of(volume_consumer(), strategy="hot"), INFO, DEBUG)
    assert reloads.verb is Verb.RELOAD
    rolls = plan(view_of(strategy="hot"), INFO, DEBUG)
    assert rolls.verb is Verb.ROLL
    assert "configmap/app keys [LEVEL] are read only at start (env app)" in rolls.reason


def test_hot_without_an_agent_in_the_pod_template_rolls_and_says_why() -> None:
    """No container runs `kube-nudge agent`: nobody could confirm a reload, so it rolls at
    once (the controller does the same) instead of reloading and waiting out the deadline."""
    rolls = plan(view_of(volume_consumer(agent=False), strategy="hot"), INFO, DEBUG)
    assert rolls.verb is Verb.ROLL
    assert rolls.reason == (
        "cannot reload in place: no container of its pod template runs the reload agent "
        "(`kube-nudge agent`, docs/reload.md), so no pod could confirm a reload; rolls instead"
    )


def test_hot_without_an_agent_and_fallback_warn_is_delivered_in_place_unconfirmed() -> None:
    view = view_of(volume_consumer(agent=False), strategy="hot", hot_fallback="warn")
    unconfirmed = plan(view, INFO, DEBUG)
    assert unconfirmed.verb is Verb.RELOAD
    assert unconfirmed.reason.startswith("delivered in place unconfirmed: no container of its")
    assert unconfirmed.reason.endswith(
        "a Warning at once, no rollout (kube-nudge.io/hot-fallback: warn)"
    )


def test_notify_only_announces() -> None:
    assert plan(view_of(strategy="notify"), INFO, DEBUG).verb is Verb.NOTIFY


def test_snapshot_says_it_rolls_onto_new_copies_of_what_changed() -> None:
    p = plan(view_of(strategy="snapshot"), INFO, DEBUG)
    assert (p.verb, p.reason) == (
        Verb.ROLL,
        "rolls onto new copies of configmap/app (strategy snapshot: its pod template is "
        "pointed at immutable copies, so pods of the old revision keep the config they run)",
    )
    # A source named only by annotation gets no copy: the template just gets the new hash.
    named = view_of(manifests.pod_spec(), strategy="snapshot", configmaps="app")
    assert plan(named, INFO, DEBUG).reason.startswith("its pod template gets the new hash")


def test_approval_and_a_closed_window_hold_with_when_it_opens() -> None:
    assert plan(view_of(approval="required"), INFO, DEBUG).hold == "approval"
    # NOW is 2027-01-15 08:00 UTC; the window opens at 10:00.
    windowed = plan(view_of(rollout_window="10:00-11:00 UTC"), INFO, DEBUG)
    assert (windowed.verb, windowed.hold, windowed.until) == (Verb.HOLD, "window", NOW + 7200)


def test_a_window_days_away_is_held_until_its_real_opening() -> None:
    """NOW is Friday 2027-01-15 08:00 UTC; a Monday window opens three days and two hours
    later: that is the time shown, not a day from now."""
    windowed = plan(view_of(rollout_window="Mon 10:00-11:00 Europe/Berlin"), INFO, DEBUG)
    opens = NOW + 3 * 86400 + 3600  # Mon 10:00 in Berlin is 09:00 UTC
    assert (windowed.verb, windowed.hold, windowed.until) == (Verb.HOLD, "window", opens)
    assert windowed.reason == (
        "held until the rollout window opens at Mon 2027-01-18 10:00 Europe/Berlin "
        "(2027-01-18 09:00 UTC) (Mon 10:00-11:00 Europe/Berlin; kube-nudge.io/rollout-window)"
    )


def test_the_flap_cap_holds_until_the_oldest_rollout_leaves_the_window() -> None:
    recent = format_rolled_at([NOW - 100, NOW - 50])
    view = view_of(max_rollouts="2/5m", rolled_at=recent)
    p = plan(view, INFO, DEBUG)
    assert (p.verb, p.hold, p.until) == (Verb.HOLD, "flapping", NOW - 100 + 300)


def test_with_the_key_what_the_workload_records_decides() -> None:
    current = assess(view_of(), INFO.get, KEY).desired
    assert plan(view_of(recorded=current), INFO, DEBUG, known=True).verb is Verb.ROLL
    # Recorded as already running the new config: nothing to do.
    running_new = assess(view_of(), DEBUG.get, KEY).desired
    assert plan(view_of(recorded=running_new), INFO, DEBUG, known=True).verb is Verb.NONE
    # Nothing recorded yet: kube-nudge adopts it first.
    first = plan(view_of(), INFO, DEBUG, known=True)
    assert (first.verb, first.reason.startswith("not adopted yet")) == (Verb.NONE, True)
