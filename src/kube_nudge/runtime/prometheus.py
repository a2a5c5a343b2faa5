"""Instant queries to the Prometheus servers an analysis may ask (``--prometheus-url``).

Only the addresses ``kube-nudge run`` was given are ever contacted: an analysis template is
written by whoever may create one in a namespace, and a controller that fetched any URL it
names (a cloud metadata endpoint, say) and reported the answer in Events would hand them
whatever it can reach. An address not on the list is refused before any connection.

Credentials (a bearer token, a CA) come from ``kube-nudge run``'s own namespace, never from
the template's. Errors are one line that names the address and what went wrong (never the
token); the caller counts them as the measurement's Error.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

__all__ = [
    "DEFAULT_QUERY_TIMEOUT",
    "PrometheusAccess",
    "PrometheusClient",
    "QueryError",
    "normalised",
]

DEFAULT_QUERY_TIMEOUT = 10.0
_MAX_BODY = 4 * 1024 * 1024


class QueryError(Exception):
    """A query that gave no value (one line, no credential)."""


def normalised(address: str) -> str:
    """``address`` as compared with the allowed ones: scheme, host and port in lower case,
    the path without a trailing slash; ValueError when it is no http(s) URL."""
    parts = urlsplit(address.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{address!r} is not an http:// or https:// URL")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(f"{address!r}: give the URL without credentials, query or fragment")
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}{parts.path.rstrip('/')}"


@dataclass(frozen=True, slots=True)
class PrometheusAccess:
    """Which servers may be asked, and how (from ``kube-nudge run``'s flags)."""

    allowed: tuple[str, ...]
    """Normalised addresses (``normalised``)."""
    token: str | None = field(default=None, repr=False)
    ca_file: str | None = None

    def allows(self, address: str) -> bool:
        """Whether ``address`` is one of the allowed servers."""
        try:
            return normalised(address) in self.allowed
        except ValueError:
            return False


class PrometheusClient:
    """Sends instant queries to the allowed servers, one aiohttp session for all. A
    runnable of the leader: its connections close when it stops leading."""

    name = "prometheus"
    needs_leader = True

    def __init__(self, access: PrometheusAccess) -> None:
        self.access = access
        self._session: aiohttp.ClientSession | None = None

    async def run(self) -> None:
        """Hold the connections until cancelled, then close them."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.aclose()

    async def query(
        self, address: str, promql: str, *, timeout: float | None = None, at: float | None = None
    ) -> float | list[float]:
        """The value of ``promql`` at ``address``: a scalar's number, or the values of an
        instant vector (possibly none); ``QueryError`` otherwise."""
        if not self.access.allows(address):
            raise QueryError(f"{address} is not a --prometheus-url of kube-nudge run")
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        seconds = timeout or DEFAULT_QUERY_TIMEOUT
        params["timeout"] = f"{seconds:g}s"
        url = f"{normalised(address)}/api/v1/query"
        try:
            async with self._http().post(
                url, data=params, timeout=aiohttp.ClientTimeout(total=seconds + 1)
            ) as response:
                body = await response.content.read(_MAX_BODY)
                status = response.status
        except TimeoutError:
            raise QueryError(f"{address}: no answer within {seconds:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise QueryError(f"{address}: unreachable ({type(exc).__name__})") from None
        return _value(address, status, body)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Accept": "application/json"}
            if self.access.token:
                headers["Authorization"] = f"Bearer {self.access.token}"
            context = ssl.create_default_context(cafile=self.access.ca_file)
            self._session = aiohttp.ClientSession(
                headers=headers, connector=aiohttp.TCPConnector(ssl=context, limit=16)
            )
        return self._session

    async def aclose(self) -> None:
        """Close the connections."""
        if self._session is not None:
            await self._session.close()


def _value(address: str, status: int, body: bytes) -> float | list[float]:
    """The number(s) of a query's answer, or why there are none."""
    try:
        answer: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise QueryError(f"{address}: answered {status}, not Prometheus JSON") from None
    if not isinstance(answer, Mapping) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, Mapping) else None
        why = str(error).splitlines()[0][:200] if error else f"status {status}"
        raise QueryError(f"{address}: the query failed: {why}")
    data = answer.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, Sequence) and len(result) == 2:
        return _number(address, result[1])
    if kind == "vector" and isinstance(result, list):
        return [_number(address, (sample.get("value") or [None, None])[1]) for sample in result]
    raise QueryError(
        f"{address}: a {kind} result; an analysis query must give an instant vector or a scalar"
    )


def _number(address: str, text: object) -> float:
    try:
        return float(str(text))  # NaN and ±Inf as Prometheus writes them
    except ValueError:
        raise QueryError(f"{address}: a sample that is not a number") from None
