"""The steps of ``kube-nudge-dev release`` that need no registry: one version everywhere (a
mismatch is one line), the chart staged with the pushed image's digest, what it reads from
helm and syft, and every flag checked (one line, exit code 2)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from kube_nudge_dev.cli import build_parser, main
from kube_nudge_dev.release import (
    CHART_DIR,
    ReleaseError,
    check_image_version,
    check_versions,
    declared_versions,
    parse_request,
    pushed_digest,
    sbom_package_kinds,
    stage_chart,
)

REPO = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "ab" * 32


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The files a release reads its version from, copied."""
    for name in ("pyproject.toml", "devtools/pyproject.toml", "CHANGELOG.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / CHART_DIR, tmp_path / CHART_DIR)
    return tmp_path


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_checkout_names_one_version_everywhere() -> None:
    version = check_versions(REPO)
    assert set(declared_versions(REPO).values()) == {version}


@pytest.mark.parametrize(
    ("path", "old", "where"),
    [
        (f"{CHART_DIR}/Chart.yaml", "\nversion: ", "Chart.yaml version"),
        (f"{CHART_DIR}/Chart.yaml", '\nappVersion: "', "Chart.yaml appVersion"),
        ("CHANGELOG.md", "\n## ", "CHANGELOG.md"),
        ("devtools/pyproject.toml", '\nversion = "', "devtools/pyproject.toml"),
    ],
)
def test_a_version_that_disagrees_fails_in_one_line(
    checkout: Path, path: str, old: str, where: str
) -> None:
    _rewrite(checkout / path, old, f"{old}9.")
    with pytest.raises(ReleaseError) as failed:
        check_versions(checkout)
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"version mismatch: pyproject.toml says {check_versions(REPO)}")
    assert where in message


def _newest_heading(changelog: Path, heading: str) -> None:
    changelog.write_text(re.sub(r"^## .*$", heading, changelog.read_text(), count=1, flags=re.M))


def test_a_tag_must_name_the_version_and_a_dated_changelog_entry(checkout: Path) -> None:
    version = check_versions(checkout)
    with pytest.raises(ReleaseError, match=f"says {version}, the tag v9.9.9$"):
        check_versions(checkout, "v9.9.9")
    _newest_heading(checkout / "CHANGELOG.md", f"## {version} (unreleased)")
    assert check_versions(checkout) == version  # a dry run may release an unreleased entry
    with pytest.raises(ReleaseError, match=r"still \(unreleased\): date it to tag v"):
        check_versions(checkout, f"v{version}")
    _newest_heading(checkout / "CHANGELOG.md", f"## {version} (2026-12-01)")
    assert check_versions(checkout, f"v{version}") == version


def test_the_images_version_must_be_the_releases() -> None:
    check_image_version("0.1.0", "kube-nudge 0.1.0\n")
    with pytest.raises(
        ReleaseError, match=r"the image's `kube-nudge --version` says kube-nudge 0\.2"
    ):
        check_image_version("0.1.0", "kube-nudge 0.2.0\n")


def test_the_staged_chart_runs_the_pushed_image_by_digest(tmp_path: Path) -> None:
    version = check_versions(REPO)
    staged = stage_chart(REPO, tmp_path, version, "127.0.0.1:5000/kube-nudge", DIGEST)
    values = yaml.safe_load((staged / "values.yaml").read_text())
    assert values["image"]["repository"] == "127.0.0.1:5000/kube-nudge"
    assert values["image"]["digest"] == DIGEST
    assert values["agent"]["image"] == {"repository": "", "tag": "", "digest": ""}
    original = (REPO / CHART_DIR / "values.yaml").read_text().splitlines()
    changed = [line for line in (staged / "values.yaml").read_text().splitlines()
               if line not in original]  # fmt: skip
    assert changed == ["  repository: 127.0.0.1:5000/kube-nudge", f'  digest: "{DIGEST}"']


def test_the_digest_helm_push_prints_is_read() -> None:
    printed = f"Pushed: 127.0.0.1:5000/charts/kube-nudge:0.1.0\nDigest: {DIGEST}\n"
    assert pushed_digest(printed, "helm push") == DIGEST
    with pytest.raises(ReleaseError, match="helm push printed no digest"):
        pushed_digest("Pushed: somewhere\n", "helm push")


def test_the_sboms_packages_are_counted_by_kind() -> None:
    document = {"components": [
        {"name": "aiohttp", "purl": "pkg:pypi/aiohttp@3.14.5"},
        {"name": "libc6", "purl": "pkg:deb/debian/libc6@2.36?arch=amd64"},
        {"name": "python", "type": "application"},
    ]}  # fmt: skip
    assert sbom_package_kinds(document) == {"pypi": ["aiohttp"], "deb": ["libc6"]}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--registry", "https://ghcr.io/x"], "--registry 'https://ghcr.io/x': want HOST"),
        (["--ca", "/etc/hostname"], "--ca '/etc/hostname': want a CA file, with --registry"),
        (["--key", "/nonexistent.key"], "--key '/nonexistent.key': want a cosign private key"),
        (["--keyless"], "--keyless: needs --registry and --identity"),
        (["--tag", "0.1.0"], "--tag '0.1.0': want vX.Y.Z"),
        (["--base", ""], "--base '': want dev or an image pinned by digest, NAME@sha256:<64"),
        (["--base", "python:3.11-slim"], "--base 'python:3.11-slim': want dev or an image pinned"),
        (["--base", "python@sha256:abc"], "--base 'python@sha256:abc': want dev or an image"),
        (["--base", f"python {DIGEST}"], "--base 'python sha256:"),
        (["--repo", "/"], "--repo '/': not a kube-nudge checkout"),
        (["--platforms", "linux/arm64,linux/arm64"], "--platforms 'linux/arm64,linux/arm64': want"),
        (["--platforms", "linux/s390x"], "--platforms 'linux/s390x': want some of linux/amd64,"),
    ],
)
def test_every_flag_is_checked_in_one_line_with_exit_code_2(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    assert main(["release", "--repo", str(REPO), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kube-nudge-dev release: {message}") and err.count("\n") == 1, err


@pytest.mark.parametrize("base", ["dev", f"python:3.11-slim@{DIGEST}",
                                  f"docker.io/library/python@{DIGEST}"])  # fmt: skip
def test_the_base_is_dev_or_pinned_by_digest(base: str) -> None:
    args = build_parser().parse_args(["release", "--repo", str(REPO), "--base", base])
    assert parse_request(args).base == base
