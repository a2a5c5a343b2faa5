"""The one-writer rule held at run time: in every test session (unit and integration), a
transport refuses a PATCH that product code sends other than through ``kube/patches.py``.

Who sent a request is read from the call stack when the transport is called. An awaited
coroutine runs on its awaiter's stack, so the frames of a PATCH go from the transport
through ``KubeClient`` to whoever asked for it, however the method was spelled (a keyword,
a variable, a method named otherwise, the transport called directly). Frames of code that
only forwards its caller's request are skipped (``FORWARDERS``: the client, the tests'
admin client); the first other frame is the sender:

- ``kube/patches.py``: the sender, allowed; but a PATCH of a workload (of a kind kube-nudge
  knows: ``BUILTIN_KINDS``, ``DISCOVERED_KINDS``) goes on: the product frame that called
  ``send`` must be the workload writer, ``controller/writer.py`` (one PATCH per pass), or
  the stamp of ``kube-nudge release``/``approve`` (``app/release_command.py``, a person's
  write), and a task of its own is refused;
- any other product module: refused;
- the tests, the dev tools, the bench: their own setup and edits, allowed (the rule is
  the product's);
- none, the stack ending in the event loop (a request started as a task of its own):
  refused, unless the admin client forwarded it (a test's edit run as a task). A product
  module cannot hide behind a task: ``patches.send`` run as a task is still seen as the
  writer, a bare ``KubeClient.request`` is not.

Why the stack and not a context variable that ``patches.send`` sets: the variable would be
product code paid for in production; it would vouch for everything run while it is set, and
for every task started then, which inherits it; and any module could set it. The stack names
the caller itself, and a request whose caller can't be told is refused. The product pays
nothing: the transports' ``request`` and ``stream`` are wrapped here, by session fixtures
(``tests/conftest.py``, ``tests/unit/conftest.py``), never in ``src``.

A refusal raises ``PatchRefused`` in the sender, and is also kept: the product catches
errors of a write and retries, so the fixture ``_no_patch_refused`` fails the test at its
end for any refusal a test did not take with ``refusals()``.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import kube_nudge
import kube_nudge_dev
from kube_nudge.kube.transport import Transport
from kube_nudge.kube.workloads import BUILTIN_KINDS, DISCOVERED_KINDS

__all__ = ["PatchRefused", "guarded", "refusals", "refused_sender", "taken"]

PRODUCT = Path(kube_nudge.__file__).parent
WRITER = str(PRODUCT / "kube" / "patches.py")
WORKLOAD_WRITERS = frozenset(
    str(PRODUCT / part) for part in ("controller/writer.py", "app/release_command.py")
)
"""The product modules that may ``send`` a PATCH of a workload."""
WORKLOAD_PATH = re.compile(
    "^/apis/(?:"
    + "|".join(
        re.escape(f"{k.resource.group}/{k.resource.version}")
        + "/namespaces/[^/]+/"
        + re.escape(k.resource.plural)
        for k in (*BUILTIN_KINDS, *DISCOVERED_KINDS)
    )
    + ")/[^/]+$"
)
"""The path of a workload of a kind kube-nudge knows."""
CLIENT = str(PRODUCT / "kube" / "client.py")
ADMIN = str(Path(kube_nudge_dev.__file__).parent / "admin.py")
FORWARDERS = frozenset({CLIENT, ADMIN})
"""Files whose frames forward their caller's request: the caller is the sender."""
_REPO = Path(__file__).parents[1]
TESTS_SIDE = tuple(f"{_REPO / part}/" for part in ("tests", "devtools", "bench", "tools"))
"""Where the tests' own requests come from."""

_REFUSED: list[str] = []
"""Refusals no test has taken yet (``taken``)."""


class PatchRefused(AssertionError):
    """A PATCH sent by product code other than through ``kube/patches.py``."""


def refused_sender(frame: FrameType | None, path: str = "") -> str | None:
    """Why a PATCH of ``path`` whose sender's stack starts at ``frame`` is refused; None if
    allowed."""
    forwarded_by = None
    while frame is not None:
        file = frame.f_code.co_filename
        if file in FORWARDERS:
            forwarded_by = file
        elif file == WRITER and WORKLOAD_PATH.match(path):
            return _workload_sender(frame.f_back)
        elif file == WRITER or file.startswith(TESTS_SIDE):
            return None
        elif file.startswith(f"{PRODUCT}/"):
            where = Path(file).relative_to(PRODUCT)
            return f"sent from {where}:{frame.f_lineno} ({frame.f_code.co_name})"
        else:
            break  # the event loop's frames: the request is a task of its own
        frame = frame.f_back
    if forwarded_by == ADMIN:
        return None
    return "sent by a task of its own, whose sender cannot be told"


def _workload_sender(frame: FrameType | None) -> str | None:
    """Why a workload PATCH ``send`` was called for from ``frame`` (its caller's) is
    refused; None if the caller is the workload writer (or the tests)."""
    file = frame.f_code.co_filename if frame is not None else ""
    if file in WORKLOAD_WRITERS or file.startswith(TESTS_SIDE):
        return None
    if frame is not None and file.startswith(f"{PRODUCT}/"):
        where = Path(file).relative_to(PRODUCT)
        return (
            f"a workload PATCH sent from {where}:{frame.f_lineno} ({frame.f_code.co_name}), "
            "not by the writer of the pass (controller/writer.py)"
        )
    return "a workload PATCH sent by a task of its own, not by the writer of the pass"


def _refuse(method: str, path: str, frame: FrameType | None) -> None:
    """Raise ``PatchRefused`` (and keep it) for a PATCH product code sent elsewhere than
    through ``kube/patches.py``."""
    if method.upper() != "PATCH" or (why := refused_sender(frame, path)) is None:
        return
    message = (
        f"PATCH {path} {why}: kube-nudge sends a PATCH only through kube/patches.py "
        "(docs/design.md, the one-writer rule)"
    )
    _REFUSED.append(message)
    raise PatchRefused(message)


def _guard_request(
    request: Callable[..., Awaitable[Any]],
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(request)
    async def guarded_request(self: object, method: str, path: str, *args: Any, **kw: Any) -> Any:
        # Before any await: the stack still runs through whoever awaits this request.
        _refuse(method, path, sys._getframe(1))
        return await request(self, method, path, *args, **kw)

    return guarded_request


def _guard_stream(stream: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(stream)
    def guarded_stream(self: object, method: str, path: str, *args: Any, **kw: Any) -> Any:
        _refuse(method, path, sys._getframe(1))
        return stream(self, method, path, *args, **kw)

    return guarded_stream


@contextlib.contextmanager
def guarded(*transports: type[Transport]) -> Iterator[None]:
    """Within the block, these ``Transport`` classes refuse a PATCH product code sends
    other than through ``kube/patches.py``."""
    with pytest.MonkeyPatch.context() as patch:
        for transport in transports:
            patch.setattr(transport, "request", _guard_request(transport.request))
            patch.setattr(transport, "stream", _guard_stream(transport.stream))
        yield


@contextlib.contextmanager
def refusals() -> Iterator[list[str]]:
    """The refusals made within the block, taken: a test that expects them owns them."""
    before = len(_REFUSED)
    made: list[str] = []
    try:
        yield made
    finally:
        made.extend(_REFUSED[before:])
        del _REFUSED[before:]


def taken() -> list[str]:
    """The refusals no test has taken, now taken."""
    found = list(_REFUSED)
    _REFUSED.clear()
    return found
