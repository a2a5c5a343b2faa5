"""The admin client of the tests, the bench and the demo: the product's ``KubeClient`` plus
the verbs only they need. The product writes through ``kube/patches.py`` alone (one patch
type, preconditions in the body) and deletes only with preconditions; the tests, the bench
and the demo set up and change their objects freely: they delete namespaces, sources, pods
and cluster-scoped objects, and merge-patch sources, workloads and pods."""

from __future__ import annotations

from kube_nudge.kube.client import JSON, MERGE_PATCH, KubeClient

__all__ = ["AdminClient"]


class AdminClient(KubeClient):
    """``KubeClient`` with ``delete`` and ``merge_patch``: the tests' session client, the
    accounts whose rights a test probes, the bench's and the demo's client. An
    ``AdminClient`` is a ``KubeClient``: the product accepts it where it takes one."""

    async def delete(self, path: str) -> JSON:
        """DELETE one object."""
        return await self.request("DELETE", path)

    async def merge_patch(self, path: str, body: JSON) -> JSON:
        """JSON merge patch (RFC 7386) of one object, through ``request``: the client's
        write budget and retries."""
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH)
