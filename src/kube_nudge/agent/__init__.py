"""``kube-nudge agent``: a sidecar that reloads an app in place when its mounted config changes.

Standard library only (plus ``kube_nudge.__version__`` and the two stdlib-only modules it shares
with the controller: ``kube_nudge.logrecords``, its log lines, and ``kube_nudge.agentwire``,
what it writes on its pod), so a running agent stays small: it must never import the
controller's layers or their dependencies (see ``LEAN_EXCLUDED``).
"""

from __future__ import annotations

# Imported by the controller and its command line, never by the agent: loading any of them
# means the agent is not running lean (``kube_nudge.app.agent_command`` re-executes then).
LEAN_EXCLUDED = (
    "lightkube",
    "httpx2",
    "aiohttp",
    "orjson",
    "prometheus_client",
    "uvicorn",
    "h11",
    "starlette",
    "kube_nudge.model",
    "kube_nudge.kube",
    "kube_nudge.runtime",
    "kube_nudge.notifications",
    "kube_nudge.strategies",
    "kube_nudge.controller",
)
