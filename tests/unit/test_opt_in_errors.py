"""A workload left out because its opt-in is not a boolean is said once per message: one
Warning Event and one log line, however often its watch sees it again, with no state in the
handler (the Events' own memory, bounded by the recorder); a new message is said again, and
a workload whose opt-in is fixed, or that has no uid, says nothing."""

from __future__ import annotations

import logging
from typing import Any

import httpx2 as httpx
import pytest

from kube_nudge.controller.handlers import OptInErrors
from kube_nudge.kube.client import ClientOptions
from kube_nudge.kube.events import EventRecorder
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge.model import WorkloadDefaults
from kube_nudge.runtime.events import BackgroundEvents
from kube_nudge_dev.admin import AdminClient
from tests.unit.httpx_support import HttpxTransport

DEPLOYMENT = BUILTIN_KINDS[0]


def deployment(enabled: str, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"namespace": "a", "name": "web", "uid": uid,
                         "annotations": {"kube-nudge.io/enabled": enabled}}}  # fmt: skip


async def test_each_message_is_said_once_however_often_the_watch_sees_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    posted: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST", request  # a repeat is not even counted
        posted.append(httpx.Response(200, content=request.content).json())
        return httpx.Response(201, content=request.content)

    http = httpx.AsyncClient(base_url="https://api.invalid", transport=httpx.MockTransport(answer))
    client = AdminClient(HttpxTransport(http), ClientOptions())
    events = BackgroundEvents(EventRecorder(client), on_failure=lambda: None)
    report = OptInErrors(events, WorkloadDefaults())
    try:
        with caplog.at_level(logging.WARNING, logger="kube_nudge"):
            for enabled in ("yes", "yes", "on", "yes", "true", "on"):
                report(DEPLOYMENT, deployment(enabled))
                report(DEPLOYMENT, deployment(enabled))  # queued, not yet posted: still once
                await events.flush()
                report(DEPLOYMENT, deployment(enabled))  # remembered by the recorder
            report(DEPLOYMENT, deployment("yes", uid=""))
            await events.flush()
    finally:
        await client.aclose()
    said = [e["message"] for e in posted]
    got = [message.partition(" (also accepted")[0] for message in said]
    assert got == [
        f'kube-nudge.io/enabled must be "true" or "false", got "{v}"' for v in ("yes", "on")
    ]
    assert {e["reason"] for e in posted} == {"InvalidAnnotation"}
    logged = [r.getMessage() for r in caplog.records if "not opted in" in r.getMessage()]
    assert logged == [f"Deployment a/web: not opted in: {m}" for m in said]
