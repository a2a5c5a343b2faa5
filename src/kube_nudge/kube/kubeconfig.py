"""The kubeconfig, or the pod's service account: where the API server is and who we are.

Our own reader of the fields kube-nudge uses (server, CA, client certificate, token, token
file, exec plugin, basic auth, namespace), not lightkube's: importing any part of lightkube
loads its whole client and httpx2 beside aiohttp (with the notifier moved to aiohttp, not
loading them took 5.6 MiB of RSS and about 45 ms of CPU off every start; docs/design.md,
"Libraries").
``KubeconfigError`` says in one line what is wrong and where; no value of a credential is
ever part of it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "DEFAULT_KUBECONFIG",
    "SERVICE_ACCOUNT",
    "Cluster",
    "ExecPlugin",
    "Kubeconfig",
    "KubeconfigError",
    "User",
    "load_kubeconfig",
    "tls_context",
]

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeconfigError(Exception):
    """No usable kubeconfig: missing, unreadable, not a kubeconfig, without the context asked
    for, or with credentials that fail (an exec plugin). One line naming what is wrong.
    Not a ValueError: it must never pass for a bad value of something else."""


@dataclass(frozen=True, slots=True)
class Cluster:
    """A kubeconfig ``cluster``: the server and how to trust it."""

    server: str = "http://localhost:8080"
    certificate_authority: str | None = None
    certificate_authority_data: str | None = None
    insecure: bool = False


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """A kubeconfig ``user.exec``: a command printing an ExecCredential."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, repr=False)
class User:
    """A kubeconfig ``user`` (``repr`` shows which fields are set, never their values)."""

    token: str | None = None
    token_file: str | None = None
    exec: ExecPlugin | None = None
    username: str | None = None
    password: str | None = None
    client_certificate: str | None = None
    client_certificate_data: str | None = None
    client_key: str | None = None
    client_key_data: str | None = None
    auth_provider: bool = False

    def __repr__(self) -> str:
        set_ = [name for name in self.__slots__ if getattr(self, name)]
        return f"User({', '.join(set_)})"


@dataclass(frozen=True, slots=True)
class Kubeconfig:
    """One context of a kubeconfig (or the in-cluster config), ready to connect with."""

    cluster: Cluster
    user: User
    namespace: str = "default"
    fname: Path | None = None
    """The file it came from (relative paths in it are relative to its directory)."""
    where: str = field(default="the in-cluster config")
    """How messages name it: ``kubeconfig PATH`` or ``the in-cluster config``."""

    def path(self, name: str) -> str:
        """``name`` as the kubeconfig means it: relative to the kubeconfig's directory."""
        if Path(name).is_absolute() or self.fname is None:
            return name
        return str(self.fname.parent / name)


def load_kubeconfig(
    kubeconfig: str | Path | None,
    context: str | None,
    *,
    service_account: Path = SERVICE_ACCOUNT,
    environ: Mapping[str, str] = os.environ,
) -> Kubeconfig:
    """The context ``context`` (default: the current one) of ``kubeconfig``, else the pod's
    service account when none is given, else ``$KUBECONFIG`` or ``~/.kube/config``.
    ``KubeconfigError`` names the file and what is wrong with it."""
    if kubeconfig:
        path, where = Path(kubeconfig).expanduser(), str(kubeconfig)
    else:
        in_cluster = _in_cluster(service_account, environ)
        if in_cluster is not None:
            if context not in (None, "default"):  # its one context, named as lightkube did
                raise KubeconfigError(
                    f"the in-cluster config: no context {context!r} (contexts: default)"
                )
            return in_cluster
        env = environ.get("KUBECONFIG", "")
        if os.pathsep in env:
            raise KubeconfigError(
                f"$KUBECONFIG lists several files ({env}); kube-nudge reads one: "
                "give --kubeconfig FILE"
            )
        path, where = Path(env or DEFAULT_KUBECONFIG).expanduser(), env or DEFAULT_KUBECONFIG
        if not env and not path.exists():
            raise KubeconfigError(
                f"no kubeconfig: {DEFAULT_KUBECONFIG} does not exist, $KUBECONFIG is not set "
                "and this is not a pod; give --kubeconfig FILE"
            )
        where = f"{where} (from $KUBECONFIG)" if env else where
    where = f"kubeconfig {where}"
    document = _read(path, where)
    try:
        return _select(document, context, path, where)
    except KubeconfigError:
        raise
    except KeyError as exc:
        raise KubeconfigError(f"{where}: not a kubeconfig (no {exc})") from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise KubeconfigError(f"{where}: not a kubeconfig ({reason(exc)})") from None


def _in_cluster(account: Path, environ: Mapping[str, str]) -> Kubeconfig | None:
    """The pod's service account, or None outside a pod."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    token_file = account / "token"
    if not host or not port or not token_file.exists():
        return None
    namespace = "default"
    with contextlib.suppress(OSError):
        namespace = (account / "namespace").read_text().strip() or namespace
    host = f"[{host}]" if ":" in host else host
    cluster = Cluster(
        server=f"https://{host}:{port}", certificate_authority=str(account / "ca.crt")
    )
    return Kubeconfig(cluster, User(token_file=str(token_file)), namespace)


def _read(path: Path, where: str) -> dict[str, Any]:
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise KubeconfigError(f"{where}: no such file") from None
    except OSError as exc:
        raise KubeconfigError(f"{where}: cannot read it: {reason(exc)}") from None
    try:
        document = orjson.loads(text)  # JSON is YAML; the YAML parser is loaded only if needed
    except orjson.JSONDecodeError:
        document = _yaml(text, where)
    if not isinstance(document, dict):
        raise KubeconfigError(
            f"{where}: not a kubeconfig (the file holds "
            f"{'nothing' if document is None else 'a ' + type(document).__name__}, not a "
            "mapping with clusters, contexts and users)"
        )
    return document


def _yaml(text: bytes, where: str) -> Any:
    import yaml

    try:
        if yaml.__with_libyaml__:  # the C parser: a tenth of the pure-Python one's time
            return yaml.load(text, Loader=yaml.CSafeLoader)
        return yaml.safe_load(text)
    except UnicodeDecodeError:
        raise KubeconfigError(f"{where}: cannot read it: not UTF-8") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise KubeconfigError(f"{where}: not valid YAML{line}") from None


def _named(document: dict[str, Any], key: str, inner: str) -> dict[str, dict[str, Any]]:
    """A kubeconfig list (``clusters``, ``contexts``, ``users``) by name."""
    entries = document[key] if key != "users" else document.get(key) or []
    if not isinstance(entries, list):
        raise TypeError(f"{key} is not a list")
    named = {}
    for entry in entries:
        value = entry[inner]
        if not isinstance(value, dict):
            raise TypeError(f"{key} entry {entry['name']!r} has no mapping {inner!r}")
        named[str(entry["name"])] = value
    return named


def _select(document: dict[str, Any], context: str | None, path: Path, where: str) -> Kubeconfig:
    clusters = _named(document, "clusters", "cluster")
    contexts = _named(document, "contexts", "context")
    users = _named(document, "users", "user")
    name = context if context is not None else document.get("current-context")
    if not name:
        raise KubeconfigError(f"{where}: no current-context; give --context")
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise KubeconfigError(f"{where}: no context {name!r} (contexts: {known})")
    chosen = contexts[name]
    cluster_name, user_name = chosen.get("cluster"), chosen.get("user")
    if cluster_name not in clusters:
        raise KubeconfigError(f"{where}: its context names an unknown cluster {cluster_name!r}")
    if not user_name:
        raise KubeconfigError(f"{where}: its context {name!r} names no user")
    if user_name not in users:
        raise KubeconfigError(f"{where}: its context names an unknown user {user_name!r}")
    return Kubeconfig(
        _cluster(clusters[cluster_name]),
        _user(users[user_name]),
        str(chosen.get("namespace") or "default"),
        path,
        where,
    )


def _text(entry: Mapping[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def _cluster(entry: Mapping[str, Any]) -> Cluster:
    return Cluster(
        server=_text(entry, "server") or "http://localhost:8080",
        certificate_authority=_text(entry, "certificate-authority"),
        certificate_authority_data=_text(entry, "certificate-authority-data"),
        insecure=bool(entry.get("insecure-skip-tls-verify", False)),
    )


def _user(entry: Mapping[str, Any]) -> User:
    plugin = entry.get("exec")
    return User(
        token=_text(entry, "token"),
        token_file=_text(entry, "tokenFile"),
        exec=_exec(plugin) if plugin else None,
        username=_text(entry, "username"),
        password=_text(entry, "password"),
        client_certificate=_text(entry, "client-certificate"),
        client_certificate_data=_text(entry, "client-certificate-data"),
        client_key=_text(entry, "client-key"),
        client_key_data=_text(entry, "client-key-data"),
        auth_provider=bool(entry.get("auth-provider")),
    )


def _exec(entry: Mapping[str, Any]) -> ExecPlugin:
    command = _text(entry, "command")
    if not command:
        raise ValueError("user.exec has no command")
    return ExecPlugin(
        api_version=_text(entry, "apiVersion") or "",
        command=command,
        args=tuple(str(arg) for arg in entry.get("args") or ()),
        env=tuple((str(var["name"]), str(var["value"])) for var in entry.get("env") or ()),
    )


def tls_context(config: Kubeconfig) -> ssl.SSLContext:
    """The TLS context for ``config``'s server: its CA (else the system's, or none with
    ``insecure-skip-tls-verify``) and the user's client certificate. ``OSError`` names a
    file that cannot be read, ``ValueError`` the field that holds no certificate or key."""
    cluster, user = config.cluster, config.user
    authority = _pem(config, cluster.certificate_authority, cluster.certificate_authority_data)
    try:
        if authority is None:
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cadata=authority.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError):
        raise ValueError(f"{_field('certificate-authority', cluster.certificate_authority)} "
                         "holds no PEM certificate") from None  # fmt: skip
    if cluster.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    certificate = _pem(config, user.client_certificate, user.client_certificate_data)
    key = _pem(config, user.client_key, user.client_key_data)
    if certificate is not None:
        try:
            _load_chain(context, certificate, key)
        except (ssl.SSLError, ValueError):
            raise ValueError(
                f"{_field('client-certificate', user.client_certificate)} and "
                f"{_field('client-key', user.client_key)} are not a PEM certificate and its key"
            ) from None
    return context


def _field(name: str, file: str | None) -> str:
    """How a message names a certificate field: its file, else its inline data."""
    return f"{name} {file}" if file else f"{name}-data"


def _pem(config: Kubeconfig, file: str | None, data: str | None) -> bytes | None:
    """The bytes of a ``*-data`` field (base64) or of the file it names, or None."""
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a certificate or key *-data field is not base64") from None
    if file:
        return Path(config.path(file)).read_bytes()  # OSError names the file
    return None


def _load_chain(context: ssl.SSLContext, certificate: bytes, key: bytes | None) -> None:
    """``load_cert_chain`` reads files only: the PEM goes through private temporary files,
    removed as soon as it is loaded (lightkube kept inline data on disk for the process's
    life)."""
    with tempfile.TemporaryDirectory(prefix="kube-nudge-tls-") as private:
        certfile, keyfile = Path(private) / "tls.crt", Path(private) / "tls.key"
        for path, pem in ((certfile, certificate), (keyfile, key)):
            if pem is not None:
                path.touch(mode=0o600)
                path.write_bytes(pem)
        context.load_cert_chain(certfile, keyfile if key is not None else None)


def reason(exc: BaseException) -> str:
    """An exception as a short one-line reason."""
    text = " ".join(str(exc).split())[:300]
    return text or type(exc).__name__
