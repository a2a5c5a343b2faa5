"""One client connection of the HTTP server (``runtime/http.py``): HTTP/1.1 on asyncio
streams, parsed by h11 (a small, sans-I/O, widely used parser; uvicorn's own).

Requests are answered one after another (keep-alive, pipelining). The head of each must be
complete ``head_timeout`` seconds after the connection opened or the last answer (else 408,
then close; bytes that never start a request after an answer close it silently after
``keep_alive``); a head over ``max_head`` bytes answers 431 (h11 itself refuses, with 400, a
head still incomplete past that size), a malformed one 400, a body over ``max_body`` 413.
A slow request *body* is the handler's to bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import h11

__all__ = ["Exchange", "Limits", "serve_connection"]

_READ = 65536


@dataclass(frozen=True, slots=True)
class Limits:
    """The connection's bounds (seconds and bytes)."""

    head_timeout: float
    keep_alive: float
    max_head: int
    max_body: int


@dataclass(frozen=True, slots=True)
class Exchange:
    """A request as read (method, target, lower-case headers, body) handed to the server."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


Reply = tuple[int, str, tuple[tuple[str, str], ...], bytes]
"""(status, content type, extra headers, body)."""
Answer = Callable[[Exchange], Awaitable[Reply]]


def _raw(status: int, phrase: str, text: str) -> bytes:
    body = text.encode()
    return (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class _Closed(Exception):
    """The connection ends here (an answer, if any, was written)."""


class _Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limits: Limits,
        closing: Callable[[], bool],
    ) -> None:  # fmt: skip
        self.reader, self.writer, self.limits = reader, writer, limits
        self.closing = closing
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_head)

    async def next_event(self, deadline: float | None, idle_until: float | None) -> object:
        """The next h11 event, reading as needed. With ``deadline``, the head's: 408 when it
        passes; ``idle_until``: a silent close if no byte came by then."""
        loop = asyncio.get_running_loop()
        received = False
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:
                if self.conn.their_state is h11.CLOSED or self.reader.at_eof():
                    raise _Closed from None  # the client left mid-head: no one to answer
                self.writer.write(_raw(400, "Bad Request", "invalid HTTP request\n"))
                raise _Closed from None
            if event is not h11.NEED_DATA:
                return event
            wake = deadline
            if not received and idle_until is not None and (wake is None or idle_until < wake):
                wake = idle_until
            timeout = None if wake is None else max(0.0, wake - loop.time())
            try:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(_READ)
            except TimeoutError:
                if wake is idle_until and not received:
                    raise _Closed from None  # an idle keep-alive: close without a word
                self.writer.write(_raw(408, "Request Timeout", ""))
                raise _Closed from None
            received = received or bool(data)
            self.conn.receive_data(data)

    async def body(self) -> bytes | None:
        """The request's body, or None once it passes ``max_body``."""
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self.next_event(None, None)
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.limits.max_body:
                    return None
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.ConnectionClosed):
                raise _Closed

    def send(self, reply: Reply, *, head: bool, close: bool) -> None:
        status, content_type, extra, body = reply
        headers = [("content-type", content_type), ("content-length", str(len(body))), *extra]
        if close:
            headers.append(("connection", "close"))
        out = self.conn.send(h11.Response(status_code=status, headers=headers))
        if not head and body:
            out += self.conn.send(h11.Data(data=body))
        out += self.conn.send(h11.EndOfMessage())
        self.writer.write(out)


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answer: Answer,
    limits: Limits, closing: Callable[[], bool],
) -> None:  # fmt: skip
    """Answer requests on one connection until either side closes it; ``closing()`` true:
    the server is stopping (answer what is in flight, then close)."""
    connection = _Connection(reader, writer, limits, closing)
    loop = asyncio.get_running_loop()
    start, after_answer = loop.time(), False
    try:
        while not closing():
            idle = start + limits.keep_alive if after_answer else None
            event = await connection.next_event(start + limits.head_timeout, idle)
            if isinstance(event, h11.ConnectionClosed):
                return
            if not isinstance(event, h11.Request):  # pragma: no cover - h11 gives a Request
                return
            if _head_size(event) > limits.max_head:
                writer.write(
                    _raw(431, "Request Header Fields Too Large", "request head too large\n")
                )
                return
            body = await connection.body()
            method = event.method.decode("ascii", "replace")
            if body is None:
                writer.write(_raw(413, "Content Too Large", "request body too large\n"))
                return
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers}
            reply = await answer(Exchange(method, event.target.decode("latin-1"), headers, body))
            connection.send(reply, head=method == "HEAD", close=closing())
            await writer.drain()
            if connection.conn.our_state is h11.MUST_CLOSE or closing():
                return
            connection.conn.start_next_cycle()
            start, after_answer = loop.time(), True
    except (_Closed, ConnectionError, h11.ProtocolError):
        return
    finally:
        with contextlib.suppress(Exception):
            await writer.drain()
        writer.close()


def _head_size(request: h11.Request) -> int:
    # The request line and header lines as sent, give or take optional whitespace.
    line = len(request.method) + len(request.target) + 12
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers)
