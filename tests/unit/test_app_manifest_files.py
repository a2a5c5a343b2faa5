"""Reading ``-f`` inputs as ``kubectl apply -f`` does: documents, lists, directories, stdin,
and one-line errors that never show a value."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kube_nudge.app.manifest_files import Manifest, read_manifests

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
        ("kind: [unclosed\n", "x.yaml: not valid YAML or JSON (line 2)"),
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
