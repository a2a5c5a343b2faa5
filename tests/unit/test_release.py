"""A release moves every version together (RELEASING.md): the distribution, the CLI, the dev
tools, the chart and the image tag it pulls by default, and the CHANGELOG's newest entry."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

import kube_nudge

REPO = Path(__file__).resolve().parents[2]


def _versions() -> dict[str, str]:
    chart = yaml.safe_load((REPO / "deploy/helm/kube-nudge/Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "deploy/helm/kube-nudge/values.yaml").read_text())
    return {
        "pyproject.toml": tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
            "version"
        ],
        "devtools/pyproject.toml": tomllib.loads((REPO / "devtools/pyproject.toml").read_text())[
            "project"
        ]["version"],
        "kube_nudge.__version__": kube_nudge.__version__,
        "Chart.yaml version": str(chart["version"]),
        "Chart.yaml appVersion": str(chart["appVersion"]),
        # An empty image tag means the chart's appVersion: the image moves with the chart.
        "values.yaml image.tag": values["image"]["tag"] or str(chart["appVersion"]),
    }


def test_every_version_a_release_ships_is_the_same() -> None:
    versions = _versions()
    assert len(set(versions.values())) == 1, versions


def test_the_changelogs_newest_entry_is_that_version() -> None:
    [version] = set(_versions().values())
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings and headings[0] == version, headings[:3]


def test_the_release_steps_name_every_file_the_test_reads() -> None:
    steps = (REPO / "RELEASING.md").read_text()
    for path in ("pyproject.toml", "src/kube_nudge/__init__.py", "devtools/pyproject.toml",
                 "Chart.yaml", "CHANGELOG.md", "git tag"):  # fmt: skip
        assert path in steps, path
