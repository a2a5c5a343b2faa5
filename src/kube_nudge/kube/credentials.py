"""The kubeconfig user's credentials as an ``Authorization`` header.

A static token or basic auth is one header for the process's life. A token file is read at
first use and again after a 401 (the kubelet rotates service-account tokens; so does
client-go's ``tokenFileAuth``). An exec plugin is run at first use, again after a 401 and
again once the ``expirationTimestamp`` it gave has passed (the ``client.authentication.k8s.io``
ExecCredential, v1, v1beta1 or v1alpha1). Client certificates are TLS's (``kube.kubeconfig``).

``CredentialsError`` says what failed in one line; no token, password or plugin output is
ever part of it, nor of a log line.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from kube_nudge.kube.kubeconfig import ExecPlugin, Kubeconfig

__all__ = ["Credentials", "CredentialsError", "Token", "credentials_for"]

EXEC_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
    "client.authentication.k8s.io/v1alpha1",
)
EXPIRY_MARGIN = 10.0
"""Seconds before an exec plugin's token expires at which it is run again."""
_ERROR_CHARS = 200


class CredentialsError(Exception):
    """The credentials could not be had: a token file that is gone, an exec plugin that is
    missing, fails or prints no token. One line, never a secret."""


@dataclass(frozen=True, slots=True, repr=False)
class Token:
    """An ``Authorization`` header and when it stops being good (``time.time()``; None:
    until the API server says 401)."""

    header: str
    expires: float | None = None

    def __repr__(self) -> str:
        return f"Token(expires={self.expires})"


Fetch = Callable[[], Awaitable[Token]]


class Credentials:
    """The ``Authorization`` header for each request (``None``: client certificates or
    nothing), fetched again on a 401 when its source can change, and before it expires."""

    def __init__(
        self, fetch: Fetch | None, *, refreshable: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:  # fmt: skip
        self._fetch = fetch
        self._refreshable = fetch is not None and refreshable
        self._clock = clock
        self._token: Token | None = None
        self._lock = asyncio.Lock()
        self._generation = 0

    @classmethod
    def fixed(cls, header: str | None) -> Credentials:
        """One header for good (a static token, basic auth), or none."""
        if header is None:
            return cls(None)
        token = Token(header)

        async def fetch() -> Token:
            return token

        return cls(fetch, refreshable=False)

    @property
    def refreshable(self) -> bool:
        """True when a 401 may be cured by fetching again."""
        return self._refreshable

    async def header(self) -> tuple[str | None, int]:
        """The header now, and its generation (pass it to ``refresh`` after a 401)."""
        if self._fetch is None:
            return None, self._generation
        token = self._token
        if token is None or (
            token.expires is not None and self._clock() >= token.expires - EXPIRY_MARGIN
        ):
            token = await self._renew(self._fetch, self._generation)
        return token.header, self._generation

    async def refresh(self, generation: int) -> None:
        """Fetch again after a 401 answered a request sent with ``generation`` (a request
        sent with an older header needs no new fetch: another already did it)."""
        if self._refreshable and self._fetch is not None:
            await self._renew(self._fetch, generation)

    async def _renew(self, fetch: Fetch, generation: int) -> Token:
        async with self._lock:
            if generation != self._generation and self._token is not None:
                return self._token  # another request's 401 fetched it meanwhile
            self._token = token = await fetch()
            self._generation += 1
            return token


def credentials_for(config: Kubeconfig, *, clock: Callable[[], float] = time.time) -> Credentials:
    """The credentials of ``config``'s user (lightkube's order: token file, token, exec
    plugin, basic auth). ``ValueError`` for a kind kube-nudge does not support."""
    user = config.user
    if user.token_file:
        return Credentials(functools.partial(_token_file, config.path(user.token_file)))
    if user.token:
        return Credentials.fixed(f"Bearer {user.token.strip()}")
    if user.exec is not None:
        plugin = user.exec
        if plugin.api_version not in EXEC_VERSIONS:
            raise ValueError(f"exec plugin apiVersion {plugin.api_version!r} is not supported")
        return Credentials(functools.partial(run_exec_plugin, plugin, config), clock=clock)
    if user.username and user.password:
        pair = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
        return Credentials.fixed(f"Basic {pair}")
    if user.auth_provider:
        raise ValueError("auth-provider is not supported; use an exec plugin")
    return Credentials.fixed(None)


async def _token_file(path: str) -> Token:
    return read_token_file(path)  # a few bytes from a local file: not worth a thread


def read_token_file(path: str) -> Token:
    """The bearer token in file ``path``."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise CredentialsError(f"token file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise CredentialsError(f"token file {path}: cannot read it: {why}") from None
    token = text.strip()
    if not token:
        raise CredentialsError(f"token file {path}: empty")
    return Token(f"Bearer {token}")


async def run_exec_plugin(plugin: ExecPlugin, config: Kubeconfig) -> Token:
    """Run ``plugin`` and read the token of the ExecCredential it prints."""
    command = plugin.command
    if os.sep in command and not os.path.isabs(command):
        command = config.path(command)  # relative to the kubeconfig, as client-go does
    name = os.path.basename(command)
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential",
            "spec": {"interactive": False}}  # fmt: skip
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        process = await asyncio.create_subprocess_exec(
            command, *plugin.args, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = await process.communicate()
    except OSError as exc:
        raise CredentialsError(f"exec plugin {name}: cannot run it: {exc.strerror}") from None
    if process.returncode != 0:
        said = " ".join(stderr.decode(errors="replace").split())[:_ERROR_CHARS]
        raise CredentialsError(
            f"exec plugin {name} exited with {process.returncode}" + (f": {said}" if said else "")
        )
    return _exec_token(stdout, name)


def _exec_token(stdout: bytes, name: str) -> Token:
    """The token and expiry of an ExecCredential (the output itself is never quoted)."""
    try:
        status = json.loads(stdout)["status"]
        token = status["token"]
    except (ValueError, KeyError, TypeError):
        raise CredentialsError(
            f"exec plugin {name}: its output is not an ExecCredential with status.token"
        ) from None
    if not isinstance(token, str) or not token:
        raise CredentialsError(f"exec plugin {name}: status.token is empty")
    expires = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        try:
            expires = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError:
            raise CredentialsError(
                f"exec plugin {name}: status.expirationTimestamp is not RFC 3339"
            ) from None
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.UTC)
    return Token(f"Bearer {token}", expires.timestamp() if expires is not None else None)
