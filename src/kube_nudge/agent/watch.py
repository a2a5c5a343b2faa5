"""Change detection for mounted directories, and the loaded hash the agent records.

Each look takes a cheap fingerprint of every directory. A directory the kubelet manages (its
``..data`` is a symlink) is fingerprinted by that link's target alone: the kubelet writes a
new ``..<timestamp>`` directory, points ``..data_tmp`` at it and renames that over ``..data``,
so one ``readlink`` sees every update, atomically. Any other directory is fingerprinted by the
path, mtime, ctime, size and inode of each file. Once a change has settled (``debounce``
seconds after the first change seen) the files are read and a ``Snapshot`` reported: each
file's SHA-256, kept in memory only, never shown; the caller decides whether it differs from
what the app loaded.

What the agent shows (on its pod, in /metrics, in its log) is always keyed: per directory,
``dir_hash``, the wire protocol's ``directory_hash`` (``kube_nudge.agentwire``) of its files,
each path relative to the directory (for a kubelet directory, to ``..data``). Entries whose
names start with ``..`` are never part of it. The recorded ``kube-nudge.io/loaded-hash``
(``claim``) is the protocol's claim of those hashes, which the controller reproduces from the
ConfigMaps and Secrets it delivered (``kube_nudge.strategies.hot``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator

from kube_nudge.agentwire import directory_hash, format_claim

DATA = "..data"
_READ_CHUNK = 64 * 1024
_SWAP_RETRIES = 5

Fingerprint = tuple[object, ...]
MISSING: Fingerprint = ("missing",)
Files = tuple[tuple[str, bytes], ...]
"""(relative path, SHA-256 of its content) of each file, in the order of the paths' bytes."""
Snapshot = tuple[tuple[str, Files | None], ...]
"""Each watched directory (sorted) and its files, None when missing."""


def _walk(root: str, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(relative path, full path) of each file under ``root``, skipping ``..`` entries.

    Symlinks to files are followed; symlinks to directories are not (no cycles).
    """
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.name.startswith(".."):
                continue
            rel = f"{prefix}{entry.name}"
            try:
                if entry.is_dir(follow_symlinks=False):
                    yield from _walk(entry.path, f"{rel}/")
                elif entry.is_file():
                    yield rel, entry.path
            except FileNotFoundError:
                continue  # removed while we looked: the next poll sees the new state


def _data_target(directory: str) -> str | None:
    """Where the kubelet's ``..data`` link points, or None if this is a plain directory."""
    try:
        return os.readlink(os.path.join(directory, DATA))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == 22:  # EINVAL: ``..data`` is there but not a symlink
            return None
        raise


def fingerprint(directory: str) -> Fingerprint:
    """A cheap summary of ``directory`` that changes whenever its content may have changed."""
    try:
        target = _data_target(directory)
        if target is not None:
            return ("kubelet", target)
        entries = []
        for rel, full in _walk(directory):
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue
            entries.append((rel, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        return ("plain", tuple(sorted(entries)))
    except (FileNotFoundError, NotADirectoryError):
        return MISSING
    except OSError as exc:
        return ("unreadable", exc.strerror or str(exc))


def _file_digest(path: str) -> bytes:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.digest()


def directory_files(directory: str) -> Files | None:
    """(relative path, SHA-256 of content) of the files ``directory`` presents, or None if it
    is missing. For a kubelet directory the files are read from the ``..data`` target,
    re-reading the link afterwards: if the kubelet swapped it meanwhile (or removed the old
    directory under us), read again."""
    for _ in range(_SWAP_RETRIES):
        try:
            target = _data_target(directory)
            root = directory if target is None else os.path.join(directory, target)
            files = tuple(
                sorted(
                    ((rel, _file_digest(full)) for rel, full in _walk(root)),
                    key=lambda entry: os.fsencode(entry[0]),
                )
            )
            if target is None or _data_target(directory) == target:
                return files
        except (FileNotFoundError, NotADirectoryError):
            if not os.path.isdir(directory):
                return None
    raise OSError(f"{directory}: its files kept changing while they were read")


def snapshot(dirs: tuple[str, ...]) -> Snapshot:
    """What ``dirs`` hold now; OSError if they can't be read."""
    return tuple((directory, directory_files(directory)) for directory in sorted(dirs))


def dir_hash(key: bytes, files: Files) -> str:
    """The keyed hash of one directory's files (see the module docstring), as hex."""
    if not key:
        raise ValueError("the loaded hash needs a key")
    return directory_hash(key, ((os.fsencode(rel), file_digest) for rel, file_digest in files))


def dir_hashes(loaded: Snapshot, key: bytes) -> dict[str, str | None]:
    """Each directory's keyed hash (None: missing)."""
    return {d: None if files is None else dir_hash(key, files) for d, files in loaded}


def claim(loaded: Snapshot, key: bytes, key_name: str) -> str:
    """The value of ``kube-nudge.io/loaded-hash`` for ``loaded`` under ``key`` (whose id is
    ``key_name``)."""
    return format_claim(dir_hashes(loaded, key), key_name)


def loaded_hash(dirs: tuple[str, ...], key: bytes, key_name: str) -> str:
    """``claim`` of what ``dirs`` hold now."""
    return claim(snapshot(dirs), key, key_name)


class Watcher:
    """Looks at fingerprints and reports what the files hold once a change has settled."""

    def __init__(
        self,
        dirs: tuple[str, ...],
        debounce: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        fingerprint: Callable[[str], Fingerprint] = fingerprint,
    ) -> None:
        self.dirs = dirs
        self.debounce = debounce
        self._clock = clock
        self._fingerprint = fingerprint
        self._seen: dict[str, Fingerprint] = {}
        self._pending_since: float | None = None

    def _take(self) -> dict[str, Fingerprint]:
        return {d: self._fingerprint(d) for d in self.dirs}

    @property
    def problems(self) -> dict[str, str]:
        """Directories that could not be looked at in the last poll, with why."""
        out = {}
        for d, fp in self._seen.items():
            if fp == MISSING:
                out[d] = "missing"
            elif fp[0] == "unreadable":
                out[d] = f"unreadable ({fp[1]})"
        return out

    @property
    def plain(self) -> tuple[str, ...]:
        """Directories that were, at the last poll, not kubelet volumes (no ``..data`` link):
        a plain directory or a ``subPath`` mount, which the kubelet never refreshes."""
        return tuple(d for d, fp in self._seen.items() if fp[0] == "plain")

    @property
    def pending(self) -> bool:
        """Whether a change was seen that has not settled yet."""
        return self._pending_since is not None

    def next_poll_in(self, interval: float) -> float:
        """Seconds until the next poll: ``interval``, or sooner when a pending change settles
        sooner (else a debounce shorter than the poll would cost a whole extra poll)."""
        if self._pending_since is None:
            return interval
        settles_in = self._pending_since + self.debounce - self._clock()
        return min(interval, max(settles_in, 0.0))

    def baseline(self) -> Snapshot:
        """What the files hold now, taken as what the app loaded when it started."""
        self._seen = self._take()
        self._pending_since = None
        return snapshot(self.dirs)

    def poll(self) -> Snapshot | None:
        """What the files hold if a change settled in this look, else None.

        Raises OSError if the files cannot be read; the change is then dropped (the next
        change of the fingerprints is reported again).
        """
        now = self._clock()
        seen = self._take()
        if seen != self._seen:
            self._seen = seen
            if self._pending_since is None:
                self._pending_since = now
        if self._pending_since is None or now - self._pending_since < self.debounce:
            return None
        self._pending_since = None
        # Fingerprints from just before hashing: anything written after them is a new change.
        self._seen = self._take()
        return snapshot(self.dirs)
