"""``plan`` refuses exactly what the API server refuses: every case of the unit tables
(``tests/manifest_verdicts_support.py``) goes to the real API server as ``kubectl`` sends it
(``kubectl create --dry-run=server``: kubectl's own YAML reader, then ``dryRun=All``, nothing
stored), and the server's verdict must be the table's, which the unit test holds ``plan`` to.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from kube_nudge_dev.build import find_binary
from kube_nudge_dev.cluster import LocalCluster
from tests.manifest_verdicts_support import CASES, Case

pytestmark = pytest.mark.cluster

TIMEOUT = 60.0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_api_server_gives_the_tables_verdict(
    cluster: LocalCluster, case: Case, tmp_path: Path
) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(case.text, encoding="utf-8")
    kubectl = find_binary("kubectl")
    assert kubectl is not None, "kubectl is not built (make control-plane)"
    result = await asyncio.to_thread(
        subprocess.run,
        [str(kubectl), f"--kubeconfig={cluster.kubeconfig}", "create", "--dry-run=server",
         "--namespace=default", "-o", "name", "-f", str(path)],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    said = (result.stderr or result.stdout).strip()[:500]
    if case.refused is None:
        assert result.returncode == 0, f"the table takes it, the API server refuses: {said}"
    else:
        assert result.returncode != 0, f"the table refuses it ({case.refused}), kubectl: {said}"
        # Refused for what it holds, by kubectl's reader or the API server, not unreached.
        assert "connect" not in said and "not found" not in said, said
