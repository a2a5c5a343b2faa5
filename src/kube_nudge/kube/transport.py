"""What the API client needs from HTTP.

``KubeClient`` speaks to the API server through a ``Transport``: one request with its whole
body, or a streamed response read line by line (watches). The product's transport is
``kube.aiotransport.AiohttpTransport`` (why: docs/design.md, "The HTTP client"); the unit tests
wrap an ``httpx2.AsyncClient`` and its mock transport (``tests/unit/httpx_support.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

Params = Mapping[str, str | int] | None


class TransportError(Exception):
    """The request never got an answer: connect failure, reset, timeout. ``kind`` names it
    the way a person searches for it (``ConnectError``, ``ReadTimeout``)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class StreamTimeout(TransportError):
    """No byte arrived on a streamed response within its read timeout."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole response: status, headers (case-insensitive mapping), body."""

    status: int
    headers: Mapping[str, str]
    content: bytes


@dataclass(frozen=True, slots=True)
class Stream:
    """A streamed response: status and headers first, then the body: ``read()`` the rest at
    once (an error's Status), or ``lines()`` without their newline (``StreamTimeout`` when it
    goes silent)."""

    status: int
    headers: Mapping[str, str]
    read: Callable[[], Awaitable[bytes]]
    lines: Callable[[], AsyncIterator[bytes]]


class Transport(Protocol):
    """HTTP to one API server with the kubeconfig's TLS, credentials and user agent."""

    @property
    def server(self) -> str:
        """``scheme://host:port`` of the API server, for messages."""
        ...

    async def request(
        self, method: str, path: str, params: Params, content: bytes | None,
        headers: Mapping[str, str],
    ) -> Reply:  # fmt: skip
        """One request; ``TransportError`` when no answer came."""
        ...

    def stream(
        self, method: str, path: str, params: Params, read_timeout: float
    ) -> contextlib.AbstractAsyncContextManager[Stream]:
        """A request whose answer is read as it arrives, silent at most ``read_timeout``."""
        ...

    def sibling(self, connections: int) -> Transport:
        """A transport to the same server on its own, at most ``connections`` connections
        (one that cannot have its own pool returns itself)."""
        ...

    async def aclose(self) -> None:
        """Close the connections (idempotent)."""
        ...
