"""A scripted HTTP/1.1 webhook receiver on 127.0.0.1 for notification tests: answers each
path from a script (the last answer repeats), records every request, and lets tests wait
for a condition instead of sleeping."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kube_nudge.notifications.model import NotificationKind, Receiver

WAIT = 10.0  # seconds an expected event may take before the test fails (never slept)
TOKEN = "T0KEN-5ecret-path"
QUERY = "sig=Qu3ry-5ecret"

HANG = -1  # a "status" that never answers


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)


class Server:
    """Answers each path from a script (the last answer repeats), records every request, and
    lets tests wait for a condition instead of sleeping."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Answer | int]] = {}
        self.hits: dict[str, list[Hit]] = defaultdict(list)
        self.delivered: dict[str, list[Hit]] = defaultdict(list)  # answered 2xx
        self.hanging: dict[str, int] = defaultdict(int)  # requests held open right now
        self.changed = asyncio.Condition()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}/{TOKEN}?{QUERY}"

    def receiver(self, path: str, fmt: str = "generic", index: int = 0,
                 on: frozenset[NotificationKind] | None = None) -> Receiver:  # fmt: skip
        kinds = frozenset(NotificationKind) if on is None else on
        return Receiver(self.url(path), format=fmt, on=kinds, index=index)

    async def wait(self, condition: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), WAIT)

    async def _changed(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                path = request_line.split()[1].decode().split("/")[1]
                hit = Hit(path, headers, body)
                script = self.scripts.get(path, [Answer(200)])
                answer = script[min(len(self.hits[path]), len(script) - 1)]
                self.hits[path].append(hit)
                if answer == HANG:
                    self.hanging[path] += 1
                    await self._changed()
                    try:  # until the client gives up (EOF) or the test ends
                        read = asyncio.ensure_future(reader.read(1))
                        await asyncio.wait([read, asyncio.ensure_future(self._release.wait())],
                                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                        read.cancel()
                    finally:
                        self.hanging[path] -= 1
                        await self._changed()
                    return
                assert isinstance(answer, Answer)
                if 200 <= answer.status < 300:
                    self.delivered[path].append(hit)
                extra = "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
                writer.write(
                    f"HTTP/1.1 {answer.status} X\r\ncontent-length: 2\r\n{extra}\r\nok".encode()
                )
                await writer.drain()
                await self._changed()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    def payloads(self, path: str) -> list[dict[str, Any]]:
        """The JSON bodies delivered (answered 2xx) on ``path``, in order."""
        return [json.loads(hit.body) for hit in self.delivered[path]]
