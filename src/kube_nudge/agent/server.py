"""``/healthz`` and ``/metrics`` over the standard library's HTTP server, in a thread."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kube_nudge.agent.metrics import CONTENT_TYPE, AgentMetrics

Health = Callable[[], str | None]  # None when healthy, else why not


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    metrics: AgentMetrics
    health: Health


class _V6Server(_Server):
    address_family = socket.AF_INET6


class _DualStackServer(_V6Server):
    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.server.metrics.render(), CONTENT_TYPE)
        elif path == "/healthz":
            problem = self.server.health()
            self._send(200 if problem is None else 503, f"{problem or 'ok'}\n")
        else:
            self._send(404, "not found: try /healthz or /metrics\n")

    def _send(self, status: int, text: str, content_type: str = "text/plain") -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes and scrapes are not worth a log line each."""


def start_server(address: tuple[str, int], metrics: AgentMetrics, health: Health) -> _Server:
    """Bind ``address`` (OSError if taken) and serve in a daemon thread; ``shutdown()`` stops.

    An empty host means every address, IPv4 and IPv6 where the kernel has both.
    """
    host, port = address
    cls: type[_Server] = _V6Server if ":" in host else _Server
    if not host and socket.has_dualstack_ipv6():
        cls, address = _DualStackServer, ("::", port)
    server = cls(address, _Handler)
    server.metrics = metrics
    server.health = health
    threading.Thread(target=server.serve_forever, name="agent-http", daemon=True).start()
    return server
