"""What building a foreign architecture's image needs, said in one line: qemu-user-static's
interpreter, binfmt_misc mounted, its handler registered (which ``enable`` does as root from
the file qemu-user-static ships)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kube_nudge_dev import multiarch


def test_an_architecture_with_no_qemu_cpu_is_refused() -> None:
    assert multiarch.missing("s390x") == ["a qemu CPU for 's390x' (this builds arm64)"]


def test_an_unmounted_binfmt_misc_and_a_missing_handler_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(multiarch, "BINFMT", tmp_path / "binfmt_misc")
    (tmp_path / "binfmt_misc").mkdir()
    lacks = multiarch.missing("arm64")
    assert f"binfmt_misc mounted at {tmp_path / 'binfmt_misc'}" in lacks
    (tmp_path / "binfmt_misc" / "register").touch()
    assert "the binfmt handler qemu-aarch64 registered and enabled" in multiarch.missing("arm64")
    (tmp_path / "binfmt_misc" / "qemu-aarch64").write_text("disabled\n")
    assert "the binfmt handler qemu-aarch64 registered and enabled" in multiarch.missing("arm64")


def test_what_cannot_be_enabled_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(multiarch, "BINFMT", tmp_path / "binfmt_misc")
    monkeypatch.setattr(multiarch, "BINFMT_CONF", tmp_path / "binfmt.d")  # no qemu's file
    (tmp_path / "binfmt_misc").mkdir()
    (tmp_path / "binfmt_misc" / "register").touch()
    with pytest.raises(multiarch.EmulationUnavailable) as refused:
        multiarch.enable("arm64")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("building arm64 images needs ")
    assert message.endswith("`apt-get install qemu-user-static` and, as root, this again")
