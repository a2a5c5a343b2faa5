"""Accounts with chosen rights, as kubeconfigs: a ServiceAccount in a test namespace, bound
to a ClusterRole or given a Role of its own rules, reached with a token of its own."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kube_nudge.kube.client import KubeClient
from kube_nudge.kube.resources import SERVICEACCOUNTS, Resource
from kube_nudge_dev.cluster import LocalCluster

RBAC = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC, "v1", "roles", "Role")
ROLEBINDINGS = Resource(RBAC, "v1", "rolebindings", "RoleBinding")

Rule = dict[str, Sequence[str]]
"""One RBAC policy rule: apiGroups, resources, verbs."""


async def account_kubeconfig(
    kube: KubeClient,
    cluster: LocalCluster,
    namespace: str,
    name: str,
    into: Path,
    *,
    cluster_role: str | None = None,
    rules: Sequence[Rule] = (),
) -> Path:
    """A kubeconfig of ServiceAccount ``name`` in ``namespace`` (written as
    ``into/NAME.kubeconfig``), bound in ``namespace`` to ``cluster_role`` or, when ``rules``
    are given, to a Role of those rules; neither: an account with no rights at all."""
    await kube.create(SERVICEACCOUNTS.path(namespace), {"metadata": {"name": name}})
    role: dict[str, str] | None = None
    if rules:
        await kube.create(ROLES.path(namespace), {"metadata": {"name": name}, "rules": rules})
        role = {"apiGroup": RBAC, "kind": "Role", "name": name}
    elif cluster_role is not None:
        role = {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster_role}
    if role is not None:
        await kube.create(ROLEBINDINGS.path(namespace), {
            "metadata": {"name": name}, "roleRef": role,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        })  # fmt: skip
    token = await kube.create(
        SERVICEACCOUNTS.path(namespace, name, "token"),
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    config: dict[str, Any] = json.loads(cluster.kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token["status"]["token"]}}]
    config["contexts"][0]["context"]["user"] = name
    kubeconfig = into / f"{name}.kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    return kubeconfig
