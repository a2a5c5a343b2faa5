"""The schema ``kube-nudge plan`` checks manifests against is the one the control plane
publishes: the committed file equals what the local API server serves now
(``tools/api_schemas.py`` rewrites it)."""

from __future__ import annotations

import json

import pytest

from kube_nudge.kube.client import KubeClient
from kube_nudge_dev.apischemas import OPENAPI_PATH, SCHEMA_FILE, document

pytestmark = pytest.mark.cluster


async def test_the_committed_schema_is_what_the_api_server_publishes(kube: KubeClient) -> None:
    served = document(await kube.get(OPENAPI_PATH), str((await kube.get("/version"))["gitVersion"]))
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed["schemas"] == served["schemas"], (
        "src/kube_nudge/app/schemas/core-v1.json is stale: run .venv/bin/python "
        "tools/api_schemas.py"
    )
