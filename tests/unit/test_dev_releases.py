"""Which Kubernetes release the dev cluster builds and runs: one pinned patch per supported
minor, picked by ``--kube-version`` or ``$KUBE_NUDGE_KUBE_VERSION``, each with a wrapper
module and a cache directory of its own."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kube_nudge.model.kubeversion import NEWEST, SUPPORTED_MINORS
from kube_nudge_dev import build
from kube_nudge_dev.cli import main
from kube_nudge_dev.releases import (
    DEFAULT_MINOR,
    ENV,
    PINNED,
    UnknownRelease,
    every,
    parse_release,
    release,
    selected,
)


def test_one_pinned_patch_and_one_wrapper_module_per_supported_minor() -> None:
    assert sorted(PINNED) == list(SUPPORTED_MINORS)
    assert DEFAULT_MINOR in SUPPORTED_MINORS
    gomod = build._gomod_dir()
    for kube in every():
        assert kube.version.startswith(f"v1.{kube.minor}.")
        module = (gomod / kube.module / "go.mod").read_text()
        assert re.search(rf"\tk8s.io/kubernetes {kube.version}( // indirect)?\n", module), kube
        assert f"k8s.io/api => k8s.io/api v0.{kube.version.removeprefix('v1.')}\n" in module
        assert (gomod / kube.module / "go.sum").is_file()
    assert sorted(p.name for p in gomod.iterdir() if p.name.startswith("kube-")) == [
        f"kube-1.{minor}" for minor in SUPPORTED_MINORS
    ]
    assert every()[-1].minor == NEWEST


UNSUPPORTED = "is not a supported Kubernetes minor: use one of 1.34, 1.35, 1.36, 1.37"


@pytest.mark.parametrize("text", ["1.34", "v1.34", "v1.34.4", "1.34.4", " 1.34 "])
def test_spellings_of_a_release(text: str) -> None:
    assert parse_release(text) == release(34)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.33", f"'1.33' {UNSUPPORTED}"),
        ("2.34", f"'2.34' {UNSUPPORTED}"),
        ("latest", f"'latest' {UNSUPPORTED}"),
        ("v1.34.2", "'v1.34.2': only v1.34.4 of 1.34 is pinned; use 1.34 or v1.34.4"),
    ],
)
def test_unknown_releases_name_the_choices(text: str, message: str) -> None:
    with pytest.raises(UnknownRelease) as raised:
        parse_release(text)
    assert str(raised.value) == message


def test_the_environment_picks_the_release(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert selected() == release(DEFAULT_MINOR)
    monkeypatch.setenv(ENV, "1.36")
    assert selected() == release(36)
    assert build.chosen() == release(36)
    assert build.chosen(release(34)) == release(34)  # a flag wins over the environment
    monkeypatch.setenv(ENV, "1.3")
    with pytest.raises(build.BuildError, match=rf"^{ENV}='1.3' is not a supported"):
        build.chosen()


def test_each_release_has_its_own_cache_directory() -> None:
    dirs = {build.bin_cache_dir(kube).parent.name for kube in every()}
    assert len(dirs) == len(SUPPORTED_MINORS)
    for kube in every():
        assert build.bin_cache_dir(kube).parent.name.startswith(f"controlplane-{kube.version}-")


def test_a_release_id_never_follows_another_release_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = {kube.minor: build._version_id(kube) for kube in every()}
    changed = tmp_path / "gomod"
    shutil.copytree(build._gomod_dir(), changed)
    with (changed / "kube-1.34" / "go.mod").open("a") as module:
        module.write("// changed\n")
    monkeypatch.setattr(build, "_gomod_dir", lambda: changed)
    after = {kube.minor: build._version_id(kube) for kube in every()}
    assert after[34] != before[34]
    assert {m: i for m, i in after.items() if m != 34} == {
        m: i for m, i in before.items() if m != 34
    }


def test_the_kube_ldflags_stamp_the_release() -> None:
    flags = build._recipe("kube-apiserver", release(36)).ldflags
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    assert build._recipe("kube-apiserver", release(36)).module == "kube-1.36"


@pytest.mark.parametrize("command", ["cluster", "build"])
def test_an_unknown_kube_version_is_one_line_and_exit_code_2(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--kube-version", "1.30"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"kube-nudge-dev {command}: --kube-version '1.30' is not a supported Kubernetes "
        "minor: use one of 1.34, 1.35, 1.36, 1.37\n"
    )
