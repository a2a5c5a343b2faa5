"""`kube-nudge completion bash|zsh`: scripts generated from the parser, so every command and
flag completes. bash is driven for real (its completion function, as bash calls it on Tab);
zsh's script is checked for syntax and for what it hands to zsh's `_arguments`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kube_nudge.app.cli import COMMANDS, build_parser, main
from kube_nudge.app.completion_command import describe

BASH = shutil.which("bash")
ZSH = shutil.which("zsh")


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("completion")
    written = {}
    for shell in ("bash", "zsh"):
        path = directory / f"kube-nudge.{shell}"
        out = subprocess.run(
            [*_kube_nudge(), "completion", shell], capture_output=True, text=True, check=True,
            timeout=60,
        )  # fmt: skip
        path.write_text(out.stdout)
        written[shell] = path
    return written


def _kube_nudge() -> list[str]:
    return [sys.executable, "-m", "kube_nudge"]


def test_the_command_prints_a_script_and_refuses_other_shells(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -F _kube_nudge kube-nudge" in capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out.startswith("#compdef kube-nudge\n")
    with pytest.raises(SystemExit) as refused:
        main(["completion", "fish"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("kube-nudge: completion: argument shell: invalid choice: 'fish'")
    assert err.count("\n") == 1


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_the_bash_script_parses(scripts: dict[str, Path]) -> None:
    subprocess.run(["bash", "-n", str(scripts["bash"])], check=True, timeout=30)


def complete_bash(script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """What bash offers for the last of ``words`` (split as bash splits them, '=' apart)."""
    quoted = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        '_kube_nudge; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True, text=True, check=True, timeout=30, cwd=cwd,
    )  # fmt: skip
    return [line for line in out.stdout.splitlines() if line]


@pytest.mark.skipif(BASH is None, reason="no bash")
@pytest.mark.parametrize(
    ("words", "offered"),
    [
        (["kube-nudge", "st"], ["status"]),
        (["kube-nudge", ""], [c.name for c in COMMANDS] + ["--help", "--version"]),
        (["kube-nudge", "status", "--out"], ["--output"]),
        (["kube-nudge", "status", "--output", ""], ["table", "json"]),
        (["kube-nudge", "status", "--output", "=", "j"], ["json"]),
        (["kube-nudge", "status", "-o", "t"], ["table"]),
        (["kube-nudge", "run", "--log-format", "=", ""], ["text", "json"]),
        (["kube-nudge", "run", "--max-r"], ["--max-rollouts"]),
        (["kube-nudge", "wait", "conf"], ["configmap/"]),
        (["kube-nudge", "release", "s"], ["statefulset/"]),
        (["kube-nudge", "completion", ""], ["--help", "-h", "bash", "zsh"]),
        (["kube-nudge", "agent", "--watch-mode", ""], ["auto", "poll"]),
    ],
)
def test_bash_completes(scripts: dict[str, Path], words: list[str], offered: list[str]) -> None:
    assert sorted(complete_bash(scripts["bash"], words)) == sorted(offered)


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_completes_files_for_file_flags(scripts: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "kubeconfig.yaml").write_text("")
    (tmp_path / "other").write_text("")
    words = ["kube-nudge", "status", "--kubeconfig", "kube"]
    assert complete_bash(scripts["bash"], words, cwd=tmp_path) == ["kubeconfig.yaml"]
    words = ["kube-nudge", "run", "--hmac-key-file", "=", "oth"]
    assert complete_bash(scripts["bash"], words, cwd=tmp_path) == ["other"]


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_bash_completes_every_flag_of_every_command(scripts: dict[str, Path]) -> None:
    for command in describe(build_parser()):
        offered = set(complete_bash(scripts["bash"], ["kube-nudge", command.name, "-"]))
        flags = {name for flag in command.flags for name in flag.names}
        assert offered == flags, command.name


@pytest.mark.skipif(ZSH is None, reason="no zsh")
def test_the_zsh_script_parses(scripts: dict[str, Path]) -> None:
    subprocess.run(["zsh", "-n", str(scripts["zsh"])], check=True, timeout=30)


def zsh_calls(script: Path, words: list[str]) -> list[str]:
    """What the script hands to zsh's completion helpers for ``words`` (the cursor on the
    last one): `_describe` and `_arguments` stand in, printing their arguments."""
    quoted = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
    program = (
        "_describe() { print -r -- describe; print -rl -- ${(P)${@[-1]}} }\n"
        '_arguments() { print -r -- arguments; print -rl -- "$@" }\n'
        "compdef() { : }\n"
        f"source {script}\n"
        f"words=({quoted}); CURRENT={len(words)}\n"
        "_kube_nudge\n"
    )
    out = subprocess.run(
        ["zsh", "-f", "-c", program], capture_output=True, text=True, check=True, timeout=30
    )
    return out.stdout.splitlines()


@pytest.mark.skipif(ZSH is None, reason="no zsh")
def test_zsh_offers_the_commands_then_each_commands_flags(scripts: dict[str, Path]) -> None:
    calls = zsh_calls(scripts["zsh"], ["kube-nudge", "st"])
    assert calls[0] == "describe"
    assert "status:show which pods run which config (exit 1 on drift)" in calls
    assert len(calls) == 1 + len(COMMANDS)
    for command in describe(build_parser()):
        calls = zsh_calls(scripts["zsh"], ["kube-nudge", command.name, "--"])
        assert calls[0] == "arguments" and calls[1] == "-s", command.name
        specs = "\n".join(calls[2:])
        for flag in command.flags:
            for name in flag.names:
                assert name in specs, (command.name, name)
    status = zsh_calls(scripts["zsh"], ["kube-nudge", "status", "-o"])
    assert any(line.endswith("[output format]:output:(table json)") for line in status)
    wait = zsh_calls(scripts["zsh"], ["kube-nudge", "wait", "c"])
    assert any(line.startswith("*:KIND/NAME:(configmap/ secret/") for line in wait)
    shells = zsh_calls(scripts["zsh"], ["kube-nudge", "completion", ""])
    assert "1:shell:(bash zsh)" in shells
