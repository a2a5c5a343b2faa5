"""``kube-nudge plan --base``: the offline plan of a change between two sets of manifests,
its three outputs, its exit codes, and no Secret value in any of them. (Against the live
cluster: tests/integration/test_plan.py.)"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_nudge.app.cli import main
from kube_nudge_dev import manifests
from tests.schema_support import plan_validator

CANARY = "s3cr3t-canary-value"
ENABLED = {"kube-nudge.io/enabled": "true"}


def volume_spec(source: str = "app") -> dict[str, Any]:
    """ConfigMap ``source`` mounted whole, the reload agent beside the app (strategy hot)."""
    return manifests.pod_spec(
        containers=[{"name": "app", "image": "x:1",
                     "volumeMounts": [{"name": "c", "mountPath": "/c"}]},
                    {"name": "kube-nudge-agent", "image": "kube-nudge:1",
                     "args": ["agent", "--watch", "/c"]}],
        volumes=[{"name": "c", "configMap": {"name": source}}],
    )  # fmt: skip


def fleet(
    level: str, *, image: str = "registry.invalid/app:1", more: dict[str, Any] | None = None
) -> list[Any]:
    """ConfigMap app (LEVEL, OTHER), Secret db, and the workloads reading them."""
    web = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED)
    web["spec"]["template"]["spec"]["containers"][0]["image"] = image
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
              "stringData": {"password": CANARY}}  # fmt: skip
    return [
        manifests.configmap("app", {"LEVEL": level, "OTHER": "same"}),
        secret,
        web,
        manifests.deployment("hotone", spec=volume_spec(),
                             annotations={**ENABLED, "kube-nudge.io/strategy": "hot"}),
        manifests.deployment("told", spec=manifests.env_consumer("LEVEL"),
                             annotations={**ENABLED, "kube-nudge.io/strategy": "notify"}),
        manifests.deployment("gated", spec=manifests.env_consumer("LEVEL"),
                             annotations={**ENABLED, "kube-nudge.io/approval": "required"}),
        manifests.deployment("bystander", spec=manifests.env_consumer("LEVEL")),
        *(more or {}).values(),
    ]  # fmt: skip


def write(path: Path, docs: list[Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def plan(tmp_path: Path, base: list[Any], head: list[Any], *flags: str) -> tuple[int, str, str]:
    return _run(["plan", "-f", write(tmp_path / "head.yaml", head),
                 "--base", write(tmp_path / "base.yaml", base), *flags])  # fmt: skip


def _run(args: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def rows(document: str) -> dict[str, dict[str, Any]]:
    found = json.loads(document)
    assert list(plan_validator().iter_errors(found)) == []
    return {f"{w['kind']}/{w['name']}": w for w in found["workloads"]}


def test_each_action_with_its_sources_and_reason(tmp_path: Path) -> None:
    code, out, _ = plan(tmp_path, fleet("info"), fleet("debug"), "-o", "json")
    assert code == 1
    got = {name: (w["action"], w["sources"]) for name, w in rows(out).items()}
    level = ["configmap/app [LEVEL]"]
    assert got == {
        "Deployment/web": ("roll", level),
        "Deployment/hotone": ("reload", level),
        "Deployment/told": ("notify", level),
        "Deployment/gated": ("hold", level),
        "Deployment/bystander": ("none", []),
    }
    assert rows(out)["Deployment/gated"]["hold"] == "approval"
    assert rows(out)["Deployment/bystander"]["reason"] == "not opted in (kube-nudge.io/enabled)"


def test_a_change_of_a_key_only_some_read_reaches_only_those(tmp_path: Path) -> None:
    base = fleet("info")
    head = fleet("info")
    head[0]["data"]["OTHER"] = "changed"
    code, out, _ = plan(tmp_path, base, head, "-o", "json")
    found = rows(out)
    assert found["Deployment/web"]["reason"] == "configmap/app: no key it reads changes"
    # Only the one mounting the whole ConfigMap reads OTHER too.
    assert {n: w["action"] for n, w in found.items() if w["action"] != "none"} == {
        "Deployment/hotone": "reload"
    }
    assert code == 1


def test_nothing_changed_is_exit_0_and_says_so(tmp_path: Path) -> None:
    code, out, _ = plan(tmp_path, fleet("info"), fleet("info"))
    assert code == 0
    assert out.splitlines()[0] == "nothing this change reaches"


def test_markdown_starts_with_the_summary_and_the_table_follows(tmp_path: Path) -> None:
    code, out, _ = plan(tmp_path, fleet("info"), fleet("debug"), "-o", "markdown")
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == (
        "**kube-nudge plan:** 1 workload rolls, 1 reloads, 1 notifies, 1 held, 1 unaffected"
    )
    assert "| `default/Deployment/web` | **roll** | configmap/app [LEVEL] |" in out


def test_a_workload_whose_own_template_changes_rolls_anyway(tmp_path: Path) -> None:
    _, out, _ = plan(tmp_path, fleet("info"), fleet("info", image="registry.invalid/app:2"),
                     "-o", "json")  # fmt: skip
    web = rows(out)["Deployment/web"]
    assert (web["action"], web["templateChanges"]) == ("roll", True)
    assert web["reason"].startswith("its own pod template changes in the input: kube-nudge adds")
    _, out, _ = plan(tmp_path, fleet("info"), fleet("debug", image="registry.invalid/app:2"),
                     "-o", "json")  # fmt: skip
    assert "one rollout brings both" in rows(out)["Deployment/web"]["reason"]


def test_rollout_orders_are_waves(tmp_path: Path) -> None:
    def ordered(name: str, order: int) -> dict[str, Any]:
        return manifests.deployment(name, spec=manifests.env_consumer("LEVEL"), annotations={
            **ENABLED, "kube-nudge.io/rollout-order": str(order)})  # fmt: skip

    more = {"a1": ordered("a1", 1), "b1": ordered("b1", 1), "c5": ordered("c5", 5)}
    _, out, _ = plan(tmp_path, fleet("info", more=more), fleet("debug", more=more), "-o", "json")
    found = rows(out)
    assert [found[f"Deployment/{n}"]["wave"] for n in ("a1", "b1", "c5")] == [1, 1, 2]
    assert found["Deployment/c5"]["reason"].endswith("wave 2, after order 1: a1, b1 completes")


def test_a_pod_selector_evicts_and_a_deleted_source_holds_its_readers(tmp_path: Path) -> None:
    base = fleet("info")
    head = fleet("debug")
    head[0]["metadata"]["annotations"] = {"kube-nudge.io/pod-selector": "app=legacy"}
    base[0]["metadata"]["annotations"] = {"kube-nudge.io/pod-selector": "app=legacy"}
    _, out, _ = plan(tmp_path, base, head, "-o", "json")
    evict = rows(out)["Pod/app=legacy"]
    assert evict["action"] == "evict" and "not known offline" in evict["reason"]
    _, out, _ = plan(tmp_path, fleet("info"), fleet("info")[1:], "-o", "json")
    web = rows(out)["Deployment/web"]
    assert (web["action"], web["hold"]) == ("hold", "missing")


def test_no_secret_value_in_any_output(tmp_path: Path) -> None:
    base = fleet("info")
    head = fleet("debug")
    head[1]["stringData"]["password"] = CANARY + "-2"
    head.append(
        manifests.deployment(
            "dbuser",
            annotations=ENABLED,
            spec=manifests.pod_spec(
                containers=[{"name": "a", "image": "x", "envFrom": [{"secretRef": {"name": "db"}}]}]
            ),
        )
    )
    base.append(head[-1])
    needles = [CANARY, base64.b64encode(CANARY.encode()).decode()[:16]]
    needles += [hashlib.sha256(v.encode()).hexdigest()[:16] for v in (CANARY, CANARY + "-2")]
    for output in ("table", "json", "markdown"):
        code, out, err = plan(tmp_path, base, head, "-o", output)
        assert code == 1
        assert "secret/db [password]" in out
        assert "password" in out.split("secret/db [password]")[0]  # the changed sources first
        assert [n for n in needles if n in out + err] == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-f", "nope.yaml"], "kube-nudge: -f 'nope.yaml': no such file or directory"),
        (["-f", "BASE", "--base", "-"], "--base -: the base can't be standard input"),
        (["-f", "BASE", "--base", "BASE", "-n", "Not_A_Ns"], "--namespace 'Not_A_Ns'"),
        (["-f", "BAD"], "document 1: want apiVersion and kind"),
        # kubectl reads an unquoted y as a boolean, which the API server refuses in data.
        (["-f", "Y", "--base", "BASE"],
         "ConfigMap app: data.ENABLED: want a string, got a boolean (quote it)"),
    ],
)  # fmt: skip
def test_bad_input_is_exit_2_in_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    good = write(tmp_path / "good.yaml", fleet("info"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: ConfigMap\n")
    yes = tmp_path / "y.yaml"
    yes.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {ENABLED: y}\n")
    files = {"BASE": good, "BAD": str(bad), "Y": str(yes)}
    given = [files.get(a, a) for a in args]
    code, out, err = _run(["plan", *given])
    assert (code, out) == (2, "")
    assert says in err and err.count("\n") == 1


def test_an_argo_rollout_in_the_files_is_planned(tmp_path: Path) -> None:
    template = {"metadata": {"labels": {"app": "canary"}}, "spec": manifests.env_consumer("LEVEL")}
    canary = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
              "metadata": {"name": "canary", "annotations": ENABLED},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "canary"}},
                       "template": template}}  # fmt: skip
    more = {"canary": canary}
    code, out, _ = plan(tmp_path, fleet("info", more=more), fleet("debug", more=more), "-o", "json")
    assert code == 1
    found = rows(out)
    assert (found["Rollout/canary"]["action"], found["Rollout/canary"]["sources"]) == (
        "roll", ["configmap/app [LEVEL]"],
    )  # fmt: skip


def small(data: dict[str, str], *, namespace: str | None = None) -> list[Any]:
    """ConfigMap app (in ``namespace``) and web, which reads its key LEVEL by env."""
    source = manifests.configmap("app", data)
    if namespace is not None:
        source["metadata"]["namespace"] = namespace
    web = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"), annotations=ENABLED)
    return [source, web]


def document(out: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(out)
    assert list(plan_validator().iter_errors(found)) == []
    return found


def test_rows_with_an_action_come_first_the_unaffected_last(tmp_path: Path) -> None:
    more = {"aaa": manifests.deployment("aaa", spec=manifests.env_consumer("LEVEL"))}
    _, out, _ = plan(tmp_path, fleet("info", more=more), fleet("debug", more=more), "-o", "json")
    order = [(w["action"], w["name"]) for w in document(out)["workloads"]]
    actions = [a for a, _ in order]
    assert actions[0] == "roll" and actions[-2:] == ["none", "none"]
    assert actions.index("notify") < actions.index("hold") < actions.index("none")
    assert order[-2:] == [("none", "aaa"), ("none", "bystander")]  # by name within one
    _, table, _ = plan(tmp_path, fleet("info", more=more), fleet("debug", more=more))
    rows = [line.split()[1] for line in table.splitlines() if line.startswith("default/")]
    assert rows == actions


def test_the_changed_sources_come_first_in_every_format(tmp_path: Path) -> None:
    """A change of a key no pod reads shows, with the consumers of its source: it used to
    appear nowhere."""
    base, head = small({"LEVEL": "info", "OTHER": "a"}), small({"LEVEL": "info", "OTHER": "b"})
    code, out, _ = plan(tmp_path, base, head, "-o", "json")
    assert code == 0
    assert document(out)["sources"] == [{
        "kind": "configmap", "namespace": "default", "name": "app", "change": "changed",
        "added": [], "removed": [], "changed": ["OTHER"], "unread": ["OTHER"],
        "annotationsChange": False, "consumers": [{
            "namespace": "default", "kind": "Deployment", "name": "web", "action": "none",
            "stranded": False}],
    }]  # fmt: skip
    _, out, _ = plan(tmp_path, base, head)
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("CHANGED SOURCE")))
    assert lines[header + 1].split("  ")[0] == "configmap/default/app"
    assert "changed: OTHER" in lines[header + 1]
    assert lines[header + 1].endswith("Deployment/web none; no consumer reads OTHER")
    assert header < lines.index(next(line for line in lines if line.startswith("WORKLOAD")))
    _, out, _ = plan(tmp_path, base, head, "-o", "markdown")
    assert (
        "| `configmap/default/app` | changed | changed: OTHER | "
        "Deployment/web none; no consumer reads OTHER |"
    ) in out
    assert out.index("| Changed source |") < out.index("| Workload |")


def test_a_source_no_workload_reads_is_shown_not_nothing(tmp_path: Path) -> None:
    """A ConfigMap in another namespace than its workloads', offline."""
    base = small({"LEVEL": "info"}, namespace="prod")
    head = small({"LEVEL": "debug", "NEW": "x"}, namespace="prod")
    code, out, _ = plan(tmp_path, base, head)
    assert code == 0
    assert out.splitlines()[0] == "1 source changes, no workload reads it"
    assert (
        "configmap/prod/app  changed  changed: LEVEL; added: NEW  no consumer in this input" in out
    )
    _, out, _ = plan(tmp_path, base, head, "-o", "json")
    assert document(out)["sources"][0]["unread"] == ["LEVEL", "NEW"]


def test_a_deleted_source_its_consumers_require_exits_1(tmp_path: Path) -> None:
    """Held, not rolled, yet its new pods can't start: exit 1 (review me), as kubectl diff
    says 1 for a difference; a code above 1 would read as a failed command."""
    code, out, _ = plan(tmp_path, fleet("info"), fleet("info")[1:], "-o", "json")
    found = document(out)
    assert (code, found["acting"], found["stranded"]) == (1, False, True)
    app = found["sources"][0]
    assert (app["name"], app["change"], app["removed"]) == ("app", "deleted", ["LEVEL", "OTHER"])
    assert {c["name"]: c["stranded"] for c in app["consumers"]} == dict.fromkeys(
        ["bystander", "gated", "hotone", "told", "web"], True
    )
    code, out, _ = plan(tmp_path, fleet("info"), fleet("info")[1:])
    assert code == 1
    assert out.splitlines()[1] == (
        "warning: configmap/default/app is deleted, yet 5 workloads require it: their new "
        "pods can't start until it is back"
    )
    _, out, _ = plan(tmp_path, fleet("info"), fleet("info")[1:], "-o", "markdown")
    assert "> **warning:** configmap/default/app is deleted, yet 5 workloads" in out


def test_a_removed_key_a_workload_requires_exits_1_and_an_unread_one_0(tmp_path: Path) -> None:
    base = small({"LEVEL": "info", "OTHER": "a"})
    code, out, _ = plan(tmp_path, base, small({"OTHER": "a"}), "-o", "json")
    assert (code, document(out)["stranded"]) == (1, True)
    assert document(out)["workloads"][0]["hold"] == "missing"
    code, out, _ = plan(tmp_path, base, small({"LEVEL": "info"}), "-o", "json")
    assert (code, document(out)["stranded"]) == (0, False)
    assert document(out)["sources"][0]["removed"] == ["OTHER"]
    # A deleted source nobody reads strands nobody.
    code, out, _ = plan(tmp_path, [*base, manifests.configmap("old", {"K": "v"})], base)
    assert code == 0 and "configmap/default/old  deleted  removed: K  no consumer" in out


def test_wide_shows_every_cell_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "90")
    _, table, _ = plan(tmp_path, fleet("info"), fleet("debug"))
    assert max(map(len, table.splitlines()[2:])) <= 90  # the notes run on; the tables fit
    assert "…" in table
    code, wide, _ = plan(tmp_path, fleet("info"), fleet("debug"), "-o", "wide")
    assert code == 1 and "…" not in wide
    assert "held until approved (kube-nudge.io/approval: required): run `kube-nudge approve" in wide


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_a_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_color: str | None) -> str:
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("TERM", raising=False)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    main(["plan", "-f", write(tmp_path / "head.yaml", fleet("debug")),
          "--base", write(tmp_path / "base.yaml", fleet("info"))])  # fmt: skip
    return terminal.getvalue()


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("1", False), ("", True)])
def test_colour_on_a_terminal_unless_no_color(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_color: str | None, coloured: bool
) -> None:
    """https://no-color.org: NO_COLOR set and not empty turns colour off."""
    out = on_a_terminal(monkeypatch, tmp_path, no_color)
    assert ("\x1b[33mroll\x1b[0m" in out) is coloured
    assert ("\x1b[" in out) is coloured


@pytest.mark.parametrize(
    ("annotations", "says"),
    [
        ({"kube-nudge.io/enabled": "yes"}, 'kube-nudge.io/enabled must be "true" or "false"'),
        ({"kube-nudge.io/enabled": "true", "kube-nudge.io/max-rollouts": "lots"},
         "kube-nudge.io/max-rollouts must be"),
        ({"kube-nudge.io/enabled": "true", "kube-nudge.io/analysis": "Web Health"},
         "kube-nudge.io/analysis must name an analysis template"),
    ],
)  # fmt: skip
def test_an_annotation_the_controller_would_refuse_is_refused_with_its_words(
    tmp_path: Path, annotations: dict[str, str], says: str
) -> None:
    web = manifests.deployment("web", spec=manifests.env_consumer("LEVEL"), annotations=annotations)
    code, out, err = plan(tmp_path, [], [manifests.configmap("app", {"LEVEL": "a"}), web])
    assert (code, out) == (2, "")
    assert err.startswith("kube-nudge: -f ") and "document 2: Deployment web: " in err
    assert says in err and err.rstrip().endswith("Warning Event InvalidAnnotation)")
    assert err.count("\n") == 1


def test_an_empty_base_is_the_first_manifests_of_an_app(tmp_path: Path) -> None:
    """Before the first commit there is nothing to compare with: every workload is new,
    adopted as its pods start (those opted in), restarting nothing."""
    code, out, _ = plan(tmp_path, [], fleet("info"), "-o", "json")
    found = rows(out)
    assert code == 0 and {row["action"] for row in found.values()} == {"none"}
    assert found["Deployment/web"]["reason"].startswith("created by the input: kube-nudge adopts")
    assert found["Deployment/bystander"]["reason"].endswith("not opted in (kube-nudge.io/enabled)")


def test_a_wave_judged_by_an_analysis_says_which_template_gates_the_next(tmp_path: Path) -> None:
    def waves(level: str) -> list[Any]:
        gated = {**ENABLED, "kube-nudge.io/analysis": "web-health"}
        return [
            manifests.configmap("app", {"LEVEL": level}),
            *(manifests.deployment(name, spec=manifests.env_consumer("LEVEL"),
                                   annotations={**gated, "kube-nudge.io/rollout-order": order})
              for name, order in (("first", "1"), ("second", "2"))),
        ]  # fmt: skip

    code, out, _ = plan(tmp_path, waves("info"), waves("debug"), "-o", "json")
    found = rows(out)
    assert code == 1
    assert found["Deployment/first"]["reason"].endswith(
        "then analysis web-health judges it: it counts as complete only once that passes, "
        "and as failed when it fails; wave 1"
    )
    assert found["Deployment/second"]["reason"].endswith("wave 2, after order 1: first completes")


def test_a_subpath_of_an_items_volume_whose_source_no_manifest_names_is_not_held(
    tmp_path: Path,
) -> None:
    """Offline, a source the input doesn't name is taken to exist with every key a reader
    reads or requires: the items' keys too, not only the one its subPath mount shows."""
    volume = {"name": "v", "configMap": {"name": "app", "items": [
        {"key": "a", "path": "a.conf"}, {"key": "b", "path": "b.conf"}]}}  # fmt: skip
    spec = manifests.pod_spec(
        containers=[{"name": "app", "image": "x:1",
                     "envFrom": [{"configMapRef": {"name": "other"}}],
                     "volumeMounts": [{"name": "v", "mountPath": "/a.conf", "subPath": "a.conf"}]}],
        volumes=[volume],
    )  # fmt: skip
    web = manifests.deployment("web", spec=spec, annotations=ENABLED)

    def given(level: str) -> list[Any]:
        return [manifests.configmap("other", {"LEVEL": level}), web]

    code, out, _ = plan(tmp_path, given("info"), given("debug"), "-o", "json")
    assert (code, rows(out)["Deployment/web"]["action"]) == (1, "roll")


def test_a_window_hold_names_its_opening_once(tmp_path: Path) -> None:
    def given(level: str) -> list[Any]:
        window = {**ENABLED, "kube-nudge.io/rollout-window": "Sun 03:00-03:01 UTC"}
        return [manifests.configmap("app", {"LEVEL": level}),
                manifests.deployment("web", spec=manifests.env_consumer("LEVEL"),
                                     annotations=window)]  # fmt: skip

    _, out, _ = plan(tmp_path, given("a"), given("b"), "-o", "wide")
    [line] = [line for line in out.splitlines() if line.startswith("default/Deployment/web ")]
    assert line.count(" UTC") == 2  # the opening, and the window's own words
    assert "at the latest" not in line
