"""README.md's links lead somewhere. The docs site's build (`make docs`, strict) checks the
links of docs/; README stays out of the site, so its links into the pages are checked here:
every relative link names a file of the repository, and its #anchor a heading of that page
(slugged as the site's table of contents slugs it)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\((?!https?://)([^)#\s]*)(?:#([^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc makes it (its default ``slugify``)."""
    text = re.sub(r"<[^>]+>|`", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    return {slug(h) for h in HEADING.findall(text)}


def broken(readme: str, root: Path = REPO) -> list[str]:
    """The links of ``readme`` that lead nowhere."""
    found = []
    for target, anchor in LINK.findall(readme):
        page = root / target if target else root / "README.md"
        if not page.exists():
            found.append(f"{target}: no such file")
        elif anchor and page.suffix == ".md" and anchor not in anchors(page):
            found.append(f"{target}#{anchor}: no such heading")
    return found


def test_every_link_of_the_readme_leads_somewhere() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(LINK.findall(readme)) > 10  # the parse found them
    assert broken(readme) == []


def test_a_link_to_a_missing_page_or_heading_is_found() -> None:
    text = "[a](docs/install.md#build-the-image) [b](docs/nope.md) [c](docs/install.md#nope)"
    assert broken(text) == ["docs/nope.md: no such file", "docs/install.md#nope: no such heading"]


def test_headings_slug_as_the_site_slugs_them() -> None:
    heading = "Strategy `hot`: reload in place where the pods can see the change"
    assert slug(heading) == "strategy-hot-reload-in-place-where-the-pods-can-see-the-change"
    assert slug("Replacing pods by selector: `kube-nudge.io/pod-selector`") == (
        "replacing-pods-by-selector-kube-nudgeiopod-selector"
    )
