"""The kubeconfig's credentials as an ``Authorization`` header, from lightkube's auth.

lightkube turns a kubeconfig user into an httpx2 auth flow: a static token, a token file
(re-read when the API server answers 401: the kubelet rotates service-account tokens), an
exec plugin (run again on 401), basic auth. We drive that same flow, once at first use and
again after a 401, and keep the header it set in between, so every rule about when to
re-read a token stays lightkube's and no request pays for building httpx2 objects.
"""

from __future__ import annotations

import asyncio

import httpx2 as httpx

__all__ = ["Credentials"]


class Credentials:
    """The ``Authorization`` header lightkube's ``auth`` sets (``None``: client certificates
    or nothing)."""

    def __init__(self, auth: httpx.Auth | None, server: str) -> None:
        self._auth = auth
        self._server = server
        self._header: str | None = None
        self._lock = asyncio.Lock()
        self._generation = 0

    @property
    def refreshable(self) -> bool:
        """True when a 401 may be cured by asking the flow again."""
        return self._auth is not None

    async def header(self) -> tuple[str | None, int]:
        """The header now, and its generation (pass it to ``refresh`` after a 401)."""
        if self._auth is not None and self._header is None:
            await self.refresh(self._generation)
        return self._header, self._generation

    async def refresh(self, generation: int) -> None:
        """Ask the flow again after a 401 answered a request sent with ``generation`` (a
        request sent with an older header needs no new run: another already did it)."""
        if self._auth is None:
            return
        async with self._lock:
            if generation != self._generation:
                return
            request = httpx.Request("GET", self._server)
            flow = self._auth.async_auth_flow(request)
            sent = request
            try:
                sent = await flow.__anext__()
                if self._header is not None:
                    # The flow answers a 401 to what it sent by reading the token again.
                    sent = await flow.asend(httpx.Response(401, request=sent))
            except StopAsyncIteration:
                pass
            finally:
                await flow.aclose()
            self._header = sent.headers.get("Authorization")
            self._generation += 1
