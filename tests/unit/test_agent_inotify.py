"""What wakes the agent's loop: inotify on the watched directories (the kubelet's ``..data``
rename, a plain directory's files), ``wake()`` for a prompt stop, and polling where inotify
can't be had or isn't wanted. Real directories and the real kernel; a wait that returns
True was woken, False timed out (no test measures how long anything took)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from kube_nudge.agent.inotify import Inotify, InotifyWakeup, Wakeup, open_wakeup
from tests.agent_support import WAIT, kubelet_write

QUIET = 0.05  # how long a wait that nothing should end is given before it times out


def _inotify(*dirs: Path) -> InotifyWakeup:
    wakeup = open_wakeup(tuple(str(d) for d in dirs), "auto")
    assert isinstance(wakeup, InotifyWakeup), "this kernel gave no inotify instance"
    return wakeup


def _drain(wakeup: Wakeup) -> None:
    while wakeup.wait(QUIET):
        pass


def test_the_kubelets_rename_over_data_wakes_the_loop(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"1"})
    wakeup = _inotify(target)
    try:
        assert wakeup.watched == {str(target)}
        assert wakeup.wait(QUIET) is False  # nothing happened: the timeout ends it
        # The kubelet's AtomicWriter up to its one atomic step: a new data directory and a
        # ..data_tmp link to it (events of their own, drained here) ...
        (target / "..2030_01_01_00_00_00.1").mkdir()
        (target / "..2030_01_01_00_00_00.1" / "app.conf").write_bytes(b"2")
        os.symlink("..2030_01_01_00_00_00.1", target / "..data_tmp")
        _drain(wakeup)
        # ... then the rename over ..data, which alone must wake the loop.
        os.rename(target / "..data_tmp", target / "..data")
        assert wakeup.wait(WAIT) is True
    finally:
        wakeup.close()


def test_a_whole_kubelet_update_wakes_it(tmp_path: Path) -> None:
    target = tmp_path / "config"
    kubelet_write(target, {"app.conf": b"1"})
    wakeup = _inotify(target)
    try:
        kubelet_write(target, {"app.conf": b"2"})
        assert wakeup.wait(WAIT) is True
    finally:
        wakeup.close()


def test_a_plain_directorys_file_written_wakes_it(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("1")
    wakeup = _inotify(tmp_path)
    try:
        (tmp_path / "a.conf").write_text("2")
        assert wakeup.wait(WAIT) is True
    finally:
        wakeup.close()


def test_a_directory_is_watched_once_it_appears_and_again_once_replaced(tmp_path: Path) -> None:
    target = tmp_path / "later"
    wakeup = _inotify(target)
    try:
        assert wakeup.watched == set()  # missing: the polls look for it meanwhile
        kubelet_write(target, {"a": b"1"})
        wakeup.wait(QUIET)  # the wait watches what exists now
        assert wakeup.watched == {str(target)}
        shutil.rmtree(target)
        assert wakeup.wait(WAIT) is True
        _drain(wakeup)
        assert wakeup.watched == set()
        kubelet_write(target, {"a": b"2"})
        wakeup.wait(QUIET)
        assert wakeup.watched == {str(target)}
        kubelet_write(target, {"a": b"3"})
        assert wakeup.wait(WAIT) is True
    finally:
        wakeup.close()


@pytest.mark.parametrize("mode", ["auto", "poll"])
def test_wake_ends_a_wait_at_once(tmp_path: Path, mode: str) -> None:
    wakeup = open_wakeup((str(tmp_path),), mode)
    try:
        threading.Timer(QUIET, wakeup.wake).start()
        assert wakeup.wait(WAIT) is True
        assert wakeup.wait(QUIET) is False  # woken once, not for ever
    finally:
        wakeup.close()


def test_polling_when_asked_or_when_the_kernel_has_no_inotify_to_give(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    forced = open_wakeup((str(tmp_path),), "poll")
    assert type(forced) is Wakeup and forced.method == "polling"

    def exhausted() -> Inotify:
        raise OSError(errno.EMFILE, "inotify_init1: Too many open files")

    with caplog.at_level(logging.WARNING, "kube_nudge.agent"):
        fallback = open_wakeup((str(tmp_path),), "auto", exhausted)
    assert type(fallback) is Wakeup
    assert caplog.messages == [
        "no inotify: Too many open files (raise fs.inotify.max_user_instances); polling instead"
    ]
    (tmp_path / "a").write_text("x")
    assert fallback.wait(QUIET) is False  # nothing wakes a poll but the timer and wake()


def test_a_directory_inotify_refuses_is_polled_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Full(Inotify):
        def add(self, path: str) -> int:
            raise OSError(errno.ENOSPC, f"{path}: No space left on device")

    with caplog.at_level(logging.WARNING, "kube_nudge.agent"):
        wakeup = InotifyWakeup((str(tmp_path),), Full())
        wakeup.wait(0)
        wakeup.wait(0)
    wakeup.close()
    assert caplog.messages == [
        f"cannot watch {tmp_path} by inotify: No space left on device (raise "
        "fs.inotify.max_user_watches); polling it instead"
    ]
