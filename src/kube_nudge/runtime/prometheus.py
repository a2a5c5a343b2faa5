"""Instant queries to the Prometheus servers an analysis may ask (``--prometheus-url``).

Only the addresses ``kube-nudge run`` was given are ever contacted: an analysis template is
written by whoever may create one in a namespace, and a controller that fetched any URL it
names (a cloud metadata endpoint, say) and reported the answer in Events would hand them
whatever it can reach. Addresses are compared after parsing, by scheme, host, port (the
scheme's default made explicit) and path: a template's address with userinfo, another port,
another spelling of the host (``localhost`` is not ``127.0.0.1``: nothing is resolved), or a
longer path or a query is refused before any connection, with the reason
(``PrometheusAccess.refusal``). Redirects are never followed: a 3xx answer is the
measurement's Error, naming the status and where it pointed, so an allowed server can't send
the query (or its token) anywhere else.

Credentials (a bearer token, a CA) come from ``kube-nudge run``'s own namespace, never from
the template's, each for the one server it names (``ServerCredentials``), and are read again
when their mounted files change. Errors are one line that names the address and what went
wrong (never the token); the caller counts them as the measurement's Error.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

import aiohttp
import orjson

__all__ = [
    "DEFAULT_QUERY_TIMEOUT",
    "PrometheusAccess",
    "PrometheusClient",
    "QueryError",
    "ServerCredentials",
    "normalised",
]

DEFAULT_QUERY_TIMEOUT = 10.0
_MAX_BODY = 4 * 1024 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}


class QueryError(Exception):
    """A query that gave no value (one line, no credential)."""


def _parsed(address: str) -> SplitResult:
    """``address`` split, its port checked; ValueError when it is no http(s) URL, or holds
    a space or a control character anywhere (``urlsplit`` drops tabs and newlines, so
    ``http://127.0.\n0.1`` would pass as ``127.0.0.1``)."""
    if not address.isprintable() or any(char.isspace() for char in address):
        raise ValueError(f"{shown_address(address)!r}: a URL has no spaces or control characters")
    parts = urlsplit(address)
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{shown_address(address)!r} is not an http:// or https:// URL")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError(f"{shown_address(address)!r}: the port is no number 1-65535")
    return parts


def _host(parts: SplitResult) -> str:
    """The host as a URL writes it: an IPv6 literal in brackets, names in lower case."""
    host = (parts.hostname or "").lower()
    return f"[{host}]" if ":" in host else host


def normalised(address: str) -> str:
    """``address`` as compared with the allowed ones: scheme and host in lower case, the
    port always written (the scheme's default when none is given), the path without a
    trailing slash; ValueError when it is no plain http(s) URL (credentials, a query or a
    fragment in it included)."""
    parts = _parsed(address)
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ValueError(
            f"{shown_address(address)!r}: give the URL without credentials, query or fragment"
        )
    scheme = parts.scheme.lower()
    port = parts.port if parts.port is not None else _DEFAULT_PORTS[scheme]
    return f"{scheme}://{_host(parts)}:{port}{parts.path.rstrip('/')}"


def shown_address(address: str) -> str:
    """``address`` fit for a message: any userinfo (a password, say) replaced by ``***``,
    anything but printable ASCII escaped, at most 200 characters."""
    text = address.encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    try:
        parts = urlsplit(text)
    except ValueError:
        return "(an address that is no URL)"
    if "@" in parts.netloc:
        text = parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()
    return text if len(text) <= 200 else text[:199] + "…"


@dataclass(frozen=True, slots=True)
class _Stamp:
    """What a file is now (its inode, size and change time): kubelet replaces a mounted
    Secret's files by swapping a symlink, so a rotation changes the inode."""

    inode: int
    size: int
    changed: int


def _stamp(path: Path) -> _Stamp | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return _Stamp(found.st_ino, found.st_size, found.st_mtime_ns)


class ServerCredentials:
    """A bearer token (file ``token``) and/or a CA bundle (file ``ca.crt``) for one server,
    from a mounted Secret's folder; each read again when its file changes, so a rotated
    token is sent from the next query on, without a restart."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._token: tuple[_Stamp | None, str | None] | None = None
        self._ssl: tuple[_Stamp | None, ssl.SSLContext] | None = None

    @property
    def has_token(self) -> bool:
        """Whether the folder holds a token now."""
        return self.token() is not None

    def headers(self) -> dict[str, str]:
        """The Authorization header, if there is a token; ValueError for a token that
        can't be one (a line break, a control character in it)."""
        token = self.token()
        if token is None:
            return {}
        if not token.isprintable():
            raise ValueError("the token holds a line break or a control character")
        return {"Authorization": f"Bearer {token}"}

    def check(self) -> None:
        """Read both files now: OSError, ValueError or ssl.SSLError when they can't be used
        (``kube-nudge run`` refuses to start then)."""
        self.headers()
        self.ssl_context()

    def unusable(self, exc: Exception) -> str:
        """Why the files can't be used, in one line that names the folder, never a token."""
        why = type(exc).__name__ if isinstance(exc, UnicodeError) else str(exc).splitlines()[0]
        return f"the credentials in {self.folder} can't be used ({why[:200]})"

    def token(self) -> str | None:
        """The token as the file holds it now (None: no file, or empty)."""
        path = self.folder / "token"
        stamp = _stamp(path)
        if self._token is None or self._token[0] != stamp:
            text = path.read_text(encoding="utf-8").strip() if stamp is not None else ""
            self._token = (stamp, text or None)
        return self._token[1]

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS context trusting the folder's ``ca.crt`` as it is now (the system's CAs
        when there is none)."""
        path = self.folder / "ca.crt"
        stamp = _stamp(path)
        if self._ssl is None or self._ssl[0] != stamp:
            cafile = str(path) if stamp is not None else None
            self._ssl = (stamp, ssl.create_default_context(cafile=cafile))
        return self._ssl[1]


@dataclass(frozen=True, slots=True)
class PrometheusAccess:
    """Which servers may be asked, and how (from ``kube-nudge run``'s flags)."""

    allowed: tuple[str, ...]
    """Normalised addresses (``normalised``)."""
    credentials: Mapping[str, ServerCredentials] = field(default_factory=dict, repr=False)
    """Per normalised address, its own credentials (none: it gets neither token nor CA)."""

    def allows(self, address: str) -> bool:
        """Whether ``address`` is one of the allowed servers."""
        return self.refusal(address) is None

    def refusal(self, address: str) -> str | None:
        """Why ``address`` may not be asked (one line naming it, never a credential in it),
        or None when it is one of the allowed servers."""
        shown = shown_address(address)
        try:
            parts = _parsed(address)
        except ValueError as exc:
            return str(exc)
        if parts.username is not None or parts.password is not None:
            return f"{shown} carries userinfo (user@host); give the server's URL without it"
        if parts.query or parts.fragment:
            return f"{shown} has a query or fragment; give the server's URL without it"
        address_key = normalised(address)
        if address_key in self.allowed:
            return None
        origin = address_key[: len(address_key) - len(parts.path.rstrip("/"))]
        same_origin = [a for a in self.allowed if a == origin or a.startswith(origin + "/")]
        what = "its path differs from" if same_origin else "it is none of"
        return f"{shown} is not a --prometheus-url of kube-nudge run ({what} the allowed ones)"

    def cleartext_tokens(self) -> list[str]:
        """The allowed ``http://`` servers that have a token: it would cross the network
        unencrypted (``kube-nudge run`` warns of each at start)."""
        return [
            server
            for server, credentials in self.credentials.items()
            if server.startswith("http://") and credentials.has_token
        ]


class PrometheusClient:
    """Sends instant queries to the allowed servers, one aiohttp session for all (each
    request with its own server's token and TLS context). A runnable of the leader: its
    connections close when it stops leading."""

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
        refused = self.access.refusal(address)
        if refused is not None:
            raise QueryError(refused)
        address = normalised(address)  # what is asked, and named in every message
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        seconds = timeout or DEFAULT_QUERY_TIMEOUT
        params["timeout"] = f"{seconds:g}s"
        server = address
        headers, context = self._auth(server)
        try:
            async with self._http().post(
                f"{server}/api/v1/query",
                data=params,
                headers=headers,
                ssl=context,
                allow_redirects=False,  # an allowed server must not send the query elsewhere
                timeout=aiohttp.ClientTimeout(total=seconds + 1),
            ) as response:
                status = response.status
                if 300 <= status < 400:
                    where = shown_address(response.headers.get("Location", "nowhere"))
                    raise QueryError(
                        f"{address}: answered {status}, a redirect to {where}; redirects are "
                        "never followed (give the server's own URL as --prometheus-url)"
                    )
                body = await _whole_body(address, response)
        except TimeoutError:
            raise QueryError(f"{address}: no answer within {seconds:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise QueryError(f"{address}: unreachable ({type(exc).__name__})") from None
        return _value(address, status, body)

    def _auth(self, server: str) -> tuple[dict[str, str], ssl.SSLContext | bool]:
        """The headers and TLS context of a request to ``server`` (its own token, its own
        CA; True: the default context); ``QueryError`` when its mounted files can't be used
        as they are now (the measurement's Error, as any other)."""
        credentials = self.access.credentials.get(server)
        if credentials is None:
            return {}, True
        try:
            return credentials.headers(), credentials.ssl_context()
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise QueryError(f"{server}: {credentials.unusable(exc)}") from None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Accept": "application/json"},
                connector=aiohttp.TCPConnector(limit=16),
            )
        return self._session

    async def aclose(self) -> None:
        """Close the connections."""
        if self._session is not None:
            await self._session.close()


async def _whole_body(address: str, response: aiohttp.ClientResponse) -> bytes:
    """The answer's body, read to its end (a read returns what has arrived so far);
    ``QueryError`` past ``_MAX_BODY``."""
    body = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > _MAX_BODY:
            raise QueryError(
                f"{address}: an answer of more than {_MAX_BODY // (1024 * 1024)} MiB; an "
                "analysis query should give a few numbers"
            )
    return bytes(body)


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
