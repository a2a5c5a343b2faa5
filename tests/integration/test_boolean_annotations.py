"""A mistyped opt-in is never silent: `kube-nudge.io/enabled: "yes"` (or, with --compat,
Reloader's `auto: "on"`) gets the Warning Event `InvalidAnnotation` and a log line, like
every other bad annotation value; the accepted spellings (`"True"` among them) opt in."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import CONFIGMAPS, DEPLOYMENTS
from kube_nudge.model import BASELINE_HASH
from kube_nudge_dev import manifests
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import events, running_controller

pytestmark = pytest.mark.cluster


async def invalid_annotation_events(
    kube: KubeClient, namespace: str, names: set[str]
) -> dict[str, str]:
    """The InvalidAnnotation message of each of ``names`` once each one has it."""
    found: dict[str, str] = {}
    async with asyncio.timeout(30):
        while not names <= set(found):
            for event in await events(kube, namespace, "InvalidAnnotation"):
                found[event["involvedObject"]["name"]] = event["message"]
            await asyncio.sleep(0.2)
    return found


@pytest.mark.parametrize("compat", [False, True])
async def test_a_mistyped_opt_in_gets_a_warning_event_and_a_log_line(
    kube: KubeClient,
    cluster: LocalCluster,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
    compat: bool,
) -> None:
    await kube.create(CONFIGMAPS.path(namespace), manifests.configmap("app", {"K": "1"}))
    typos: dict[str, dict[str, Any]] = {
        "yes": {"kube-nudge.io/enabled": "yes"},
        "on": {"kube-nudge.io/enabled": "on"},
    }
    if compat:
        typos["auto-on"] = {"reloader.stakater.com/auto": "on"}
        typos["wave-yes"] = {"wave.pusher.com/update-on-config-change": "yes"}
    spellings = {"capital": {"kube-nudge.io/enabled": "True"}}
    for name, given in {**typos, **spellings}.items():
        spec = manifests.env_consumer("K")
        await kube.create(
            DEPLOYMENTS.path(namespace),
            manifests.deployment(name, spec=spec, annotations=given),
        )
    with caplog.at_level(logging.WARNING, logger="kube_nudge"):
        async with running_controller(cluster, namespace, compat=compat):
            # "True" is one of the accepted spellings: adopted like "true".
            await wait_for_object(
                kube, DEPLOYMENTS.path(namespace), "capital",
                lambda o: BASELINE_HASH in o["metadata"].get("annotations", {}), timeout=30,
            )  # fmt: skip
            found = await invalid_annotation_events(kube, namespace, set(typos))
    for name, given in typos.items():
        [(annotation, value)] = given.items()
        assert f'{annotation} must be "true" or "false", got "{value}"' in found[name]
        assert any(
            f"Deployment {namespace}/{name}: not opted in: " in r.getMessage()
            for r in caplog.records
        ), name
        obj = await kube.get(DEPLOYMENTS.path(namespace, name))
        assert BASELINE_HASH not in obj["metadata"].get("annotations", {})  # left alone
    assert "capital" not in found
