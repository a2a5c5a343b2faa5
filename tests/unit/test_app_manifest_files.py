"""Reading ``-f`` inputs as ``kubectl apply -f`` does: documents, lists, directories, stdin,
and one-line errors that never show a value."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kube_nudge.app.manifest_files import Manifest, read_manifests
from tests.manifest_verdicts_support import CASES, Case

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {LEVEL: info}\n"
SECRET = "apiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\n"


def names(found: list[Manifest]) -> list[str]:
    return [f"{m.kind}/{m.name}" for m in found]


def test_documents_lists_and_json_in_order(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(f"---\n{CONFIGMAP}---\n---\n{SECRET}")
    listed = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
        {"apiVersion": "v1", "kind": "ConfigMapList", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nested"}}]},
    ]}  # fmt: skip
    (tmp_path / "b.json").write_text(json.dumps(listed))
    found = read_manifests([str(tmp_path / "a.yaml"), str(tmp_path / "b.json")])
    assert names(found) == ["ConfigMap/app", "Secret/db", "Deployment/web", "ConfigMap/nested"]
    assert [m.namespace("team") for m in found[:2]] == ["team", "shop"]
    assert found[3].origin.endswith("b.json document 1 item 2 item 1")


def test_a_directory_takes_its_manifests_and_recursive_its_subdirectories(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(CONFIGMAP)
    (tmp_path / "README.md").write_text("# not a manifest")
    (tmp_path / "deeper").mkdir()
    (tmp_path / "deeper" / "db.yml").write_text(SECRET)
    assert names(read_manifests([str(tmp_path)])) == ["ConfigMap/app"]
    assert names(read_manifests([str(tmp_path)], recursive=True)) == ["ConfigMap/app", "Secret/db"]


def test_standard_input_is_dash() -> None:
    assert names(read_manifests(["-"], stdin=io.StringIO(CONFIGMAP))) == ["ConfigMap/app"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- a\n- b\n", "x.yaml document 1: want a Kubernetes object (a mapping), got a list"),
        ("kind: ConfigMap\nmetadata: {name: a}\n", "x.yaml document 1: want apiVersion and kind"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: a-}\n",
         "x.yaml document 1: a ConfigMap without metadata.name"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_file_and_document(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        read_manifests([str(path)])
    message = str(caught.value)
    assert says in message and "\n" not in message


def test_a_missing_file_is_named() -> None:
    with pytest.raises(ValueError, match=r"^-f 'nope\.yaml': no such file or directory$"):
        read_manifests(["nope.yaml"])


def test_no_value_reaches_an_error(tmp_path: Path) -> None:
    """A Secret whose value breaks the YAML: the message has the line, never the text."""
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData:\n"
                    "  password: 'hunter2: [\n")  # fmt: skip
    with pytest.raises(ValueError) as caught:
        read_manifests([str(path)])
    assert "hunter2" not in str(caught.value)


# -- what the API server would refuse -----------------------------------------------------


def refused(tmp_path: Path, text: str) -> str:
    """The one-line error reading ``text`` as x.yaml gives."""
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        read_manifests([str(path)])
    message = str(caught.value)
    assert "\n" not in message
    return message.removeprefix(f"-f {path} document 1: ")


@pytest.mark.parametrize("case", [c for c in CASES if c.refused is not None], ids=lambda c: c.id)
def test_what_the_api_server_refuses_is_refused_naming_object_and_field(
    tmp_path: Path, case: Case
) -> None:
    """The refused cases the integration test holds to the API server's verdict."""
    assert case.refused is not None
    assert case.refused in refused(tmp_path, case.text)


@pytest.mark.parametrize("case", [c for c in CASES if c.refused is None], ids=lambda c: c.id)
def test_what_the_api_server_takes_is_taken(tmp_path: Path, case: Case) -> None:
    """The taken cases the integration test holds to the API server's verdict."""
    (tmp_path / "ok.yaml").write_text(case.text)
    assert len(read_manifests([str(tmp_path / "ok.yaml")])) == 1


def test_a_workloads_spec_is_not_checked(tmp_path: Path) -> None:
    """Only ConfigMaps and Secrets are checked whole (the API server would refuse this)."""
    (tmp_path / "ok.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 'x'}\n"
    )
    assert names(read_manifests([str(tmp_path)])) == ["Deployment/web"]


def test_values_are_read_as_kubectl_sends_them(tmp_path: Path) -> None:
    """Go's YAML 1.1 scalars, and keys as sigs.k8s.io/yaml writes them."""
    (tmp_path / "ok.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
        "data: {on: 'x', 1.0: 'y', 0x1F: 'z', WHEN: 2024-01-02, AT: 12:30}\n"
    )
    (found,) = read_manifests([str(tmp_path)])
    assert found.obj["data"] == {"true": "x", "1": "y", "31": "z", "WHEN": "2024-01-02",
                                 "AT": "12:30"}  # fmt: skip


def test_a_merge_applies_in_document_order_as_kubectl_reads_it(tmp_path: Path) -> None:
    """go-yaml v2 (kubectl) reads a ``<<`` where it stands: over the keys before it, under
    those after it; of a list, the earlier mappings win. PyYAML lets every explicit key win,
    so ``plan`` once planned a change kubectl would not make."""
    (tmp_path / "merge.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
        "data:\n  A: '3'\n  <<: {A: '2', B: '1'}\n  C: x\n"
        "  <<: [{C: first, D: first}, {C: second, D: second, E: second}]\n"
    )
    (found,) = read_manifests([str(tmp_path)])
    assert found.obj["data"] == {"A": "2", "B": "1", "C": "first", "D": "first", "E": "second"}


def test_explicit_and_unknown_tags_are_read_as_kubectl_reads_them(tmp_path: Path) -> None:
    """Checked against kubectl v1.37.2 (``kubectl label --local -o json``): !!binary is its
    decoded text, !!timestamp and an unknown tag keep the text, !!set is a mapping of nulls,
    and an underscore between digits after a leading dot is still a float."""
    (tmp_path / "tags.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"
        "data: {A: !!binary aGk=, B: !!binary /w==, C: !!timestamp 2001-12-14, D: !custom 12,"
        " E: !custom y, F: ._1}\nbinaryData: !!set {x}\nextra: [.1_2, !custom [1]]\n"
    )
    (found,) = read_manifests([str(tmp_path)])
    assert found.obj["data"] == {"A": "hi", "B": "\ufffd", "C": "2001-12-14", "D": "12",
                                 "E": "y", "F": "._1"}  # fmt: skip
    assert (found.obj["binaryData"], found.obj["extra"]) == ({"x": None}, [0.12, [1]])


def test_no_secret_value_reaches_a_refusal(tmp_path: Path) -> None:
    message = refused(tmp_path, "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\n"
                                "data: {password: 'hunter2-not-base64'}\n")  # fmt: skip
    assert "hunter2" not in message


def test_no_objects_is_an_error_as_kubectl_apply_says(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "comments.yaml").write_text("# nothing yet\n---\n")
    for name in ("empty.yaml", "comments.yaml"):
        with pytest.raises(ValueError, match=r": no objects passed to apply$"):
            read_manifests([str(tmp_path / name)])
    assert read_manifests([str(tmp_path / "empty.yaml")], empty_ok=True) == []


def test_a_folder_of_subfolders_without_recursive_says_so(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "cm.yaml").write_text(CONFIGMAP)
    with pytest.raises(ValueError, match=r"no objects passed to apply \(.* -R reads them\)$"):
        read_manifests([str(tmp_path)])
    assert names(read_manifests([str(tmp_path)], recursive=True)) == ["ConfigMap/app"]


def test_the_same_object_twice_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(CONFIGMAP)
    (tmp_path / "b.yaml").write_text(CONFIGMAP.replace("info", "debug"))
    with pytest.raises(ValueError, match=r"b\.yaml document 1: ConfigMap app is also in .*a\.yaml"):
        read_manifests([str(tmp_path)])
    (tmp_path / "b.yaml").write_text(CONFIGMAP.replace("{name: app}", "{name: app, namespace: x}"))
    assert len(read_manifests([str(tmp_path)])) == 2  # another namespace: another object


def test_a_kustomization_is_sent_to_kustomize_build(tmp_path: Path) -> None:
    (tmp_path / "cm.yaml").write_text(CONFIGMAP)
    (tmp_path / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    hint = r"a Kustomization, not a manifest: render it first \(kustomize build .* \| kube-nudge"
    with pytest.raises(ValueError, match=hint):
        read_manifests([str(tmp_path)])
    with pytest.raises(ValueError, match=hint):
        read_manifests([str(tmp_path / "kustomization.yaml")])
    (tmp_path / "k.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"
    )
    with pytest.raises(ValueError, match=hint):
        read_manifests([str(tmp_path / "k.yaml")])
