"""The licence the project declares (pyproject: Apache-2.0) is in the repository, whole,
and ships in the wheel's metadata; the repository's guides for contributors and security
reports are where people look for them."""

from __future__ import annotations

import email.parser
import re
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LICENSE = REPO / "LICENSE"


def test_the_license_is_the_whole_apache_2_0_text() -> None:
    text = LICENSE.read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    for section in ("1. Definitions.", "4. Redistribution.", "9. Accepting Warranty"):
        assert section in text
    assert "END OF TERMS AND CONDITIONS" in text
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["license"] == "Apache-2.0"
    assert pyproject["license-files"] == ["LICENSE"]


def test_the_wheel_ships_the_license(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [metadata_name] = [m for m in archive.namelist() if m.endswith(".dist-info/METADATA")]
        info = metadata_name.removesuffix("METADATA")
        assert archive.read(f"{info}licenses/LICENSE") == LICENSE.read_bytes()
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]


@pytest.mark.parametrize(
    ("guide", "says"),
    [
        ("CONTRIBUTING.md", ["make test", "make lint", "make bench", "docs/design.md",
                             "tests/unit", "tests/integration"]),
        ("SECURITY.md", ["Secret values", "hashes are keyed", "RBAC", "Report a vulnerability"]),
    ],
)  # fmt: skip
def test_the_guides_are_there(guide: str, says: list[str]) -> None:
    text = (REPO / guide).read_text()
    for words in says:
        assert words in text, (guide, words)
    # Every relative link of the guide leads to a file of the repository.
    for target in _links(text):
        assert (REPO / target.split("#")[0]).exists(), (guide, target)


def _links(markdown: str) -> list[str]:
    found = re.findall(r"\]\(([^)]+)\)", markdown)
    return [t for t in found if not t.startswith(("http://", "https://", "mailto:", "#"))]
