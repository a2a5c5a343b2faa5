"""Waking the watch loop when a watched directory changes: the kernel's inotify, or a timer.

The standard library has no inotify, and the agent imports nothing else, so the three libc
calls are made through ``ctypes``. Each watched directory gets one watch for its own entries:
the kubelet's AtomicWriter changes a volume by creating a ``..<timestamp>`` directory and a
``..data_tmp`` link and renaming that link over ``..data`` (``IN_MOVED_TO ..data``), then
removing the old directory, so every update of a ConfigMap or Secret volume is seen as it
happens. A plain directory is seen when a file in it is written, created, moved or removed;
changes deeper down (a subdirectory's files) are not, and are found by the loop's polls,
which go on as a safety net (``--poll-interval``) whatever wakes the loop.

An event only wakes the loop: what changed is still decided by the watcher's fingerprints,
so an event that changes nothing (the kubelet's other entries, a queue overflow) costs one
look and no reload. A directory that is missing cannot be watched: it is watched from the
first wait after it appears (until then the polls see it), and again after it is replaced.
Where inotify can't be had (no such call, no instance left: ``fs.inotify.max_user_instances``)
the loop polls; where one directory can't be watched (``max_user_watches``), it is polled.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import select
import struct
import threading
from collections.abc import Callable

log = logging.getLogger("kube_nudge.agent")

IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: A directory's own entries: a file written (closed after writing, not each write), its
#: mode or times changed, an entry created, moved in or out, or removed; and the directory
#: itself removed or moved (its watch then ends, and is made again on the new directory).
MASK = (
    IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_READ_SIZE = 64 * 1024

Event = tuple[int, int, bytes]  # (watch descriptor, mask, name)


class Inotify:
    """One inotify instance: ``add`` a directory, ``read`` what happened. Linux only."""

    def __init__(self, libc: ctypes.CDLL | None = None) -> None:
        """Open an instance; OSError when the kernel or libc has none to give."""
        try:
            self._libc = libc if libc is not None else ctypes.CDLL(None, use_errno=True)
            init = self._libc.inotify_init1
            self._add = self._libc.inotify_add_watch
            self._rm = self._libc.inotify_rm_watch
        except (OSError, AttributeError) as exc:
            raise OSError(errno.ENOSYS, f"no inotify in the C library ({exc})") from None
        init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add.restype = ctypes.c_int
        self._rm.argtypes, self._rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        fd = init(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise _error("inotify_init1")
        self.fd: int = fd

    def add(self, path: str) -> int:
        """Watch the directory ``path``; its watch descriptor, or OSError."""
        wd = int(self._add(self.fd, os.fsencode(path), MASK))
        if wd < 0:
            raise _error(path)
        return wd

    def remove(self, wd: int) -> None:
        """Stop a watch (gone already: nothing to do)."""
        self._rm(self.fd, wd)

    def read(self) -> list[Event]:
        """The events queued now (none: an empty list); never blocks."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return events
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, pos)
                start = pos + _EVENT.size
                events.append((wd, mask, data[start : start + size].rstrip(b"\0")))
                pos = start + size

    def close(self) -> None:
        """Release the instance and all its watches."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


class Wakeup:
    """What the watch loop sleeps on between polls: ``wait`` returns early when told to."""

    method = "polling"

    def __init__(self) -> None:
        self._woken = threading.Event()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; whether something woke it before that."""
        woken = self._woken.wait(timeout)
        self._woken.clear()
        return woken

    def wake(self) -> None:
        """End the current or next ``wait`` now (safe from a signal handler)."""
        self._woken.set()

    def close(self) -> None:
        """Release what it holds."""


class InotifyWakeup(Wakeup):
    """Sleeps until a watched directory changes (inotify), ``wake()``, or the timeout."""

    method = "inotify"

    def __init__(self, dirs: tuple[str, ...], inotify: Inotify) -> None:
        super().__init__()
        self.dirs = dirs
        self._inotify = inotify
        self._watches: dict[int, str] = {}  # wd -> directory
        self._refused: dict[str, str] = {}  # directory -> why it can't be watched
        self._wake_r, self._wake_w = os.pipe()
        for fd in (self._wake_r, self._wake_w):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        self.sync()

    @property
    def watched(self) -> set[str]:
        """The directories watched now."""
        return set(self._watches.values())

    def sync(self) -> None:
        """Watch every directory that exists and isn't watched yet."""
        unwatched = set(self.dirs) - self.watched
        for directory in sorted(unwatched):
            try:
                wd = self._inotify.add(directory)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR):  # missing: polled till then
                    self._refuse(directory, exc)
                continue
            self._watches[wd] = directory
            if self._refused.pop(directory, None) is not None:
                log.info("watching %s by inotify again", directory, extra={"dir": directory})

    def _refuse(self, directory: str, exc: OSError) -> None:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        if self._refused.get(directory) != why:
            self._refused[directory] = why
            hint = " (raise fs.inotify.max_user_watches)" if exc.errno == errno.ENOSPC else ""
            log.warning(
                "cannot watch %s by inotify: %s%s; polling it instead",
                directory,
                why,
                hint,
                extra={"dir": directory},
            )

    def wait(self, timeout: float) -> bool:
        """Sleep until an event, ``wake()`` or ``timeout``; whether it was woken early."""
        self.sync()
        if self._woken.is_set():
            self._woken.clear()
            return True
        try:
            ready, _, _ = select.select([self._inotify.fd, self._wake_r], [], [], max(timeout, 0))
        except InterruptedError:  # pragma: no cover # PEP 475 retries; a handler may raise
            ready = []
        woken = bool(ready)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)
        if self._inotify.fd in ready:
            self._handle(self._inotify.read())
        self._woken.clear()
        return woken

    def _handle(self, events: list[Event]) -> None:
        for wd, mask, _ in events:
            # The directory went, or moved away: watch whatever is there at the next wait.
            if mask & (IN_IGNORED | IN_DELETE_SELF):
                self._watches.pop(wd, None)
            elif mask & IN_MOVE_SELF and self._watches.pop(wd, None) is not None:
                self._inotify.remove(wd)

    def wake(self) -> None:
        """End the current or next ``wait`` now (safe from a signal handler)."""
        self._woken.set()
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")

    def close(self) -> None:
        """Release the inotify instance and the wake-up pipe."""
        self._inotify.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def open_wakeup(
    dirs: tuple[str, ...], mode: str, opener: Callable[[], Inotify] = Inotify
) -> Wakeup:
    """inotify for ``dirs`` unless ``mode`` is ``poll`` or the kernel has none to give
    (then polling, with one line saying why)."""
    if mode == "poll":
        return Wakeup()
    try:
        inotify = opener()
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        hint = " (raise fs.inotify.max_user_instances)" if exc.errno == errno.EMFILE else ""
        log.warning("no inotify: %s%s; polling instead", why, hint)
        return Wakeup()
    return InotifyWakeup(dirs, inotify)
