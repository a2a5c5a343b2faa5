"""At start, ``kube-nudge run`` says which Kubernetes it talks to, and warns in one line when
that is outside the supported window (``model/kubeversion.py``)."""

from __future__ import annotations

import logging

from kube_nudge.kube.client import ApiError, KubeClient
from kube_nudge.model.kubeversion import (
    ServerVersion,
    parse_server_version,
    support_window,
    version_warning,
)

log = logging.getLogger(__name__)


async def log_server_version(client: KubeClient) -> ServerVersion | None:
    """Read ``/version``, log it, and log one Warning line outside the window. Never
    raises for the server's sake: a version it cannot read is that one Warning line."""
    try:
        body = await client.get("/version")
    except (ApiError, TimeoutError) as exc:
        log.warning(
            "cannot read the API server's version (%s); kube-nudge supports Kubernetes %s",
            exc,
            support_window(),
        )
        return None
    version = parse_server_version(body) if isinstance(body, dict) else None
    if version is not None:
        log.info("Kubernetes server %s (supported: %s)", version.git_version, support_window())
    warning = version_warning(version)
    if warning is not None:
        log.warning("%s", warning)
    return version
