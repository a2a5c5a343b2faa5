"""A front for the real Prometheus, for the analysis fault scenario: it forwards every
instant query as it is, counts them per workload (the ``deployment`` label the template's
query selects) and metric, and on demand holds the answers back, so a test can SIGKILL a
controller while one of its queries is in flight: between the query and its record."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

from aiohttp import ClientSession, web

_WORKLOAD = re.compile(r'deployment="([^"]+)"')


class QueryProxy:
    """Forwards ``/api/v1/query`` to ``upstream``; ``hold`` keeps the answers back."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.queries: collections.Counter[tuple[str, str]] = collections.Counter()
        """(workload, metric) of every query received: the metric is ``p99-latency`` for
        a histogram quantile, ``error-ratio`` otherwise (the documented template's)."""
        self.held: list[str] = []
        """The workloads whose queries were held, in order."""
        self.changed = asyncio.Condition()
        self._open = asyncio.Event()
        self._open.set()
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self) -> None:
        """Keep every answer back from now on (the queries are still counted)."""
        self._open.clear()

    def release(self) -> None:
        """Answer the held queries and every later one."""
        self._open.set()

    async def until_held(self, workload: str, timeout: float) -> None:
        """Wait until a query of ``workload`` is held."""
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: workload in self.held), timeout)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/v1/query", self._query)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._session = ClientSession()

    async def close(self) -> None:
        self.release()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _query(self, request: web.Request) -> web.Response:
        body = await request.read()
        query = parse_qs(body.decode()).get("query", [""])[0]
        found = _WORKLOAD.search(query)
        workload = found.group(1) if found else "?"
        metric = "p99-latency" if "histogram_quantile" in query else "error-ratio"
        async with self.changed:
            self.queries[(workload, metric)] += 1
            if not self._open.is_set():
                self.held.append(workload)
            self.changed.notify_all()
        await self._open.wait()
        assert self._session is not None
        async with self._session.post(
            f"{self.upstream}/api/v1/query", data=body,
            headers={"Content-Type": request.headers.get("Content-Type", "")},
        ) as answer:  # fmt: skip
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )


@contextlib.asynccontextmanager
async def query_proxy(upstream: str) -> AsyncIterator[QueryProxy]:
    """A running ``QueryProxy`` in front of ``upstream``; closed on exit."""
    proxy = QueryProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
