"""Change detection on real directories: the kubelet's ``..data`` swap, plain files, missing
directories, debounce (by a clock that moves only when told to), and the content hash."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
from pathlib import Path

import pytest

from kube_nudge.agent.watch import (
    MISSING,
    Watcher,
    dir_hash,
    directory_files,
    fingerprint,
    loaded_hash,
    snapshot,
)
from kube_nudge.agentwire import key_id
from tests.agent_support import KEY, kubelet_write
from tests.unit.fakes import FakeClock


def _hash(target: Path) -> str:
    files = directory_files(str(target))
    assert files is not None
    return dir_hash(KEY, files)


def _watcher(*dirs: Path, debounce: float = 1.0) -> tuple[Watcher, FakeClock]:
    clock = FakeClock()
    return Watcher(tuple(str(d) for d in dirs), debounce, clock=clock.monotonic), clock


def test_a_kubelet_swap_is_reported_once_after_the_debounce(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"a=1\n"})
    watcher, clock = _watcher(target)
    before = watcher.baseline()
    assert watcher.poll() is None  # nothing changed

    kubelet_write(target, {"app.conf": b"a=2\n"})
    assert watcher.poll() is None and watcher.pending  # seen, not settled yet
    clock.advance(0.5)
    assert watcher.poll() is None
    clock.advance(0.5)
    after = watcher.poll()
    assert after is not None and after != before
    assert after == snapshot((str(target),))
    clock.advance(5)
    assert [watcher.poll() for _ in range(3)] == [None, None, None]  # reported once


def test_a_debounce_shorter_than_the_poll_settles_at_the_next_due_poll(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"a=1\n"})
    watcher, clock = _watcher(target, debounce=0.25)
    watcher.baseline()
    assert watcher.next_poll_in(1.0) == 1.0  # nothing pending: the poll interval
    kubelet_write(target, {"app.conf": b"a=2\n"})
    clock.advance(0.1)
    assert watcher.poll() is None
    clock.advance(0.1)
    # When the change settles, not a poll later (the fake clock counts in float32 steps).
    assert watcher.next_poll_in(1.0) == pytest.approx(0.15, abs=1e-6)
    clock.advance(0.15)
    assert watcher.next_poll_in(1.0) == pytest.approx(0.0, abs=1e-6)
    assert watcher.poll() is not None
    assert watcher.next_poll_in(1.0) == 1.0


def test_the_kubelet_fingerprint_is_the_data_link_alone(tmp_path: Path) -> None:
    target = tmp_path / "config"
    ts_dir = kubelet_write(target, {"a": b"1"})
    assert fingerprint(str(target)) == ("kubelet", ts_dir.name)


def test_changes_within_the_debounce_make_one_report_of_the_final_state(tmp_path: Path) -> None:
    target = tmp_path / "plain"
    target.mkdir()
    (target / "a.conf").write_text("1")
    watcher, clock = _watcher(target, debounce=2.0)
    watcher.baseline()
    (target / "a.conf").write_text("22")
    assert watcher.poll() is None
    clock.advance(1)
    (target / "b.conf").write_text("new")
    assert watcher.poll() is None
    clock.advance(1)  # 2 s after the first change, though 1 s after the last
    reported = watcher.poll()
    assert reported == snapshot((str(target),))
    clock.advance(10)
    assert watcher.poll() is None


def test_a_rewrite_with_the_same_content_is_reported_with_the_same_hash(tmp_path: Path) -> None:
    target = tmp_path / "plain"
    target.mkdir()
    (target / "a.conf").write_text("same")
    watcher, _ = _watcher(target, debounce=0)
    before = watcher.baseline()
    os.utime(target / "a.conf", ns=(1, 1))  # the fingerprint moves, the content does not
    assert watcher.poll() == before  # the agent compares it with what the app runs


def test_a_missing_directory_is_waited_for(tmp_path: Path) -> None:
    target = tmp_path / "later"
    watcher, _ = _watcher(target, debounce=0)
    missing = watcher.baseline()
    assert watcher.problems == {str(target): "missing"}
    assert fingerprint(str(target)) == MISSING
    assert watcher.poll() is None
    kubelet_write(target, {"app.conf": b"x"})
    appeared = watcher.poll()
    assert appeared is not None and appeared != missing
    assert watcher.problems == {}


def test_the_hash_covers_content_and_paths_not_the_kubelets_entries(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"a.conf": b"1", "sub/b.conf": b"2"})
    kubelet_hash = _hash(target)
    # The same files in a plain directory at the same path hash the same: the ``..`` entries
    # and the symlinks into ``..data`` are not part of it.
    shutil.rmtree(target)
    (target / "sub").mkdir(parents=True)
    (target / "a.conf").write_bytes(b"1")
    (target / "sub" / "b.conf").write_bytes(b"2")
    (target / "..hidden").write_bytes(b"ignored")
    assert _hash(target) == kubelet_hash
    (target / "sub" / "b.conf").write_bytes(b"3")
    assert _hash(target) != kubelet_hash
    (target / "sub" / "b.conf").write_bytes(b"2")
    (target / "sub" / "b.conf").rename(target / "sub" / "c.conf")
    assert _hash(target) != kubelet_hash


def test_the_hash_is_reproducible_from_its_documented_format(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"b": b"2", "a": b"1", "sub/c": b"3"})
    digest = hmac.new(KEY, b"kube-nudge-agent/v2\n", hashlib.sha256)
    for rel, content in ((b"a", b"1"), (b"b", b"2"), (b"sub/c", b"3")):
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(hashlib.sha256(content).digest())
    assert _hash(target) == digest.hexdigest()
    key_name = hmac.new(KEY, b"kube-nudge-agent/key-id", hashlib.sha256).hexdigest()[:8]
    assert key_id(KEY) == key_name
    missing = str(tmp_path / "missing")
    assert json.loads(loaded_hash((str(target), missing), KEY, key_name)) == {
        "dirs": {str(target): digest.hexdigest(), missing: None}, "key": key_name,
    }  # fmt: skip


def test_the_hash_is_always_keyed(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "password").write_text("hunter2")
    files = directory_files(str(tmp_path / "s"))
    assert files is not None
    keyed = dir_hash(b"k" * 16, files)
    assert keyed == dir_hash(b"k" * 16, files)
    assert keyed != dir_hash(b"j" * 16, files)
    with pytest.raises(ValueError, match="needs a key"):
        dir_hash(b"", files)
