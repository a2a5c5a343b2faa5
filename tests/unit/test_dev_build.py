"""The control-plane cache key depends on what is built, never on where the code lives."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from kube_nudge_dev import build
from kube_nudge_dev.releases import DEFAULT_MINOR, release

# Changing this id makes every machine rebuild Kubernetes (40 min on a loaded 2-core machine):
# only a change of a pinned version or of a wrapper module in gomod/ may change it.
EXPECTED_ID = "44c998931480"
DEFAULT = release(DEFAULT_MINOR)


def test_version_id_is_pinned() -> None:
    assert build._version_id(DEFAULT) == EXPECTED_ID
    assert (
        build.bin_cache_dir(DEFAULT).parent.name
        == f"controlplane-{build.KUBERNETES_VERSION}-{EXPECTED_ID}"
    )


def test_version_id_does_not_depend_on_the_install_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "somewhere" / "else" / "gomod"
    shutil.copytree(build._gomod_dir(), moved)
    (moved / "etcd" / "notes.txt").write_text("not part of the build\n")
    monkeypatch.setattr(build, "_gomod_dir", lambda: moved)
    assert build._version_id(DEFAULT) == EXPECTED_ID


def test_version_id_follows_the_wrapper_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = tmp_path / "gomod"
    shutil.copytree(build._gomod_dir(), changed)
    with (changed / "etcd" / "main.go").open("a") as main:
        main.write("// changed\n")
    monkeypatch.setattr(build, "_gomod_dir", lambda: changed)
    assert build._version_id(DEFAULT) != EXPECTED_ID


def test_helm_has_its_own_pinned_cache() -> None:
    # a helm bump never rebuilds the control plane, nor the reverse
    assert build.helm_cache_dir().parent.name == f"helm-{build.HELM_VERSION}"
    assert build.helm_cache_dir().parent != build.bin_cache_dir(DEFAULT).parent
    assert "helm" not in build.COMPONENTS


def test_argo_rollouts_builds_the_version_its_wrapper_module_requires() -> None:
    go_mod = (build._gomod_dir() / "argo-rollouts" / "go.mod").read_text()
    assert f"\tgithub.com/argoproj/argo-rollouts {build.ARGO_ROLLOUTS_VERSION} " in go_mod
    assert f"tool {build.ARGO_ROLLOUTS.package}\n" in go_mod
    assert build.ARGO_ROLLOUTS.home().name.startswith(
        f"rollouts-controller-{build.ARGO_ROLLOUTS_VERSION}-"
    )


def test_argo_rollouts_cache_follows_its_toolchain_and_flags() -> None:
    home = build.ARGO_ROLLOUTS.home()
    newer = dataclasses.replace(build.ARGO_ROLLOUTS, toolchain="go1.27.4")
    flags = dataclasses.replace(build.ARGO_ROLLOUTS, ldflags="-s")
    assert len({home, newer.home(), flags.home()}) == 3


def test_the_secrets_store_csi_driver_builds_the_version_its_wrapper_module_requires() -> None:
    go_mod = (build._gomod_dir() / "secrets-store-csi" / "go.mod").read_text()
    version = build.SECRETS_STORE_CSI_VERSION
    assert f"\tsigs.k8s.io/secrets-store-csi-driver {version}\n" in go_mod
    assert f"tool {build.SECRETS_STORE_CSI_DRIVER.package}\n" in go_mod
    # the one dependency the module proxy does not serve, and only that, stands in
    assert [line for line in go_mod.splitlines() if line.startswith("replace")] == [
        "replace monis.app/mlog => ./mlog"
    ]
    names = [tool.home().name for tool in build.SECRETS_STORE_CSI]
    assert [name.rsplit("-", 1)[0] for name in names] == [
        f"secrets-store-csi-driver-{version}",
        f"csi-registrar-{version}",
        f"csi-files-provider-{version}",
    ]


def test_the_secrets_store_csi_caches_follow_every_file_of_their_wrapper_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = [tool.home() for tool in build.SECRETS_STORE_CSI]
    for changed_file in ("provider/main.go", "mlog/mlog.go"):
        changed = tmp_path / changed_file.replace("/", "-") / "gomod"
        shutil.copytree(build._gomod_dir(), changed)
        with (changed / "secrets-store-csi" / changed_file).open("a") as source:
            source.write("// changed\n")
        monkeypatch.setattr(build, "_gomod_dir", lambda changed=changed: changed)
        after = [tool.home() for tool in build.SECRETS_STORE_CSI]
        assert all(old != new for old, new in zip(before, after, strict=True)), changed_file
