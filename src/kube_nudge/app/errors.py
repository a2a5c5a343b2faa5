"""How the commands fail: exit codes, and one line on stderr that says what to fix.

Every command validates its flags first (exit code 2, before anything is sent to a cluster),
then connects. Whatever goes wrong after that is one line naming the API server, the verb and
the resource, never a traceback (``cli.main`` has the last word on anything unforeseen).
"""

from __future__ import annotations

import argparse
from typing import Final
from urllib.parse import urlsplit

from kube_nudge.kube.client import ApiError, KubeClient, KubeconfigError

__all__ = [
    "CLUSTER_REFUSED",
    "EXIT_CLUSTER",
    "EXIT_UNVERIFIED",
    "EXIT_USAGE",
    "CommandError",
    "UsageError",
    "api_failure",
    "connect",
    "describe_api_error",
    "one_line",
]

#: A flag, an argument or the kubeconfig is wrong; nothing was sent to a cluster.
EXIT_USAGE: Final = 2
#: The command could not finish: the API server was unreachable or refused a request
#: (unauthorized, forbidden, another error), or something unforeseen went wrong.
EXIT_CLUSTER: Final = 5
#: ``status`` and ``wait``: no drift found, but some workload could not be verified: the user
#: may not read the installation key (to compare hashes), a source, or the pods.
EXIT_UNVERIFIED: Final = 6
#: The row of ``EXIT_CLUSTER`` in the exit-code table of a command that reads the cluster
#: (its ``--help``), the same words in each.
CLUSTER_REFUSED: Final = (EXIT_CLUSTER, "the API server was unreachable or refused a request")

_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class CommandError(Exception):
    """Ends a command with ``code`` and the one-line ``message`` (``kube-nudge: `` prefixed)."""

    def __init__(self, message: str, code: int = EXIT_CLUSTER) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    """A bad flag or argument: exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


def one_line(message: object) -> str:
    """``message`` on one line: line breaks and other control characters escaped (a value
    quoted in it may hold any of them)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(message))


def connect(args: argparse.Namespace) -> KubeClient:
    """A client from ``--kubeconfig``/``--context``; ``UsageError`` when no kubeconfig is
    usable (missing, junk, unknown context)."""
    try:
        return KubeClient.from_config(args.kubeconfig, context=args.context)
    except KubeconfigError as exc:
        raise UsageError(str(exc)) from None


def api_failure(exc: ApiError, client: KubeClient | None = None) -> CommandError:
    """``exc`` as the error that ends a command (exit code 5)."""
    return CommandError(describe_api_error(exc, client))


def describe_api_error(exc: ApiError, client: KubeClient | None = None) -> str:
    """One line for a person: which server, which verb on which resource, and why."""
    server = _server(client)
    what = _request(exc)
    if exc.status == 0:
        failure = exc.message.split(" talking to ")[0]
        doing = f" to {what}" if what else ""
        return f"cannot reach the API server {server}{doing} ({failure}): is it up, the right one?"
    if exc.status == 401:
        return (
            f"unauthorized: the API server {server} refused the kubeconfig's credentials "
            f"({what or 'any request'}); log in again or check --context"
        )
    if exc.status == 403:
        said = f": {exc.message}" if exc.message else ""
        return f"forbidden: may not {what or 'make a request'} on {server}{said}"
    said = f"{exc.status} {exc.reason}".strip() + (f": {exc.message}" if exc.message else "")
    return f"{what} on {server}: {said}" if what else f"{server}: {said}"


def _server(client: KubeClient | None) -> str:
    if client is None:
        return "(unknown)"
    return client.server


def _request(exc: ApiError) -> str:
    """``list deployments.apps in namespace "team"`` from the request that failed."""
    if not exc.path:
        return ""
    parts = [p for p in urlsplit(exc.path).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return f"{exc.method} {exc.path}"
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return f"{exc.method} {exc.path}"
    resource = rest[0] + (f".{group}" if group else "")
    name = rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource += "/" + rest[2]
    if exc.method == "GET":
        verb = "get" if name is not None else "list"
    else:
        verb = _VERBS.get(exc.method, exc.method.lower())
        if verb == "delete" and name is None:
            verb = "deletecollection"
    text = f"{verb} {resource}" + (f" {name!r}" if name is not None else "")
    return text + (f" in namespace {namespace!r}" if namespace is not None else "")
