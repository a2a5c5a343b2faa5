"""Write ``src/kube_nudge/app/schemas/core-v1.json``, the part of the API's published OpenAPI
schema that ``kube-nudge plan`` checks manifests against, from a local control plane
(``kube_nudge_dev.apischemas``). Run from the repository root after changing the pinned
Kubernetes release:

    .venv/bin/python tools/api_schemas.py
"""

from __future__ import annotations

import asyncio
import json
import sys

from kube_nudge.kube.client import KubeClient
from kube_nudge_dev.apischemas import OPENAPI_PATH, SCHEMA_FILE, document
from kube_nudge_dev.cluster import LocalCluster


async def _fetch(kubeconfig: str) -> tuple[dict[str, object], str]:
    client = KubeClient.from_config(kubeconfig)
    try:
        version = await client.get("/version")
        return await client.get(OPENAPI_PATH), str(version.get("gitVersion"))
    finally:
        await client.aclose()


def main() -> int:
    with LocalCluster() as cluster:
        openapi, kubernetes = asyncio.run(_fetch(str(cluster.kubeconfig)))
    text = json.dumps(document(openapi, kubernetes), indent=1, sort_keys=True) + "\n"
    SCHEMA_FILE.write_text(text)
    print(f"wrote {SCHEMA_FILE} from Kubernetes {kubernetes}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
