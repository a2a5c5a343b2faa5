"""The tests' admin client: the product's ``KubeClient`` plus the verbs only tests need. The
product deletes only with preconditions, through ``KubeClient.request``; the tests delete
namespaces, sources, pods and the cluster-scoped objects they applied."""

from __future__ import annotations

from typing import Any

from kube_nudge.kube.client import JSON, KubeClient

__all__ = ["AdminClient"]


class AdminClient(KubeClient):
    """``KubeClient`` with ``delete``: the session's admin client, and the accounts whose
    rights a test probes (a delete they must be refused)."""

    @classmethod
    def from_config(cls, *args: Any, **kwargs: Any) -> AdminClient:
        """``KubeClient.from_config``, typed as what it builds: an ``AdminClient``."""
        client = super().from_config(*args, **kwargs)
        assert isinstance(client, AdminClient)
        return client

    async def delete(self, path: str) -> JSON:
        """DELETE one object."""
        return await self.request("DELETE", path)
