"""SECURITY.md: a Secret value never appears in logs, Events, metrics, annotations or any
command's output, nor does an unkeyed digest of it. Here the session's canary sits in the
key a workload consumes (so every digest and change of it goes through the controller),
changes to a second canary, and every command that reads the cluster runs on it; each
output, the workload, the Events and the metrics are searched for every needle of
``leak_support`` (conftest searches the logs and every other test's output at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kube_nudge.kube.resources import CORE_EVENTS, DEPLOYMENTS, SECRETS
from kube_nudge.kube.workloads import BUILTIN_KINDS
from kube_nudge_dev import manifests
from kube_nudge_dev.admin import AdminClient
from kube_nudge_dev.cluster import LocalCluster
from kube_nudge_dev.confighash import expected_hash
from kube_nudge_dev.manifests import CANARY_NEXT, ENABLED
from kube_nudge_dev.waiting import wait_for_object
from tests.integration.controller_support import (
    cli_as,
    kube_nudge_cli,
    running_controller,
    template_hash,
)
from tests.integration.leak_support import PUBLIC_KEY, add_public_key_hashes, leaks

pytestmark = pytest.mark.cluster
DEPLOYMENT = BUILTIN_KINDS[0]


def canary_consumer() -> dict[str, object]:
    """A pod spec reading the canary key into an env var and the whole Secret as a volume."""
    ref = {"secretKeyRef": {"name": "db", "key": "canary"}}
    return manifests.pod_spec(
        containers=[{"name": "app", "image": "registry.invalid/app:1",
                     "env": [{"name": "TOKEN", "valueFrom": ref}],
                     "volumeMounts": [{"name": "db", "mountPath": "/etc/db"}]}],
        volumes=[{"name": "db", "secret": {"secretName": "db"}}],
    )  # fmt: skip


async def test_no_command_output_event_metric_or_annotation_holds_a_secret_value(
    kube: AdminClient, cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    await kube.create(SECRETS.path(namespace), manifests.secret("db", {"user": "app"}))
    web = await kube.create(DEPLOYMENTS.path(namespace),
                            manifests.deployment("web", spec=canary_consumer(),
                                                 annotations=ENABLED))  # fmt: skip
    public = await expected_hash(kube, DEPLOYMENT.template_path, web, PUBLIC_KEY)
    add_public_key_hashes({"the canary's consumer": public})
    assert leaks([f"desired {public}"]) == ["public-key config hash of the canary's consumer"]
    # What `plan` reads: the Secret as it would be applied, the consumed key changed.
    planned = tmp_path / "db.yaml"
    changed = manifests.secret("db", {"user": "app"})
    changed["stringData"]["canary"] = CANARY_NEXT
    planned.write_text(
        yaml.safe_dump({**changed, "metadata": {"name": "db", "namespace": namespace}})
    )
    outputs: dict[str, str] = {}
    codes: dict[str, int] = {}
    async with running_controller(cluster, namespace) as running:
        # wait first: right after the rollout, status could still see it rolling.
        commands = {
            "wait secret": ("wait", "secret/db", "--timeout=60s"),
            "plan": ("plan", "-f", str(planned)),
            "plan json": ("plan", "-f", str(planned), "-o", "json"),
            "status": ("status",),
            "status json": ("status", "-o", "json", "--all"),
        }
        for label, (command, *args) in commands.items():
            codes[f"{label} before"], out, err = await cli_as(
                cluster.kubeconfig, namespace, command, *args
            )
            outputs[f"{label} before"] = out + err
        await kube.merge_patch(
            SECRETS.path(namespace, "db"), {"stringData": {"canary": CANARY_NEXT}}
        )
        rolled = await wait_for_object(
            kube, DEPLOYMENTS.path(namespace), "web",
            lambda o: template_hash(o, DEPLOYMENT) is not None, timeout=30,
        )  # fmt: skip
        after = await expected_hash(kube, DEPLOYMENT.template_path, rolled, PUBLIC_KEY)
        add_public_key_hashes({"the canary's consumer, changed": after})
        for label, (command, *args) in commands.items():
            codes[f"{label} after"], out, err = await cli_as(
                cluster.kubeconfig, namespace, command, *args
            )
            outputs[f"{label} after"] = out + err
        for command, *targets in (("migrate",), ("release", "deployment/web"),
                                  ("approve", "deployment/web")):  # fmt: skip
            _, outputs[command] = await kube_nudge_cli(cluster, namespace, command, *targets)
        metrics = running.metrics.render()[0].decode()
        events = await kube.get(CORE_EVENTS.path(namespace))
    # Every command ran to its end (plan: 1, a rollout planned; status: 0, no drift) ...
    assert codes == {
        "plan before": 1, "plan json before": 1, "status before": 0, "status json before": 0,
        "wait secret before": 0, "plan after": 0, "plan json after": 0, "status after": 0,
        "status json after": 0, "wait secret after": 0,
    }, outputs  # fmt: skip
    # ... and the needles find the canary where it is.
    secret = await kube.get(SECRETS.path(namespace, "db"))
    assert leaks(secret["data"].values()) == ["next canary: base64"]

    assert {label: found for label, text in outputs.items() if (found := leaks([text]))} == {}
    assert leaks([yaml.safe_dump(rolled)]) == []  # its annotations
    assert leaks([metrics]) == []
    assert leaks([yaml.safe_dump(events)]) == []
